package eventloop

import (
	"testing"
)

// A hook armed several times during one batch runs once, after the work of that
// batch, and again when armed in a later batch.
func TestBatchEndRunsOncePerBatch(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	var h BatchEnd
	runs, armedBefore := 0, 0
	ran := make(chan int, 4)
	onLoop(t, l, func() {
		l.InitBatchEnd(&h, func() { runs++; ran <- armedBefore })
	})
	for range 2 {
		if err := l.Run(func() {
			for range 3 {
				armedBefore++
				h.Arm()
			}
		}); err != nil {
			t.Fatal(err)
		}
		<-ran
	}
	onLoop(t, l, func() {
		if runs != 2 {
			t.Errorf("the hook ran %d times for 2 batches, want 2", runs)
		}
	})
}

// AtExit hooks run on the loop's thread when it stops, after the hooks the closing
// connections armed.
func TestAtExitRunsAfterBatchEnds(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	var h BatchEnd
	var order []string
	onLoop(t, l, func() {
		l.InitBatchEnd(&h, func() { order = append(order, "batch") })
		l.AtExit(func() { h.Arm(); order = append(order, "exit") })
	})
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if len(order) != 1 || order[0] != "exit" {
		t.Errorf("ran %v, want [exit]", order)
	}
}
