package eventloop

import (
	"net"
	"testing"
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
