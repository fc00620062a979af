package eventloop

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDeferredAcceptReadsAtOnce: on a listener with TCP_DEFER_ACCEPT a connection
// is accepted once its first bytes came, and they are read in the same batch as
// the accept (no epoll round in between: the loop's batch time has not moved);
// without it, the first read waits for the next batch.
func TestDeferredAcceptReadsAtOnce(t *testing.T) {
	for _, deferAccept := range []int{1, 0} {
		type seen struct {
			sameBatch bool
			data      string
		}
		got := make(chan seen, 1)
		var opened time.Time
		h := &funcHandler{
			open: func(c Conn) { opened = c.Loop().Now() },
			data: func(c Conn, b []byte) {
				got <- seen{c.Loop().Now().Equal(opened), string(b)}
				_ = c.Close()
			},
		}
		l, addr := startLoopListening(t, Config{Handler: h}, ListenOptions{DeferAccept: deferAccept})
		c := dial(t, addr)
		time.Sleep(20 * time.Millisecond) // without deferring, accepted before the request comes
		if _, err := c.Write([]byte("request")); err != nil {
			t.Fatal(err)
		}
		s := recv(t, got)
		c.Close()
		_ = l.Stop()
		waitDone(t, l.Done())
		if s.data != "request" {
			t.Errorf("deferred %d: read %q", deferAccept, s.data)
		}
		if want := deferAccept > 0; s.sameBatch != want {
			t.Errorf("deferred %d: first read in the accept's batch %v, want %v", deferAccept, s.sameBatch, want)
		}
	}
}

// TestDeferredAcceptYields: a deferred listener's accepted connections are read
// in the accept's batch, so a wake-up that accepted for as long as connections
// with their request waited served no other connection of the loop: a flood of
// new connections (here each one served dials the next, complete with its bytes)
// starved an open client, whose input waited behind all of them. The accept
// batch is bounded; the listener, level-triggered, reports again.
func TestDeferredAcceptYields(t *testing.T) {
	const flood = 400
	var (
		served   int  // flood connections read so far
		pingAt   = -1 // served when the open client's ping was read
		floodFds []int
		addr     string
		waiting  Conn // the open client's server side
	)
	done := make(chan struct{})
	dialNext := func() {
		// A blocking loopback connect and write: the connection is in the
		// listener's queue, its bytes with it, before the call returns.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return
		}
		floodFds = append(floodFds, fd)
		ap := netip.MustParseAddrPort(addr)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
			t.Error(err)
			return
		}
		if _, err := unix.Write(fd, []byte("flood")); err != nil {
			t.Error(err)
		}
	}
	var client net.Conn
	h := &funcHandler{
		data: func(c Conn, b []byte) {
			switch string(b) {
			case "hello":
				waiting = c
			case "start":
				// The flood's first connection, then the open client's ping: both
				// are ready when the loop next polls, the listener first.
				dialNext()
				if _, err := client.Write([]byte("ping")); err != nil {
					t.Error(err)
				}
			case "ping":
				pingAt = served
			case "flood":
				served++
				_ = c.Close()
				if served < flood {
					dialNext()
				} else {
					close(done)
				}
			}
		},
	}
	var l *Loop
	l, addr = startLoopListening(t, Config{Handler: h}, ListenOptions{DeferAccept: 1})
	client = dial(t, addr)
	defer client.Close()
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	for registered := false; !registered; {
		time.Sleep(5 * time.Millisecond)
		onLoop(t, l, func() { registered = waiting != nil })
	}
	starter := dial(t, addr)
	defer starter.Close()
	if _, err := starter.Write([]byte("start")); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done)
	onLoop(t, l, func() {
		for _, fd := range floodFds {
			_ = unix.Close(fd)
		}
	})
	var at int
	onLoop(t, l, func() { at = pingAt })
	if at < 0 || at >= flood/2 {
		t.Errorf("the open client's input was read after %d of %d flood connections, want within the first accept batch", at, flood)
	}
}
