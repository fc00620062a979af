package eventloop

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStaleEventForReusedFd builds, on purpose, an epoll batch holding events
// for server connections A and B; A's handler closes B and dials a new
// connection N that receives B's fd number before B's queued event is
// handled. That event carries B's generation and must be dropped: N's handler
// sees its own OnOpen exactly once, after its connect really completed.
func TestStaleEventForReusedFd(t *testing.T) {
	type newConn struct {
		fd    int
		opens int
		data  int
	}
	var (
		servers      = map[netip.AddrPort]Conn{} // by client address
		candA, candB Conn                        // set while the loop is held
		handled      bool
		n            newConn
		reusedFd     = make(chan int, 1)
		opened       = make(chan struct{}, 1)
	)
	nh := &funcHandler{
		open: func(c Conn) { n.opens++; opened <- struct{}{} },
		data: func(c Conn, b []byte) { n.data++ },
	}
	var l *Loop
	var addr string
	h := &funcHandler{
		open: func(c Conn) { servers[c.RemoteAddr()] = c },
		data: func(c Conn, b []byte) {
			if handled || (c != candA && c != candB) {
				return
			}
			// The first of A and B to be handled closes the other one.
			handled = true
			victim := candB
			if c == candB {
				victim = candA
			}
			bfd := victim.Fd()
			_ = victim.Close()
			fillers := fillFdsBelow(t, bfd)
			nc, err := l.Dial(netip.MustParseAddrPort(addr), 0, nh, nil)
			for _, fd := range fillers {
				_ = unix.Close(fd)
			}
			if err != nil {
				t.Error(err)
				return
			}
			n.fd = nc.Fd()
			reusedFd <- bfd
		},
	}
	l, addr = startLoop(t, Config{Handler: h})
	ca, cb := dial(t, addr), dial(t, addr)
	defer ca.Close()
	defer cb.Close()
	var sa, sb Conn
	waitFor(t, "both accepted", func() bool {
		onLoop(t, l, func() {
			sa, sb = servers[netip.MustParseAddrPort(ca.LocalAddr().String())], servers[netip.MustParseAddrPort(cb.LocalAddr().String())]
		})
		return sa != nil && sb != nil
	})

	// Hold the loop in a task while both sockets get data, so one epoll batch reports both.
	release := make(chan struct{})
	held := make(chan struct{})
	if err := l.Run(func() {
		candA, candB = sa, sb
		close(held)
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, held)
	before := l.Stats().StaleEvents
	for _, c := range []net.Conn{ca, cb} {
		if _, err := c.Write([]byte("go")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "data queued on both server sockets", func() bool {
		return inq(t, sa.Fd()) > 0 && inq(t, sb.Fd()) > 0
	})
	close(release)

	bfd := recv(t, reusedFd)
	recv(t, opened)
	var got newConn
	onLoop(t, l, func() { got = n })
	if got.fd != bfd {
		t.Fatalf("new connection got fd %d, closed one had %d: the situation was not built", got.fd, bfd)
	}
	if stale := l.Stats().StaleEvents - before; stale < 1 {
		t.Errorf("no stale event dropped")
	}
	if got.opens != 1 || got.data != 0 {
		t.Errorf("new connection saw %d opens and %d data events, want 1 and 0", got.opens, got.data)
	}
}

// fillFdsBelow occupies every free fd number below fd, so the next socket gets fd.
func fillFdsBelow(t testing.TB, fd int) []int {
	var fillers []int
	for {
		f, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return fillers
		}
		if f >= fd {
			_ = unix.Close(f)
			return fillers
		}
		fillers = append(fillers, f)
	}
}

// inq returns the bytes waiting in a socket's receive queue.
func inq(t testing.TB, fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
