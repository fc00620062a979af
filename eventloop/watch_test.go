package eventloop

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// udpSocket returns a non-blocking UDP socket bound to a free loopback port and its port.
func udpSocket(t *testing.T) (int, int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, sa.(*unix.SockaddrInet4).Port
}

func TestWatchFDReadsDatagramsAndCloses(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	fd, port := udpSocket(t)
	got := make(chan string, 4)
	var w *FDWatch
	onLoop(t, l, func() {
		var err error
		w, err = l.WatchFD(fd, func() {
			buf := make([]byte, 64)
			for {
				n, err := unix.Read(fd, buf)
				if err != nil {
					return // EAGAIN: drained
				}
				got <- string(buf[:n])
			}
		})
		if err != nil {
			t.Error(err)
		}
	})
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, m := range []string{"one", "two"} {
		if _, err := c.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
		if s := recv(t, got); s != m {
			t.Fatalf("read %q, want %q", s, m)
		}
	}
	onLoop(t, l, func() {
		if err := w.Close(); err != nil || w.Fd() != -1 {
			t.Errorf("Close: %v, fd %d", err, w.Fd())
		}
		if err := w.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("fd still open after Close: %v", err)
	}
}

func TestWatchFDClosedWhenLoopExits(t *testing.T) {
	l, err := New(Config{CPU: -1, Handler: echoHandler()})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	fd, _ := udpSocket(t)
	onLoop(t, l, func() {
		if _, err := l.WatchFD(fd, func() {}); err != nil {
			t.Error(err)
		}
	})
	_ = l.Stop()
	waitDone(t, l.Done())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("watched fd still open after the loop exited: %v", err)
	}
}
