package eventloop

import (
	"runtime"
	"testing"
	"time"
)

// TestHoldPLeavesAP: a loop that keeps its P while waiting raises GOMAXPROCS so
// that the rest of the program still has one, and serves as an ordinary loop does.
func TestHoldPLeavesAP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	_, addr := startLoop(t, Config{CPU: -1, Handler: echoHandler(), HoldP: true})
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS %d with one HoldP loop running, want 2", got)
	}
	// A second loop beside it (a rollover) gets its P too, and gives it back.
	second, _ := startLoop(t, Config{CPU: -1, Handler: echoHandler(), HoldP: true})
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("GOMAXPROCS %d with two HoldP loops running, want 3", got)
	}
	second.Stop()
	<-second.Done()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS %d once the second loop stopped, want 2", got)
	}
	c := dial(t, addr)
	defer c.Close()
	for _, msg := range []string{"a", "bc", "def"} {
		if got := roundTrip(t, c, msg); got != msg {
			t.Fatalf("echo %q, want %q", got, msg)
		}
	}
}

// TestHoldPYieldsWhenQuiet: a HoldP loop never parks, so the runtime would see it
// run for ever and preempt it every 10 ms, mid-batch; it gives the scheduler a
// turn itself at a quiet moment instead, about every yieldEvery, not at every batch.
func TestHoldPYieldsWhenQuiet(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l, addr := startLoop(t, Config{CPU: -1, Handler: echoHandler(), HoldP: true})
	c := dial(t, addr)
	defer c.Close()
	var before, after uint64
	onLoop(t, l, func() { before = l.yields })
	start := time.Now()
	rounds := 0
	for time.Since(start) < 300*time.Millisecond {
		roundTrip(t, c, "ping")
		rounds++
		time.Sleep(200 * time.Microsecond)
	}
	onLoop(t, l, func() { after = l.yields })
	elapsed := time.Since(start)
	got, most := after-before, uint64(elapsed/yieldEvery)+2
	if got == 0 || got > most {
		t.Fatalf("%d yields in %v of %d round trips, want 1 to %d", got, elapsed, rounds, most)
	}
}
