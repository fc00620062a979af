package eventloop

import (
	"strings"
	"testing"
)

// TestInputReady: a connection knows, as nginx's rev->ready does, whether input
// may still wait in the socket without asking the kernel: a read that filled the
// buffer says maybe, a shorter one says no; before the first read and after a
// PauseRead it does not know.
func TestInputReady(t *testing.T) {
	type state struct {
		n            int
		ready, known bool
	}
	seen := make(chan state, 64)
	opened := make(chan state, 1)
	h := &funcHandler{
		open: func(c Conn) {
			r, k := c.(InputReadier).InputReady()
			opened <- state{-1, r, k}
		},
		data: func(c Conn, b []byte) {
			r, k := c.(InputReadier).InputReady()
			seen <- state{len(b), r, k}
			if string(b) == "pause" {
				c.PauseRead()
				r, k := c.(InputReadier).InputReady()
				seen <- state{0, r, k}
				c.ResumeRead()
				r, k = c.(InputReadier).InputReady()
				seen <- state{0, r, k}
			}
			_, _ = c.Write([]byte{'.'})
		},
	}
	_, addr := startLoop(t, Config{Handler: h, ReadBufferSize: 64})
	c := dial(t, addr)
	defer c.Close()
	roundTrip(t, c, "x") // a short read
	if recv(t, opened).known {
		t.Errorf("before the first read: InputReady known")
	}
	if s := recv(t, seen); s.n != 1 || s.ready || !s.known {
		t.Fatalf("after a 1-byte read: %+v, want not ready, known", s)
	}
	// 64 bytes fill the buffer: more may wait (here, 36 more).
	if _, err := c.Write([]byte(strings.Repeat("y", 100))); err != nil {
		t.Fatal(err)
	}
	if s := recv(t, seen); s.n != 64 || !s.ready || !s.known {
		t.Fatalf("after a read that filled the buffer: %+v, want ready, known", s)
	}
	if s := recv(t, seen); s.n != 36 || s.ready || !s.known {
		t.Fatalf("after the rest: %+v, want not ready, known", s)
	}
	if _, err := c.Write([]byte("pause")); err != nil {
		t.Fatal(err)
	}
	recv(t, seen)
	for _, what := range []string{"after PauseRead", "after ResumeRead with no read since"} {
		if s := recv(t, seen); s.known {
			t.Fatalf("%s: %+v, want unknown", what, s)
		}
	}
}
