package steering

import (
	"errors"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa"
)

// Tests run on real kernel objects and real loopback sockets. On this 2-CPU,
// one-node machine they simulate two domains: CPU 0 = domain 0, CPU 1 =
// domain 1, both domains' memory on node 0.

const deadline = 10 * time.Second

func simulatedConfig() Config {
	return Config{
		Domains:      2,
		MaxPerDomain: 4,
		CPUDomain:    map[int]int{0: 0, 1: 1},
		DomainNode:   []int{0, 0},
	}
}

// needCPUs skips unless CPUs 0 and 1 are both usable.
func needCPUs(t *testing.T) {
	t.Helper()
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if !allowed.Has(0) || !allowed.Has(1) {
		t.Skipf("needs CPUs 0 and 1, allowed %s", allowed)
	}
}

func load(t *testing.T, cfg Config) *Steering {
	t.Helper()
	s, err := Load(cfg)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("BPF steering unsupported here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// listener is a plain TCP listener made with x/sys/unix: Go's net.Listen
// would make an MPTCP socket, which the sockarray refuses.
type listener struct {
	fd   int
	port int
}

// listen binds a SO_REUSEPORT listener to 127.0.0.1:port (0 = any port).
// The fd is non-blocking; t.Cleanup closes it unless the test already did.
func listen(t *testing.T, port int) *listener {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{fd: fd}
	t.Cleanup(l.close)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1024); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	l.port = sa.(*unix.SockaddrInet4).Port
	return l
}

func (l *listener) close() {
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

// conn is one accepted connection.
type conn struct {
	fd     int
	cpu    int // SO_INCOMING_CPU: the CPU that processed the SYN
	client netip.AddrPort
	server netip.AddrPort
}

// acceptN accepts until want connections came from the listeners together,
// and returns them per listener. It fails the test at the deadline.
func acceptN(t *testing.T, want int, ls ...*listener) [][]conn {
	t.Helper()
	out := make([][]conn, len(ls))
	got := 0
	end := time.Now().Add(deadline)
	pfds := make([]unix.PollFd, len(ls))
	for got < want {
		if time.Now().After(end) {
			t.Fatalf("accepted %d of %d connections by the deadline", got, want)
		}
		for i, l := range ls {
			pfds[i] = unix.PollFd{Fd: int32(l.fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(pfds, 100); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		for i, l := range ls {
			for {
				nfd, sa, err := unix.Accept4(l.fd, unix.SOCK_CLOEXEC)
				if err == unix.EAGAIN {
					break
				}
				if err != nil {
					t.Fatalf("accept: %v", err)
				}
				cpu, err := unix.GetsockoptInt(nfd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
				if err != nil {
					t.Fatal(err)
				}
				local, _ := unix.Getsockname(nfd)
				c := conn{fd: nfd, cpu: cpu, client: addrPort(sa), server: addrPort(local)}
				t.Cleanup(func() { unix.Close(nfd) })
				out[i] = append(out[i], c)
				got++
			}
		}
	}
	return out
}

func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// onCPU runs f on a goroutine locked to an OS thread pinned to cpu and waits
// for it.
func onCPU(t *testing.T, cpu int, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread dies with the goroutine rather than returning to the
		// pool with a narrowed affinity.
		if err := numa.PinThread(cpu); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// dial makes n blocking connections to 127.0.0.1:port from CPU cpu. The
// client sockets close with a RST (SO_LINGER 0) at cleanup, so runs leave no
// TIME_WAIT behind.
func dial(t *testing.T, cpu, port, n int) []int {
	t.Helper()
	fds := make([]int, 0, n)
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
			unix.Close(fd)
		}
	})
	onCPU(t, cpu, func() error {
		for range n {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
			if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
				return err
			}
		}
		return nil
	})
	return fds
}

// sysctl sets a /proc/sys value for the test and restores it afterwards.
func sysctl(t *testing.T, name, value string) {
	t.Helper()
	path := "/proc/sys/" + name
	old, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("sysctl %s: %v", name, err)
	}
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		t.Skipf("sysctl %s=%s: %v", name, value, err)
	}
	t.Cleanup(func() { os.WriteFile(path, old, 0) })
}

func stat(t *testing.T, s *Steering, domain int) DomainStats {
	t.Helper()
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if domain < 0 {
		return st[len(st)-1]
	}
	return st[domain]
}
