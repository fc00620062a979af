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
			e := timerEntry{when: rng.Int64N(1000), seq: seq, t: t0}
			if t0.index == 0 {
				h.push(e)
			} else {
				h.h[t0.index-1] = e
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
	var last timerEntry
	for len(h.h) > 0 {
		top := h.h[0]
		if last.t != nil && h.less(&top, &last) {
			t.Fatalf("popped %d/%d after %d/%d", top.when, top.seq, last.when, last.seq)
		}
		h.remove(0)
		last = top
	}
}

func checkHeap(t *testing.T, h *timerHeap, ts []Timer) {
	t.Helper()
	for i := range h.h {
		if int(h.h[i].t.index) != i+1 {
			t.Fatalf("timer at %d has index %d", i, h.h[i].t.index)
		}
		if i > 0 && h.less(&h.h[i], &h.h[(i-1)/4]) {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	if ts == nil {
		return
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

// TestTimerLazy drives timers with random arms, later and earlier resets, lazy
// cancels and Stops while the clock advances, against a model of the deadlines:
// each fires once, at its last deadline, never cancelled, in (deadline, arming)
// order.
func TestTimerLazy(t *testing.T) {
	l, err := New(Config{CPU: -1, Handler: echoHandler()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Stop() }()
	rng := rand.New(rand.NewPCG(3, 4))
	ts := make([]Timer, 300)
	due := make([]int64, len(ts)) // the model: 0 when not armed
	var fired []int
	for i := range ts {
		l.InitTimer(&ts[i], func(*Timer) { fired = append(fired, i) })
	}
	for step := 0; step < 50000; step++ {
		i := rng.IntN(len(ts))
		tm := &ts[i]
		switch rng.IntN(8) {
		case 0, 1, 2, 3:
			d := time.Duration(rng.Int64N(2000))
			tm.Reset(d)
			due[i] = max(l.clock+int64(d), 1)
		case 4, 5:
			tm.cancel()
			due[i] = 0
		case 6:
			if tm.Stop() != (due[i] != 0) {
				t.Fatalf("step %d: Stop of timer %d reported %v, armed %v", step, i, !(due[i] != 0), due[i] != 0)
			}
			due[i] = 0
			if tm.index != 0 {
				t.Fatalf("step %d: a stopped timer is still in the heap", step)
			}
		case 7:
			// Time passes: what is due fires, in order, and nothing else.
			l.clock += rng.Int64N(300)
			fired = fired[:0]
			l.runTimers()
			var want []int
			for j := range ts {
				if due[j] != 0 && due[j] <= l.clock {
					want = append(want, j)
				}
			}
			slices.SortFunc(want, func(a, b int) int {
				if due[a] != due[b] {
					return int(due[a] - due[b])
				}
				return int(int32(ts[a].seq - ts[b].seq))
			})
			if !slices.Equal(fired, want) {
				t.Fatalf("step %d at %d: fired %v, want %v", step, l.clock, fired, want)
			}
			for _, j := range want {
				due[j] = 0
			}
		}
		for j := range ts {
			if ts[j].Pending() != (due[j] != 0) {
				t.Fatalf("step %d: timer %d pending %v, model %v", step, j, ts[j].Pending(), due[j] != 0)
			}
		}
		if step%97 == 0 {
			checkLazyHeap(t, &l.timers)
		}
	}
}

// checkLazyHeap checks the heap's order and that every armed timer's entry is
// keyed at or before its deadline.
func checkLazyHeap(t *testing.T, h *timerHeap) {
	t.Helper()
	checkHeap(t, h, nil)
	for i, e := range h.h {
		if e.t.due != 0 && e.when > e.t.due {
			t.Fatalf("entry %d: key %d after its timer's deadline %d", i, e.when, e.t.due)
		}
	}
}
