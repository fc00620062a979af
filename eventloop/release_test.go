package eventloop

import (
	"net"
	"net/netip"
	"testing"
	"time"
	"unsafe"
)

// TestReleaseReusesFromNextBatch: a connection released in its OnClose is not
// handed out by a Dial in that same callback (code up the stack may still look
// at it), an open one is not taken at all, and the next accepted connection,
// in a later batch, reuses the released one's memory.
func TestReleaseReusesFromNextBatch(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Addr().String())

	type closed struct{ released, dialed Conn }
	closes := make(chan closed, 1)
	opens := make(chan Conn, 2)
	openReleased := make(chan bool, 2)
	h := &funcHandler{
		open: func(c Conn) {
			l := c.Loop()
			l.Release(c) // open: ignored
			openReleased <- l.freeConns.Released()
			opens <- c
		},
		close: func(c Conn, err error) {
			l := c.Loop()
			l.Release(c)
			d, err := l.Dial(upAddr, time.Minute, &funcHandler{}, nil)
			if err != nil {
				t.Error(err)
			}
			closes <- closed{c, d}
		},
	}
	l, addr := startLoop(t, Config{Handler: h})

	first := dial(t, addr)
	c1 := recv(t, opens)
	if recv(t, openReleased) {
		t.Fatal("an open connection was released")
	}
	first.Close()
	got := recv(t, closes)
	if got.released != c1 {
		t.Fatal("OnClose for another connection")
	}
	if got.dialed == got.released {
		t.Fatal("Dial in the releasing callback reused the released connection")
	}

	second := dial(t, addr)
	defer second.Close()
	c2 := recv(t, opens)
	recv(t, openReleased)
	if c2 != c1 {
		t.Fatal("the next accepted connection did not reuse the released one")
	}
	if c2.RemoteAddr().String() != second.LocalAddr().String() {
		t.Fatalf("reused connection's peer %v, want %v", c2.RemoteAddr(), second.LocalAddr())
	}
	if got := roundTripOpen(t, l, c2); got != nil {
		t.Fatal(got)
	}
}

// roundTripOpen checks on the loop that c is open again.
func roundTripOpen(t *testing.T, l *Loop, c Conn) error {
	var err error
	onLoop(t, l, func() { _, err = c.Write([]byte("x")) })
	return err
}

// TestConnSize: an idle keep-alive connection holds this struct (and the HTTP
// layer's); it stays within the 256-byte size class (proxy's
// TestIdleConnectionBytes measures the whole).
func TestConnSize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 256 {
		t.Fatalf("conn is %d bytes, want at most 256 (the size class an idle connection pays)", n)
	}
}

// TestAddrPortRoundTrip: the packed addresses give back what was stored.
func TestAddrPortRoundTrip(t *testing.T) {
	for _, s := range []string{"127.0.0.1:80", "[::1]:443", "[::ffff:10.1.2.3]:8080", "[2001:db8::1]:65535", "0.0.0.0:0"} {
		a := netip.MustParseAddrPort(s)
		if p := packAddr(a); p.unpack() != a {
			t.Errorf("%s: got %s", s, p.unpack())
		}
	}
	if p := packAddr(netip.AddrPort{}); p.unpack().IsValid() {
		t.Errorf("zero address: got %s", p.unpack())
	}
}
