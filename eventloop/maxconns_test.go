package eventloop

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestMaxConnsStopsAccepting: at MaxConns the loop leaves new connections in the
// accept queue, and takes the next one as soon as a connection closes.
func TestMaxConnsStopsAccepting(t *testing.T) {
	l, addr := startLoop(t, Config{CPU: -1, Handler: echoHandler(), MaxConns: 3})
	var clients []net.Conn
	for i := 0; i < 5; i++ {
		c := dial(t, addr) // the kernel completes the handshake; the loop may not accept
		defer c.Close()
		clients = append(clients, c)
	}
	waitFor(t, "three connections accepted", func() bool { return l.Stats().Accepted == 3 })
	for i := 0; i < 3; i++ {
		if got := roundTrip(t, clients[i], "ping"); got != "ping" {
			t.Fatalf("client %d got %q", i, got)
		}
	}
	if s := l.Stats(); s.Accepted != 3 || s.AcceptStops == 0 {
		t.Fatalf("stats %+v: want 3 accepted and accepting stopped", s)
	}
	clients[0].Close()
	waitFor(t, "a fourth connection accepted once one closed", func() bool { return l.Stats().Accepted == 4 })
	if got := roundTrip(t, clients[3], "pong"); got != "pong" {
		t.Fatalf("fourth client got %q", got)
	}
	if l.Stats().Accepted != 4 {
		t.Fatalf("accepted %d, want 4 while at the bound", l.Stats().Accepted)
	}
}

// TestMaxConnsReusesOldestIdle: at MaxConns the loop closes its oldest idle
// connections (an eighth of them, as nginx) to accept a new one; a connection marked
// idle again becomes the newest.
func TestMaxConnsReusesOldestIdle(t *testing.T) {
	log, lines := newLogger()
	closedWith := make(chan error, 64)
	h := idleEchoHandler()
	h.close = func(c Conn, err error) { closedWith <- err }
	l, addr := startLoop(t, Config{CPU: -1, Handler: h, MaxConns: 16, Logger: log})
	var clients []net.Conn
	for i := 0; i < 16; i++ {
		c := dial(t, addr)
		defer c.Close()
		if got := roundTrip(t, c, "ping"); got != "ping" {
			t.Fatalf("client %d got %q", i, got)
		}
		clients = append(clients, c)
	}
	// Client 0 talks again: now client 1 is the oldest idle one.
	if got := roundTrip(t, clients[0], "again"); got != "again" {
		t.Fatalf("client 0 got %q", got)
	}
	for i := 0; i < 3; i++ {
		c := dial(t, addr)
		defer c.Close()
		if got := roundTrip(t, c, "new"); got != "new" {
			t.Fatalf("new client %d got %q", i, got)
		}
		clients = append(clients, c)
	}
	// 16/8 = 2 closed for the first newcomer, 2 more for the third.
	for _, i := range []int{1, 2, 3, 4} {
		expectEOF(t, clients[i])
	}
	for _, i := range []int{0, 5, 15, 16, 17, 18} {
		if got := roundTrip(t, clients[i], "open"); got != "open" {
			t.Fatalf("client %d got %q", i, got)
		}
	}
	for i := 0; i < 4; i++ {
		if err := recv(t, closedWith); !errors.Is(err, ErrReused) {
			t.Fatalf("OnClose %v, want ErrReused", err)
		}
	}
	if s := l.Stats(); s.Accepted != 19 || s.Conns != 15 || s.AcceptStops != 0 {
		t.Fatalf("stats %+v", s)
	}
	if n := lines.count("16 worker_connections are not enough, reusing connections"); n != 1 {
		t.Fatalf("%d reuse warnings, want 1 a second", n)
	}
}

// expectEOF checks that the server closed c cleanly.
func expectEOF(t testing.TB, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var b [1]byte
	if n, err := c.Read(b[:]); err != io.EOF {
		t.Fatalf("read %q, %v: want EOF", b[:n], err)
	}
}

// TestSetIdleAllocatesNothing: the idle list is linked through the connections.
func TestSetIdleAllocatesNothing(t *testing.T) {
	opened := make(chan Conn, 1)
	l, addr := startLoop(t, Config{CPU: -1, Handler: &funcHandler{open: func(c Conn) { opened <- c }}})
	c := dial(t, addr)
	defer c.Close()
	conn := recv(t, opened)
	var allocs float64
	onLoop(t, l, func() {
		allocs = testing.AllocsPerRun(100, func() { conn.SetIdle(true); conn.SetIdle(true); conn.SetIdle(false) })
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per SetIdle cycle", allocs)
	}
}
