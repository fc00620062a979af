package main

import (
	"net"
	"net/netip"
	"os"
	"reflect"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestListenersEnvRoundTrip(t *testing.T) {
	v4 := netip.MustParseAddrPort("127.0.0.1:8080")
	v6 := netip.MustParseAddrPort("[::1]:8080")
	value, order := encodeListeners(map[netip.AddrPort][]int{v6: {17, 18}, v4: {11, 12}})
	if want := "127.0.0.1:8080=3,4;[::1]:8080=5,6"; value != want {
		t.Fatalf("encoded %q, want %q", value, want)
	}
	if want := []int{11, 12, 17, 18}; !reflect.DeepEqual(order, want) {
		t.Fatalf("fd order %v, want %v", order, want)
	}
	got, err := parseListeners(value)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[netip.AddrPort][]int{v4: {3, 4}, v6: {5, 6}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	if got, err := parseListeners(""); err != nil || len(got) != 0 {
		t.Fatalf("empty value: %v, %v", got, err)
	}
}

func TestListenersEnvErrors(t *testing.T) {
	for _, bad := range []string{
		"127.0.0.1:8080",            // no fds
		"127.0.0.1=3",               // no port
		"127.0.0.1:80=2",            // stdin..stderr are not sockets handed over
		"127.0.0.1:80=3,x",          // not a number
		"127.0.0.1:80=3;[::1]:80=3", // one fd twice
		"127.0.0.1:80=",
	} {
		if _, err := parseListeners(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

const helperEnv = "NUMAPROXY_TEST_UPGRADE_CHILD"

// TestStartBinaryHandsOverListeners starts this test binary as the "new binary" with
// two listening sockets: the child finds them at the numbers the variable names,
// and the parent's sockets stay non-blocking (the flag is shared with the child's
// copies, and os/exec's ExtraFiles would clear it under the parent's event loops).
func TestStartBinaryHandsOverListeners(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("helper process")
	}
	fds := map[netip.AddrPort][]int{}
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		raw, err := ln.(*net.TCPListener).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		raw.Control(func(fd uintptr) {
			a := netip.MustParseAddrPort(ln.Addr().String())
			fds[a] = append(fds[a], int(fd))
		})
	}
	t.Setenv(helperEnv, "1")
	t.Setenv(listenersEnv, "stale=7") // replaced, not appended
	pid, err := startBinary(os.Args[0], []string{os.Args[0], "-test.run=^TestUpgradeChildHelper$"}, fds)
	if err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if ws.ExitStatus() != 0 {
		t.Fatalf("the child did not find its listeners: exit status %d", ws.ExitStatus())
	}
	for _, list := range fds {
		for _, fd := range list {
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			if err != nil || flags&unix.O_NONBLOCK == 0 {
				t.Fatalf("listener fd %d is blocking after the child started (flags %#x, %v)", fd, flags, err)
			}
		}
	}
	if _, err := startBinary("/nonexistent/numaproxy", []string{"numaproxy"}, fds); err == nil {
		t.Fatal("starting a missing binary did not fail")
	}
}

// TestUpgradeChildHelper is the child of TestStartBinaryHandsOverListeners; it
// exits before the test framework prints anything.
func TestUpgradeChildHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestStartBinaryHandsOverListeners")
	}
	fds, err := inheritListeners()
	if err != nil || len(fds) != 2 {
		os.Exit(2)
	}
	if _, ok := os.LookupEnv(listenersEnv); ok {
		os.Exit(3)
	}
	for addr, list := range fds {
		for _, fd := range list {
			sa, err := unix.Getsockname(fd)
			in4, ok := sa.(*unix.SockaddrInet4)
			if err != nil || !ok || netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)) != addr {
				os.Exit(4)
			}
			if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
				os.Exit(5)
			}
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
				os.Exit(6) // adopted sockets must not leak into a later upgrade's child
			}
		}
	}
	os.Exit(0)
}

func TestResolveSelf(t *testing.T) {
	saved := self
	defer func() { self = saved }()
	resolveSelf([]string{"./bin/numaproxy", "-p", "x"})
	wd, _ := os.Getwd()
	if self.path != wd+"/bin/numaproxy" || !reflect.DeepEqual(self.args, []string{"./bin/numaproxy", "-p", "x"}) {
		t.Fatalf("relative argv[0]: %+v", self)
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	resolveSelf([]string{"sh"})
	if self.path != "/usr/bin/sh" && self.path != "/bin/sh" {
		t.Fatalf("argv[0] from $PATH: %+v", self)
	}
	exe, _ := os.Executable()
	resolveSelf([]string{"no-such-numaproxy-in-path"})
	if self.path != exe {
		t.Fatalf("argv[0] not found: %+v, want %s", self, exe)
	}
}
