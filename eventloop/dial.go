package eventloop

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/panjf2000/gnet/v2/pkg/socket"
	"golang.org/x/sys/unix"
)

// DialOptions are the settings of an outgoing connection besides its peer.
type DialOptions struct {
	// Unix, when set, is the path of a unix-domain stream socket to connect to
	// instead of the address.
	Unix string
	// Timeout bounds the connect (0: none).
	Timeout time.Duration
	// Local is the source address bound before connecting; the zero value lets
	// the kernel choose. A port of 0 binds the address alone
	// (IP_BIND_ADDRESS_NO_PORT: the port is picked at connect, so one source
	// address does not run out of ports for its connections to different peers).
	Local netip.AddrPort
	// Transparent sets IP_TRANSPARENT (IPV6_TRANSPARENT) before the bind, so Local
	// may be an address this host does not own; the kernel wants CAP_NET_ADMIN.
	Transparent bool
	// KeepAlive sets SO_KEEPALIVE.
	KeepAlive bool
}

// SetupError is a failure to prepare an outgoing socket before it connects
// (socket, a socket option, bind): the fault of this host, not of the peer.
type SetupError struct {
	Op   string // "socket", "setsockopt(IP_TRANSPARENT)", "bind(127.0.0.2)"...
	Peer string
	Err  error
}

func (e *SetupError) Error() string { return fmt.Sprintf("dial %s: %s: %v", e.Peer, e.Op, e.Err) }
func (e *SetupError) Unwrap() error { return e.Err }

// Dial starts a non-blocking TCP connect to addr owned by this loop, served by
// h with ctx as its Context. The outcome arrives as a callback: h.OnOpen once
// connected, or h.OnClose with the connect error (ErrDialTimeout after timeout
// if timeout > 0) without OnOpen. Output written before OnOpen is queued.
// Call it on the loop's thread (from a handler, timer or task).
func (l *Loop) Dial(addr netip.AddrPort, timeout time.Duration, h Handler, ctx any) (Conn, error) {
	return l.DialWith(addr, DialOptions{Timeout: timeout}, h, ctx)
}

// DialWith is Dial with socket settings: a unix-domain peer, a source address,
// SO_KEEPALIVE. An error of the socket's set-up is a *SetupError; one of the
// connect itself (refused at once, as a unix socket whose queue is full is)
// is not.
func (l *Loop) DialWith(addr netip.AddrPort, o DialOptions, h Handler, ctx any) (Conn, error) {
	family, proto := unix.AF_UNIX, 0
	if o.Unix == "" {
		family, proto = inetFamily(addr), unix.IPPROTO_TCP
	}
	// The peer's name is for errors only: made when one happens, not per dial.
	peer := func() string {
		if o.Unix != "" {
			return "unix:" + o.Unix
		}
		return addr.String()
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, &SetupError{Op: "socket", Peer: peer(), Err: err}
	}
	if err := setupDialSocket(fd, family, o); err != nil {
		_ = unix.Close(fd)
		err.Peer = peer()
		return nil, err
	}
	// Even an immediate success waits for EPOLLOUT, so OnOpen never runs
	// inside Dial and the outcome always arrives the same way.
	if o.Unix != "" {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: o.Unix})
	} else {
		err = connectInet(fd, addr)
	}
	if err != nil && err != unix.EINPROGRESS {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("dial %s: connect: %w", peer(), err)
	}
	c := l.newConn(fd, h)
	c.ctx = ctx
	if o.Unix == "" {
		c.remote = packAddr(addr)
	}
	if err := l.registerConn(c, connConnecting); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("dial %s: %w", peer(), err)
	}
	if o.Timeout > 0 {
		c.timer.Reset(o.Timeout)
	}
	return c, nil
}

// setupDialSocket applies o to a new socket, nginx's order
// (ngx_event_connect_peer): SO_KEEPALIVE, then for a source address
// IP_TRANSPARENT, IP_BIND_ADDRESS_NO_PORT and the bind.
func setupDialSocket(fd, family int, o DialOptions) *SetupError {
	if family != unix.AF_UNIX {
		_ = socket.SetNoDelay(fd, 1)
	}
	if o.KeepAlive {
		// As nginx, a failure here is not worth refusing the connection over.
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	}
	if !o.Local.IsValid() {
		return nil
	}
	local, localFamily := toSockaddr(o.Local)
	if o.Transparent {
		level, opt, name := unix.IPPROTO_IP, unix.IP_TRANSPARENT, "setsockopt(IP_TRANSPARENT)"
		if localFamily == unix.AF_INET6 {
			level, opt, name = unix.IPPROTO_IPV6, unix.IPV6_TRANSPARENT, "setsockopt(IPV6_TRANSPARENT)"
		}
		if err := unix.SetsockoptInt(fd, level, opt, 1); err != nil {
			return &SetupError{Op: name, Err: err}
		}
	}
	if family != unix.AF_UNIX && o.Local.Port() == 0 {
		// Not every kernel has it: without it the bind picks the port.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	}
	if err := unix.Bind(fd, local); err != nil {
		name := o.Local.String()
		if o.Local.Port() == 0 {
			name = o.Local.Addr().String()
		}
		return &SetupError{Op: "bind(" + name + ")", Err: err}
	}
	return nil
}

// finishConnect runs on the first event of a connecting socket: writable
// means connected unless SO_ERROR says otherwise.
func (c *conn) finishConnect() {
	errno, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && errno != 0 {
		err = unix.Errno(errno)
	}
	if err != nil {
		if c.remote.fam == 0 {
			c.closeNow(fmt.Errorf("connect: %w", err)) // a unix-domain peer
			return
		}
		c.closeNow(fmt.Errorf("connect %s: %w", c.RemoteAddr(), err))
		return
	}
	c.timer.Stop()
	c.state = connOpen
	c.updateEvents()
	c.h.OnOpen(c)
}
