package eventloop

import (
	"testing"

	"golang.org/x/sys/unix"
)

// acceptNoDelay accepts n connections and returns their TCP_NODELAY as the loop
// sees it when they open.
func acceptNoDelay(t *testing.T, l *Loop, opened <-chan int, addr string, n int) []int {
	t.Helper()
	var got []int
	for range n {
		c := dial(t, addr)
		got = append(got, recv(t, opened))
		c.Close()
	}
	return got
}

func noDelayOpener() (*funcHandler, chan int) {
	opened := make(chan int, 8)
	return &funcHandler{open: func(c Conn) {
		v, err := unix.GetsockoptInt(c.Fd(), unix.IPPROTO_TCP, unix.TCP_NODELAY)
		if err != nil {
			v = -1
		}
		opened <- v
	}}, opened
}

// TestAcceptedNoDelayFromListener: accepted connections have TCP_NODELAY, set once
// on the listening socket, whose children inherit it, rather than on each.
func TestAcceptedNoDelayFromListener(t *testing.T) {
	h, opened := noDelayOpener()
	l, addr := startLoop(t, Config{Handler: h})
	var ln *Listener
	onLoop(t, l, func() { ln = l.Listeners()[0] })
	if v, err := unix.GetsockoptInt(ln.Fd(), unix.IPPROTO_TCP, unix.TCP_NODELAY); err != nil || v == 0 {
		t.Fatalf("listening socket: TCP_NODELAY %d, %v", v, err)
	}
	for i, v := range acceptNoDelay(t, l, opened, addr, 3) {
		if v == 0 || v == -1 {
			t.Errorf("connection %d: TCP_NODELAY %d", i, v)
		}
	}
	var way noDelayWay
	onLoop(t, l, func() { way = ln.noDelay })
	if way != noDelayInherited {
		t.Errorf("listener's way %d, want inherited (no setsockopt per connection)", way)
	}
}

// TestAcceptedNoDelayNotInherited: where accepted sockets do not have the
// listener's TCP_NODELAY (here it was cleared behind the loop's back), each
// accepted connection is given it.
func TestAcceptedNoDelayNotInherited(t *testing.T) {
	h, opened := noDelayOpener()
	l, addr := startLoop(t, Config{Handler: h})
	var ln *Listener
	onLoop(t, l, func() { ln = l.Listeners()[0] })
	if err := unix.SetsockoptInt(ln.Fd(), unix.IPPROTO_TCP, unix.TCP_NODELAY, 0); err != nil {
		t.Fatal(err)
	}
	for i, v := range acceptNoDelay(t, l, opened, addr, 3) {
		if v == 0 || v == -1 {
			t.Errorf("connection %d: TCP_NODELAY %d", i, v)
		}
	}
	var way noDelayWay
	onLoop(t, l, func() { way = ln.noDelay })
	if way != noDelayEach {
		t.Errorf("listener's way %d, want each", way)
	}
}
