package steering

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// listen6 binds a SO_REUSEPORT IPv6 listener to addr:port; dual-stack unless
// v6only.
func listen6(t *testing.T, addr netip.Addr, port int, v6only bool) *listener {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Skipf("IPv6: %v", err)
	}
	l := &listener{fd: fd}
	t.Cleanup(l.close)
	only := 0
	if v6only {
		only = 1
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, only); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet6{Addr: addr.As16(), Port: port}); err != nil {
		t.Skipf("IPv6 bind %v: %v", addr, err)
	}
	if err := unix.Listen(fd, 1024); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	l.port = sa.(*unix.SockaddrInet6).Port
	return l
}

// dialTo makes n connections to sa from cpu.
func dialTo(t *testing.T, cpu, n int, sa unix.Sockaddr) []int {
	t.Helper()
	family := unix.AF_INET
	if _, ok := sa.(*unix.SockaddrInet6); ok {
		family = unix.AF_INET6
	}
	fds := make([]int, 0, n)
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
			unix.Close(fd)
		}
	})
	onCPU(t, cpu, func() error {
		for range n {
			fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
			if err := unix.Connect(fd, sa); err != nil {
				return err
			}
		}
		return nil
	})
	return fds
}

// TestIPv6AndDualStack: conntrack keys and the migrate path for an IPv6
// client on an IPv6 listener, and for an IPv4 client on a dual-stack
// listener (the SYN carries IPv4 addresses, the migrating socket IPv4-mapped
// IPv6 ones: both must give the same key).
func TestIPv6AndDualStack(t *testing.T) {
	needCPUs(t)
	for name, tc := range map[string]struct {
		bind   netip.Addr
		v6only bool
		dst    func(port int) unix.Sockaddr
		client netip.Addr
	}{
		"ipv6": {netip.IPv6Loopback(), true,
			func(p int) unix.Sockaddr { return &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16(), Port: p} },
			netip.IPv6Loopback()},
		"ipv4 on dual stack": {netip.IPv6Unspecified(), false,
			func(p int) unix.Sockaddr { return &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: p} },
			netip.MustParseAddr("127.0.0.1")},
	} {
		t.Run(name, func(t *testing.T) {
			s := load(t, simulatedConfig())
			closing := listen6(t, tc.bind, 0, tc.v6only)
			other := listen6(t, tc.bind, closing.port, tc.v6only)
			dom1 := listen6(t, tc.bind, closing.port, tc.v6only)
			if err := s.Attach(closing.fd); err != nil {
				t.Fatal(err)
			}
			if err := s.AddListener(0, closing.fd); err != nil {
				t.Fatal(err)
			}
			if err := s.AddListener(1, dom1.fd); err != nil {
				t.Fatal(err)
			}
			clients := dialTo(t, 0, queued, tc.dst(closing.port))
			if err := s.AddListener(0, other.fd); err != nil {
				t.Fatal(err)
			}
			c, ok := findClient(t, s, 0, tc.client)
			if !ok || c.SYNs[0] < queued {
				t.Fatalf("client %v: %+v (found %v), want %d SYNs on domain 0", tc.client, c, ok, queued)
			}
			if err := s.RemoveListener(0, closing.fd); err != nil {
				t.Fatal(err)
			}
			onCPU(t, 1, func() error { closing.close(); return nil })
			got := acceptN(t, queued, other, dom1)
			if len(got[0]) != queued {
				t.Fatalf("%d/%d migrated within domain 0, %d crossed", len(got[0]), queued, len(got[1]))
			}
			roundTrip(t, clients, got[0])
			if st := stat(t, s, 0); st.Migrated != queued {
				t.Errorf("domain 0 stats %+v, want %d migrated", st, queued)
			}
			t.Logf("%s: %d queued connections of %v migrated within domain 0", name, queued, tc.client)
		})
	}
}

// TestUseNumaNodeID: with UseNumaNodeID the domain is the node that
// processed the SYN; this machine has only node 0, so clients on both CPUs
// reach domain 0's listener, never the group's other, unregistered member
// (which the kernel's hash would give about half).
func TestUseNumaNodeID(t *testing.T) {
	needCPUs(t)
	s := load(t, Config{Domains: 1, UseNumaNodeID: true})
	node0 := listen(t, 0)
	outside := listen(t, node0.port)
	if err := s.Attach(node0.fd); err != nil {
		t.Fatal(err)
	}
	if err := s.AddListener(0, node0.fd); err != nil {
		t.Fatal(err)
	}
	for cpu := range 2 {
		dial(t, cpu, node0.port, 100)
		got := acceptN(t, 100, node0, outside)
		if len(got[0]) != 100 {
			t.Errorf("clients on CPU %d: %d/100 on node 0's listener", cpu, len(got[0]))
		}
	}
	if st := stat(t, s, 0); st.Selected != 200 {
		t.Errorf("domain 0 stats %+v, want 200 selected", st)
	}
}
