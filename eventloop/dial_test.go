package eventloop

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type dialResult struct {
	opened bool
	err    error
}

func dialOn(t *testing.T, l *Loop, addr netip.AddrPort, timeout time.Duration, onOpen func(Conn)) <-chan dialResult {
	res := make(chan dialResult, 1)
	h := &funcHandler{
		open: func(c Conn) {
			if onOpen != nil {
				onOpen(c)
			}
			res <- dialResult{opened: true}
		},
		close: func(c Conn, err error) {
			select {
			case res <- dialResult{err: err}:
			default:
			}
		},
	}
	onLoop(t, l, func() {
		if _, err := l.Dial(addr, timeout, h, nil); err != nil {
			res <- dialResult{err: err}
		}
	})
	return res
}

func TestDialConnectsAndWritesEarly(t *testing.T) {
	l, addr := startLoop(t, Config{Handler: echoHandler()})
	echoed := make(chan string, 1)
	res := make(chan dialResult, 1)
	h := &funcHandler{
		open: func(c Conn) { res <- dialResult{opened: true} },
		data: func(c Conn, b []byte) { echoed <- string(b); _ = c.Close() },
	}
	onLoop(t, l, func() {
		c, err := l.Dial(netip.MustParseAddrPort(addr), time.Minute, h, nil)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = c.Write([]byte("queued before connect")) // flushed once connected
	})
	if r := recv(t, res); !r.opened {
		t.Fatalf("dial: %v", r.err)
	}
	if got := recv(t, echoed); got != "queued before connect" {
		t.Fatalf("echo %q", got)
	}
}

func TestDialRefused(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	// A port nobody listens on: bind one and close it.
	ln, err := Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr()
	_ = ln.Close()
	r := recv(t, dialOn(t, l, addr, time.Minute, nil))
	if r.opened || !errors.Is(r.err, unix.ECONNREFUSED) {
		t.Fatalf("dial to closed port: %+v", r)
	}
}

func TestDialTimeout(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	// A listener with backlog 0 that never accepts: once its queue holds one
	// connection, the kernel drops further SYNs and connects hang.
	full, err := Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if err := unix.Listen(full.Fd(), 0); err != nil {
		t.Fatal(err)
	}
	timedOut := false
	for i := 0; i < 4 && !timedOut; i++ {
		r := recv(t, dialOn(t, l, full.Addr(), 200*time.Millisecond, nil))
		switch {
		case r.opened:
		case errors.Is(r.err, ErrDialTimeout):
			timedOut = true
		default:
			t.Fatalf("dial: %v", r.err)
		}
	}
	if !timedOut {
		t.Fatal("no connect timed out against a full accept queue")
	}
}

// dialWith connects with o on l and reports the outcome and, once open, what
// check saw on the connection's socket.
func dialWith(t *testing.T, l *Loop, addr netip.AddrPort, o DialOptions, check func(Conn)) dialResult {
	t.Helper()
	res := make(chan dialResult, 1)
	h := &funcHandler{
		open: func(c Conn) {
			check(c)
			res <- dialResult{opened: true}
			_ = c.Close()
		},
		close: func(c Conn, err error) {
			select {
			case res <- dialResult{err: err}:
			default:
			}
		},
	}
	onLoop(t, l, func() {
		if _, err := l.DialWith(addr, o, h, nil); err != nil {
			res <- dialResult{err: err}
		}
	})
	return recv(t, res)
}

func TestDialUnix(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	path := t.TempDir() + "/s.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 16)
		n, _ := c.Read(b)
		got <- string(b[:n])
		c.Close()
	}()
	r := dialWith(t, l, netip.AddrPort{}, DialOptions{Unix: path, KeepAlive: true, Timeout: time.Minute}, func(c Conn) {
		_, _ = c.Write([]byte("over unix"))
	})
	if !r.opened {
		t.Fatalf("dial unix: %v", r.err)
	}
	if s := recv(t, got); s != "over unix" {
		t.Fatalf("read %q", s)
	}
	// No listener: refused at once, not a set-up error.
	ln.Close()
	r = dialWith(t, l, netip.AddrPort{}, DialOptions{Unix: path}, func(Conn) {})
	var se *SetupError
	if r.opened || r.err == nil || errors.As(r.err, &se) {
		t.Fatalf("dial to a closed unix socket: %+v", r)
	}
}

func TestDialOptions(t *testing.T) {
	l, addr := startLoop(t, Config{Handler: echoHandler()})
	peer := netip.MustParseAddrPort(addr)
	for _, tc := range []struct {
		name string
		o    DialOptions
		keep int
		src  string
	}{
		{"default", DialOptions{}, 0, "127.0.0.1"},
		{"keepalive and bind", DialOptions{KeepAlive: true, Local: netip.MustParseAddrPort("127.0.0.2:0")}, 1, "127.0.0.2"},
		{"transparent", DialOptions{Local: netip.MustParseAddrPort("127.0.0.3:0"), Transparent: true}, 0, "127.0.0.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keep, transparent int
			var local netip.AddrPort
			r := dialWith(t, l, peer, tc.o, func(c Conn) {
				keep, _ = unix.GetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
				transparent, _ = unix.GetsockoptInt(c.Fd(), unix.IPPROTO_IP, unix.IP_TRANSPARENT)
				local = c.LocalAddr()
			})
			if !r.opened {
				var se *SetupError
				if tc.o.Transparent && errors.As(r.err, &se) && errors.Is(r.err, unix.EPERM) {
					t.Skip("IP_TRANSPARENT needs CAP_NET_ADMIN")
				}
				t.Fatalf("dial: %v", r.err)
			}
			if keep != tc.keep || local.Addr().String() != tc.src || (transparent == 1) != tc.o.Transparent {
				t.Fatalf("SO_KEEPALIVE %d, source %s, IP_TRANSPARENT %d", keep, local, transparent)
			}
		})
	}
	// A source address of another family cannot be bound: a set-up error.
	r := dialWith(t, l, peer, DialOptions{Local: netip.MustParseAddrPort("[::1]:0")}, func(Conn) {})
	var se *SetupError
	if r.opened || !errors.As(r.err, &se) || se.Op != "bind(::1)" {
		t.Fatalf("bind of an IPv6 source to an IPv4 socket: %+v", r)
	}
}

// TestDialInetFamilies: connect(2) from a kernel address built on the stack
// reaches IPv4, IPv6 and IPv4-mapped peers at the right port.
func TestDialInetFamilies(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	for _, network := range []string{"tcp4", "tcp6"} {
		ln, err := net.Listen(network, map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network])
		if err != nil {
			if network == "tcp6" {
				t.Logf("no IPv6 loopback: %v", err)
				continue
			}
			t.Fatal(err)
		}
		defer ln.Close()
		peer := netip.MustParseAddrPort(ln.Addr().String())
		targets := []netip.AddrPort{peer}
		if network == "tcp4" {
			targets = append(targets, netip.AddrPortFrom(netip.AddrFrom16(peer.Addr().As16()), peer.Port()))
		}
		for _, target := range targets {
			accepted := make(chan struct{}, 1)
			go func() {
				if c, err := ln.Accept(); err == nil {
					accepted <- struct{}{}
					c.Close()
				}
			}()
			r := dialWith(t, l, target, DialOptions{}, func(c Conn) {})
			if !r.opened {
				t.Fatalf("dial %v: %v", target, r.err)
			}
			recv(t, accepted)
		}
	}
}
