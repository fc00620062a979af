package eventloop

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestListenSocketOptions(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := Listen(addr, 0)
		if err != nil {
			if addr == "[::1]:0" {
				t.Logf("no IPv6 loopback: %v", err)
				continue
			}
			t.Fatal(err)
		}
		fd := ln.Fd()
		for _, o := range []struct {
			name       string
			level, opt int
			want       int
		}{
			{"SO_REUSEPORT", unix.SOL_SOCKET, unix.SO_REUSEPORT, 1},
			{"SO_REUSEADDR", unix.SOL_SOCKET, unix.SO_REUSEADDR, 1},
			{"SO_ACCEPTCONN", unix.SOL_SOCKET, unix.SO_ACCEPTCONN, 1},
			{"SO_PROTOCOL (plain TCP, not MPTCP)", unix.SOL_SOCKET, unix.SO_PROTOCOL, unix.IPPROTO_TCP},
		} {
			if v, err := unix.GetsockoptInt(fd, o.level, o.opt); err != nil || v != o.want {
				t.Errorf("%s %s = %d, %v", addr, o.name, v, err)
			}
		}
		if ln.Addr().Addr().Is6() {
			if v, _ := unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY); v != 1 {
				t.Errorf("IPV6_V6ONLY = %d", v)
			}
		}
		flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		fdflags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if flags&unix.O_NONBLOCK == 0 || fdflags&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s: flags %#x fd flags %#x, want non-blocking and close-on-exec", addr, flags, fdflags)
		}
		// A second socket joins the same port through SO_REUSEPORT.
		ln2, err := ListenAddrPort(ln.Addr(), 0)
		if err != nil {
			t.Errorf("second listener on %s: %v", ln.Addr(), err)
		} else {
			_ = ln2.Close()
		}
		_ = ln.Close()
	}
}

func TestListenerFromInheritedFd(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// What a new process gets: a duplicate without close-on-exec, blocking.
	dup, err := unix.Dup(ln.Fd())
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(dup, false); err != nil {
		t.Fatal(err)
	}
	inherited, err := ListenerFromFD(dup)
	if err != nil {
		t.Fatal(err)
	}
	if inherited.Addr() != ln.Addr() {
		t.Errorf("inherited addr %s, want %s", inherited.Addr(), ln.Addr())
	}
	l, err := New(Config{CPU: -1, Handler: echoHandler()})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddListener(inherited); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Stop(); waitDone(t, l.Done()) }()
	c := dial(t, inherited.Addr().String())
	defer c.Close()
	if got := roundTrip(t, c, "inherited"); got != "inherited" {
		t.Fatalf("echo %q", got)
	}

	// Not a listening socket: refused.
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(s)
	if _, err := ListenerFromFD(s); err == nil {
		t.Error("ListenerFromFD accepted a socket that does not listen")
	}
}

func TestParseListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"80":           "0.0.0.0:80",
		"*:8080":       "0.0.0.0:8080",
		"127.0.0.1:81": "127.0.0.1:81",
		"localhost:82": "127.0.0.1:82",
		"[::]:443":     "[::]:443",
		":9000":        "0.0.0.0:9000",
	} {
		got, err := ParseListenAddr(in)
		if err != nil || got != netip.MustParseAddrPort(want) {
			t.Errorf("ParseListenAddr(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"example.com:80", "1.2.3.4", "1.2.3.4:99999", "[::1]"} {
		if _, err := ParseListenAddr(bad); err == nil {
			t.Errorf("ParseListenAddr(%q) succeeded", bad)
		}
	}
}
