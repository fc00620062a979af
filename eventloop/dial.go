package eventloop

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/panjf2000/gnet/v2/pkg/socket"
	"golang.org/x/sys/unix"
)

// Dial starts a non-blocking TCP connect to addr owned by this loop, served by
// h with ctx as its Context. The outcome arrives as a callback: h.OnOpen once
// connected, or h.OnClose with the connect error (ErrDialTimeout after timeout
// if timeout > 0) without OnOpen. Output written before OnOpen is queued.
// Call it on the loop's thread (from a handler, timer or task).
func (l *Loop) Dial(addr netip.AddrPort, timeout time.Duration, h Handler, ctx any) (Conn, error) {
	sa, family := toSockaddr(addr)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, fmt.Errorf("dial %s: socket: %w", addr, err)
	}
	_ = socket.SetNoDelay(fd, 1)
	// Even an immediate success waits for EPOLLOUT, so OnOpen never runs
	// inside Dial and the outcome always arrives the same way.
	if err := unix.Connect(fd, sa); err != nil && err != unix.EINPROGRESS {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("dial %s: connect: %w", addr, err)
	}
	c := l.newConn(fd, h)
	c.remote, c.ctx = addr, ctx
	if err := l.registerConn(c, connConnecting); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if timeout > 0 {
		c.timer.Reset(timeout)
	}
	return c, nil
}

// finishConnect runs on the first event of a connecting socket: writable
// means connected unless SO_ERROR says otherwise.
func (c *conn) finishConnect() {
	errno, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && errno != 0 {
		err = unix.Errno(errno)
	}
	if err != nil {
		c.closeNow(fmt.Errorf("connect %s: %w", c.remote, err))
		return
	}
	c.timer.Stop()
	c.state = connOpen
	c.updateEvents()
	c.h.OnOpen(c)
}
