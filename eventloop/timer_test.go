package eventloop

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestTimersFireInOrderAndCancelledNever(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	var fired []int
	timers := make([]Timer, 6)
	done := make(chan struct{})
	onLoop(t, l, func() {
		for i := range timers {
			l.InitTimer(&timers[i], func(*Timer) {
				fired = append(fired, i)
				if i == 5 {
					close(done)
				}
			})
		}
		ms := time.Millisecond
		timers[0].Reset(30 * ms)
		timers[1].Reset(10 * ms)
		timers[2].Reset(20 * ms)
		timers[3].Reset(15 * ms)
		timers[4].Reset(5 * ms)
		timers[5].Reset(60 * ms) // the last one; everything else is due before it
		if !timers[3].Stop() || timers[3].Stop() {
			t.Error("Stop of a pending timer must report true once")
		}
		timers[1].Reset(40 * ms) // moved after 0
		timers[4].Reset(1 * ms)
	})
	waitDone(t, done)
	onLoop(t, l, func() {
		if want := []int{4, 2, 0, 1, 5}; !slices.Equal(fired, want) {
			t.Errorf("fired %v, want %v", fired, want)
		}
		for i := range timers {
			if timers[i].Pending() {
				t.Errorf("timer %d still pending", i)
			}
		}
	})
}

func TestTimerRearmFromCallback(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	var tm Timer
	count := 0
	done := make(chan struct{})
	onLoop(t, l, func() {
		l.InitTimer(&tm, func(t *Timer) {
			if count++; count < 5 {
				t.Reset(0) // due at once, yet must wait for the next pass
				return
			}
			close(done)
		})
		tm.Reset(0)
	})
	waitDone(t, done)
}

// TestTimerHeapOrder drives the 4-ary heap with random arms, resets and
// cancels and checks it always yields the earliest pending timer.
func TestTimerHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h timerHeap
	ts := make([]Timer, 500)
	seq := uint32(math.MaxUint32 - 10000) // arming numbers wrap halfway through
	for step := 0; step < 20000; step++ {
		t0 := &ts[rng.IntN(len(ts))]
		switch rng.IntN(3) {
		case 0, 1:
			seq++
			t0.when, t0.seq = rng.Int64N(1000), seq
			if t0.index == 0 {
				h.push(t0)
			} else {
				h.fix(int(t0.index - 1))
			}
		case 2:
			if t0.index != 0 {
				h.remove(int(t0.index - 1))
			}
		}
		if step%97 == 0 {
			checkHeap(t, &h, ts)
		}
	}
	checkHeap(t, &h, ts)
	// Popping yields ascending (when, seq).
	var last *Timer
	for len(h.h) > 0 {
		top := h.h[0]
		if last != nil && h.less(top, last) {
			t.Fatalf("popped %d/%d after %d/%d", top.when, top.seq, last.when, last.seq)
		}
		h.remove(0)
		last = top
	}
}

func checkHeap(t *testing.T, h *timerHeap, ts []Timer) {
	t.Helper()
	for i, tm := range h.h {
		if int(tm.index) != i+1 {
			t.Fatalf("timer at %d has index %d", i, tm.index)
		}
		if i > 0 && h.less(tm, h.h[(i-1)/4]) {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	pending := 0
	for i := range ts {
		if ts[i].index != 0 {
			pending++
		}
	}
	if pending != len(h.h) {
		t.Fatalf("%d timers say pending, heap holds %d", pending, len(h.h))
	}
}

func TestConnTimeout(t *testing.T) {
	timedOut := make(chan struct{}, 1)
	h := &funcHandler{
		open: func(c Conn) { c.SetTimeout(time.Hour) },
		data: func(c Conn, b []byte) {
			switch string(b) {
			case "short":
				c.SetTimeout(time.Millisecond) // reset to much sooner
			case "cancel":
				c.SetTimeout(0)
				_, _ = c.Write(b)
			}
		},
		timeout: func(c Conn) { timedOut <- struct{}{}; _ = c.Close() },
	}
	_, addr := startLoop(t, Config{Handler: h})
	c := dial(t, addr)
	defer c.Close()
	if got := roundTrip(t, c, "cancel"); got != "cancel" {
		t.Fatal(got)
	}
	if _, err := c.Write([]byte("short")); err != nil {
		t.Fatal(err)
	}
	recv(t, timedOut)
	expectClosed(t, c)
}
