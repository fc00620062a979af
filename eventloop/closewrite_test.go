package eventloop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
)

// TestCloseWriteKeepsReading: CloseWrite sends EOF after the queued output, writes
// fail from then on, and input is still delivered until the peer closes (what a
// lingering close needs).
func TestCloseWriteKeepsReading(t *testing.T) {
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i)
	}
	after := make(chan string, 4)
	closed := make(chan error, 1)
	writeErr := make(chan error, 1)
	h := &funcHandler{
		data: func(c Conn, b []byte) {
			if c.Context() != nil {
				after <- string(b)
				return
			}
			c.SetContext(true)
			_, _ = c.Write(big)
			if c.Queued() == 0 {
				t.Error("8 MiB went out at once: nothing left to flush")
			}
			c.CloseWrite()
			_, err := c.Write([]byte("late"))
			writeErr <- err
		},
		close: func(c Conn, err error) { closed <- err },
	}
	_, addr := startLoop(t, Config{Handler: h})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("go")); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, writeErr); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after CloseWrite: %v, want ErrClosed", err)
	}
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d of %d bytes before EOF: %v", len(got), len(big), err)
	}
	if _, err := c.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, after); got != "more" {
		t.Errorf("read after CloseWrite: %q", got)
	}
	c.(*net.TCPConn).CloseWrite()
	if err := recv(t, closed); !errors.Is(err, io.EOF) {
		t.Errorf("OnClose err = %v, want EOF", err)
	}
}
