package eventloop

import (
	"runtime"
	"testing"
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
