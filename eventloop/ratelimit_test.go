package eventloop

import (
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestRateLimit: SetRateLimit lets `after` bytes and one second's worth go at once,
// then paces the rest at the rate, for bytes and file segments alike; the write
// timeout does not run out while output waits for the rate (the rate here leaves it
// waiting longer than the timeout), and lifting the limit sends the rest at once.
func TestRateLimit(t *testing.T) {
	const rate = 64 << 10
	file := make([]byte, 96<<10)
	f, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(file); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, sendfile := range []bool{true, false} {
		var conns []Conn
		h := &funcHandler{open: func(c Conn) { conns = append(conns, c) }}
		l, addr := startLoop(t, Config{Handler: h})
		r, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		var c Conn
		waitFor(t, "accepted", func() bool {
			onLoop(t, l, func() {
				if len(conns) > 0 {
					c = conns[0]
				}
			})
			return c != nil
		})
		// 32 KiB after, 64 KiB in advance, then 64 KiB/s: 224 KiB take 2 s.
		began := time.Now()
		onLoop(t, l, func() {
			c.SetSendfile(sendfile, 0)
			c.SetWriteTimeout(300 * time.Millisecond)
			c.SetRateLimit(rate, 32<<10)
			_, _ = c.Write(make([]byte, 128<<10))
			_ = c.WriteFile(int(f.Fd()), 0, int64(len(file)))
		})
		got := make([]byte, 224<<10)
		r.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(r, got[:96<<10]); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d > 500*time.Millisecond {
			t.Errorf("sendfile %v: the first 96 KiB took %v", sendfile, d)
		}
		if _, err := io.ReadFull(r, got[96<<10:]); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d < 1700*time.Millisecond || d > 4*time.Second {
			t.Errorf("sendfile %v: 224 KiB at 64 KiB/s after 96 KiB took %v, want about 2s", sendfile, d)
		}
		// Lifted: a megabyte goes at once.
		began = time.Now()
		onLoop(t, l, func() {
			c.SetRateLimit(0, 0)
			_, _ = c.Write(make([]byte, 1<<20))
		})
		if _, err := io.ReadFull(r, make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("sendfile %v: unlimited, 1 MiB took %v", sendfile, d)
		}
		r.Close()
	}
}
