package eventloop

import (
	"testing"
	"time"
)

// TestDeferredAcceptReadsAtOnce: on a listener with TCP_DEFER_ACCEPT a connection
// is accepted once its first bytes came, and they are read in the same batch as
// the accept (no epoll round in between: the loop's batch time has not moved);
// without it, the first read waits for the next batch.
func TestDeferredAcceptReadsAtOnce(t *testing.T) {
	for _, deferAccept := range []int{1, 0} {
		type seen struct {
			sameBatch bool
			data      string
		}
		got := make(chan seen, 1)
		var opened time.Time
		h := &funcHandler{
			open: func(c Conn) { opened = c.Loop().Now() },
			data: func(c Conn, b []byte) {
				got <- seen{c.Loop().Now().Equal(opened), string(b)}
				_ = c.Close()
			},
		}
		l, addr := startLoopListening(t, Config{Handler: h}, ListenOptions{DeferAccept: deferAccept})
		c := dial(t, addr)
		time.Sleep(20 * time.Millisecond) // without deferring, accepted before the request comes
		if _, err := c.Write([]byte("request")); err != nil {
			t.Fatal(err)
		}
		s := recv(t, got)
		c.Close()
		_ = l.Stop()
		waitDone(t, l.Done())
		if s.data != "request" {
			t.Errorf("deferred %d: read %q", deferAccept, s.data)
		}
		if want := deferAccept > 0; s.sameBatch != want {
			t.Errorf("deferred %d: first read in the accept's batch %v, want %v", deferAccept, s.sameBatch, want)
		}
	}
}
