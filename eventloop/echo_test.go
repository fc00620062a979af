package eventloop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
)

func TestEchoAndConnAPI(t *testing.T) {
	type state struct{ n int }
	closed := make(chan error, 1)
	var local, remote netip.AddrPort
	h := &funcHandler{
		open: func(c Conn) {
			c.SetContext(&state{})
			local, remote = c.LocalAddr(), c.RemoteAddr()
		},
		data: func(c Conn, b []byte) {
			st := c.Context().(*state)
			st.n += len(b)
			_, _ = c.Writev([][]byte{b[:1], b[1:]})
		},
		close: func(c Conn, err error) { closed <- err },
	}
	pool := NewHeapPool()
	l, addr := startLoop(t, Config{Handler: h, Pool: pool})
	c := dial(t, addr)
	for _, msg := range []string{"hello", "world, again", "x"} {
		if got := roundTrip(t, c, msg); got != msg {
			t.Fatalf("echo %q, want %q", got, msg)
		}
	}
	onLoop(t, l, func() {}) // orders the handler's writes before the reads below
	if remote.String() != c.LocalAddr().String() || local.String() != addr {
		t.Errorf("server saw local %s remote %s; client is %s -> %s", local, remote, c.LocalAddr(), addr)
	}
	_ = c.Close()
	if err := recv(t, closed); !errors.Is(err, io.EOF) {
		t.Errorf("OnClose err = %v, want EOF", err)
	}
	if pool.Outstanding() != 1 {
		t.Errorf("buffers outstanding after close: %d, want only the loop's read buffer", pool.Outstanding())
	}
	if s := l.Stats(); s.Accepted != 1 || s.Closed != 1 || s.Conns != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestCloseFlushesQueuedOutput(t *testing.T) {
	// More than the kernel's largest send buffer (tcp_wmem's 4 MiB), to a client with
	// a small receive window: the write cannot all go out at once.
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i)
	}
	h := &funcHandler{data: func(c Conn, b []byte) {
		_, _ = c.Write(big)
		if c.Queued() == 0 {
			t.Error("8 MiB went out at once: nothing left to flush")
		}
		_ = c.Close()
	}}
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
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d of %d bytes before EOF: %v", len(got), len(big), err)
	}
}
