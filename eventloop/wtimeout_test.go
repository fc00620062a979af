package eventloop

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteTimeout: SetWriteTimeout closes a connection whose queued output the peer
// does not take, also through a graceful Close, but not one that keeps taking some,
// however long the whole takes (nginx's send_timeout: between two writes).
func TestWriteTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	var conns []Conn
	closed := make(chan error, 4)
	h := &funcHandler{
		open:  func(c Conn) { conns = append(conns, c) },
		close: func(c Conn, err error) { closed <- err },
	}
	l, addr := startLoop(t, Config{Handler: h})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<10) })
	}}
	peer := func() (net.Conn, Conn) {
		r, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		var c Conn
		waitFor(t, "accepted", func() bool {
			onLoop(t, l, func() {
				if len(conns) > 0 {
					c = conns[len(conns)-1]
					conns = conns[:0]
				}
			})
			return c != nil
		})
		return r, c
	}
	// fill queues n bytes on c beyond what the kernel takes.
	fill := func(c Conn, n int, close bool) {
		onLoop(t, l, func() {
			// A small send buffer: the socket takes data soon after the peer reads.
			_ = unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
			c.SetWriteTimeout(timeout)
			chunk := make([]byte, 64<<10)
			for c.Queued() < n {
				_, _ = c.Write(chunk)
			}
			if close {
				_ = c.Close()
			}
		})
	}

	t.Run("stuck", func(t *testing.T) {
		_, c := peer()
		began := time.Now()
		fill(c, 1<<20, false)
		err := recv(t, closed)
		if d := time.Since(began); !errors.Is(err, ErrWriteTimeout) || d < timeout || d > 10*timeout {
			t.Fatalf("closed after %v with %v", d, err)
		}
	})
	t.Run("stuck graceful close", func(t *testing.T) {
		_, c := peer()
		began := time.Now()
		fill(c, 1<<20, true)
		err := recv(t, closed)
		if d := time.Since(began); !errors.Is(err, ErrWriteTimeout) || d < timeout || d > 10*timeout {
			t.Fatalf("closed after %v with %v", d, err)
		}
	})
	t.Run("slow but steady", func(t *testing.T) {
		r, c := peer()
		fill(c, 1<<20, false)
		// 16 KiB every timeout/3: draining everything takes far longer than the
		// timeout, and the timeout never passes between two writes.
		buf := make([]byte, 16<<10)
		began := time.Now()
		for time.Since(began) < 5*timeout {
			if _, err := r.Read(buf); err != nil {
				t.Fatal(err)
			}
			time.Sleep(timeout / 3)
		}
		select {
		case err := <-closed:
			t.Fatalf("closed while the peer was reading: %v", err)
		default:
		}
		// Drained: an empty queue has no timeout.
		go func() {
			for {
				if _, err := r.Read(make([]byte, 64<<10)); err != nil {
					return
				}
			}
		}()
		waitFor(t, "drained", func() bool { var q int; onLoop(t, l, func() { q = c.Queued() }); return q == 0 })
		time.Sleep(2 * timeout)
		select {
		case err := <-closed:
			t.Fatalf("closed with nothing queued: %v", err)
		default:
		}
	})
}
