package pool_test

import (
	"io"
	"net"
	"syscall"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// writeOnData answers the first bytes it receives with out, then closes.
type writeOnData struct{ out []byte }

func (h writeOnData) OnOpen(eventloop.Conn) {}
func (h writeOnData) OnData(c eventloop.Conn, _ []byte) {
	_, _ = c.Write(h.out)
	_ = c.Close()
}
func (h writeOnData) OnWriteBlocked(eventloop.Conn) {}
func (h writeOnData) OnWritable(eventloop.Conn)     {}
func (h writeOnData) OnTimeout(c eventloop.Conn)    { _ = c.Close() }
func (h writeOnData) OnClose(eventloop.Conn, error) {}

// dialTCP connects with a small receive buffer, so that a large write from the loop
// cannot all sit in the kernel's socket buffers: part of it is queued by the loop in
// buffers from its pool, which the tests count.
func dialTCP(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	return d.Dial("tcp", addr)
}

func readAll(c net.Conn) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, c)
	return int(n), err
}
