package pool_test

import (
	"io"
	"net"
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

func dialTCP(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }

func readAll(c net.Conn) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, c)
	return int(n), err
}
