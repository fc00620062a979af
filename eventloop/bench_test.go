package eventloop

import (
	"context"
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa"
)

// BenchmarkEchoRoundTrip sends 64 bytes through a loop and reads them back
// from a plain blocking socket; allocations count the whole process, loop
// included. "pinned" puts the loop on the first CPU and the client on the
// second; "unpinned" lets the kernel place both (on a shared machine a pinned
// thread waits whenever another process holds its CPU).
func BenchmarkEchoRoundTrip(b *testing.B) {
	cpus := benchCPUs(b)
	b.Run("pinned", func(b *testing.B) {
		_, addr := startLoop(b, Config{CPU: cpus[0], Handler: echoHandler()})
		benchEcho(b, addr, true)
	})
	b.Run("unpinned", func(b *testing.B) {
		_, addr := startLoop(b, Config{CPU: -1, Handler: echoHandler()})
		benchEcho(b, addr, false)
	})
}

// BenchmarkEchoRoundTripGoNet is the same round trip through a
// goroutine-per-connection net.Listener echo server: a yardstick for the same
// run, since this shared machine is noisy (compare, do not quote alone).
func BenchmarkEchoRoundTripGoNet(b *testing.B) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	benchEcho(b, ln.Addr().String(), false)
}

func benchCPUs(b *testing.B) []int {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		b.Fatal(err)
	}
	return allowed.CPUs()
}

// benchEcho runs b.N 64-byte round trips from a blocking socket, if pin on a
// thread pinned to the second CPU when there is one.
func benchEcho(b *testing.B, addr string, pin bool) {
	if cpus := benchCPUs(b); pin && len(cpus) > 1 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		allowed, _ := numa.AllowedCPUs()
		defer func() { _ = numa.SetThreadAffinity(0, allowed) }()
		if err := numa.PinThread(cpus[1]); err != nil {
			b.Fatal(err)
		}
	}
	ap := netip.MustParseAddrPort(addr)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := unix.Write(fd, msg); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < len(buf); {
			n, err := unix.Read(fd, buf[got:])
			if err != nil || n == 0 {
				b.Fatalf("read: %d %v", n, err)
			}
			got += n
		}
	}
}

// BenchmarkTimer measures re-arming and cancelling timers embedded in their
// owners, among 10k pending ones, on a loop that is not running (timers are
// loop-thread only; here the benchmark goroutine is that thread).
func BenchmarkTimer(b *testing.B) {
	l, err := New(Config{CPU: -1, Handler: echoHandler()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Stop() }()
	const n = 10000
	ts := make([]Timer, n)
	for i := range ts {
		l.InitTimer(&ts[i], func(*Timer) {})
		ts[i].Reset(time.Duration(i+1) * time.Millisecond)
	}
	b.Run("reset", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			ts[i%n].Reset(time.Duration(n+i%977) * time.Millisecond)
		}
	})
	b.Run("cancel+arm", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			t := &ts[i%n]
			t.Stop()
			t.Reset(time.Duration(n+i%977) * time.Millisecond)
		}
	})
	// A keep-alive connection's idle timer: cancelled when a request comes
	// (SetTimeout(0)), armed again when it is answered.
	b.Run("keepalive", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			t := &ts[i%n]
			t.cancel()
			t.Reset(time.Duration(n+i%977) * time.Millisecond)
		}
	})
}

// BenchmarkWriteFile answers each 1-byte request of a blocking client with a 1 MiB
// file segment over loopback, with sendfile(2) and with pread into pool buffers
// (16 and 64 KiB pool buffers); allocations and cpu-ns/op (user+system time of
// the process per op, client included) count the whole process, loop included.
func BenchmarkWriteFile(b *testing.B) {
	const size = 1 << 20
	path, _ := patternFile(b, size, 11)
	fd := openFd(b, path)
	defer unix.Close(fd)
	for _, mode := range []struct {
		name     string
		sendfile bool
		chunk    int
	}{{"sendfile", true, 0}, {"pread16k", false, 16 << 10}, {"pread64k", false, 64 << 10}} {
		b.Run(mode.name, func(b *testing.B) {
			h := &funcHandler{data: func(c Conn, _ []byte) {
				c.SetSendfile(mode.sendfile, 0)
				if err := c.WriteFile(fd, 0, size); err != nil {
					b.Error(err)
				}
			}}
			_, addr := startLoop(b, Config{CPU: -1, Handler: h, ChunkSize: mode.chunk})
			ap := netip.MustParseAddrPort(addr)
			cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(cfd)
			if err := unix.Connect(cfd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
				b.Fatal(err)
			}
			req := []byte{'g'}
			buf := make([]byte, 256<<10)
			b.SetBytes(size)
			b.ReportAllocs()
			var ru0, ru1 unix.Rusage
			_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			defer func() {
				_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}()
			for range b.N {
				if _, err := unix.Write(cfd, req); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < size; {
					n, err := unix.Read(cfd, buf[:min(len(buf), size-got)])
					if err != nil || n == 0 {
						b.Fatalf("read: %d %v", n, err)
					}
					got += n
				}
			}
		})
	}
}

// BenchmarkFileSegmentOpen is what queuing a segment costs beyond sending it:
// fstat (regular file, range) and a dup'd descriptor, closed when sent.
func BenchmarkFileSegmentOpen(b *testing.B) {
	path, _ := patternFile(b, 4096, 12)
	fd := openFd(b, path)
	defer unix.Close(fd)
	b.ReportAllocs()
	for range b.N {
		s, err := OpenFileSegment(fd, 0, 4096)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	}
}
