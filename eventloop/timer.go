package eventloop

import "time"

// Timer is a one-shot timer owned by one loop. It is meant to be embedded in
// the struct it times (a connection, a listener) and re-armed in place, so
// arming, resetting and cancelling never allocate. Its methods must be called
// on the loop's thread.
type Timer struct {
	when int64 // loop clock, ns
	// seq orders timers of the same deadline by arming, FIFO; it wraps, and is
	// compared as a serial number (a wrong order among equal deadlines of
	// timers armed 2^31 arms apart is harmless). 32 bits, beside index, keep
	// the timer at 32 bytes: a connection has two.
	seq   uint32
	index int32 // position in the heap + 1; 0 when not pending
	fn    func(*Timer)
	loop  *Loop
}

// InitTimer binds t to the loop and to the function it calls when it fires.
// Call it once, before the first Reset.
func (l *Loop) InitTimer(t *Timer, fn func(*Timer)) {
	t.loop, t.fn = l, fn
}

// Reset arms t to fire after d (now if d <= 0), replacing a pending deadline.
func (t *Timer) Reset(d time.Duration) {
	l := t.loop
	l.timerSeq++
	t.when, t.seq = l.now()+int64(max(d, 0)), l.timerSeq
	if l.firing && t.when <= l.firingNow {
		// Re-armed by a callback of the current pass: it waits for the next one,
		// so a callback that re-arms with 0 cannot spin the loop.
		t.when = l.firingNow + 1
	}
	if t.index == 0 {
		l.timers.push(t)
	} else {
		l.timers.fix(int(t.index - 1))
	}
	if l.timers.h[0] == t {
		l.armTimerfd()
	}
}

// Stop cancels t and reports whether it was pending.
func (t *Timer) Stop() bool {
	if t.index == 0 {
		return false
	}
	// A cancelled minimum leaves the timerfd armed early: that wake finds
	// nothing due and re-arms, which is cheaper than a syscall per Stop.
	t.loop.timers.remove(int(t.index - 1))
	return true
}

// Pending reports whether t is armed and has not fired.
func (t *Timer) Pending() bool { return t.index != 0 }

// timerHeap is a 4-ary min-heap on (when, seq) with each timer's index stored
// in the timer, so Reset and Stop are O(log n) without searching. Four
// children per node keep the tree shallow and siblings on one cache line.
type timerHeap struct {
	h []*Timer
}

func (th *timerHeap) less(a, b *Timer) bool {
	return a.when < b.when || (a.when == b.when && int32(a.seq-b.seq) < 0)
}

func (th *timerHeap) set(i int, t *Timer) {
	th.h[i] = t
	t.index = int32(i + 1)
}

func (th *timerHeap) push(t *Timer) {
	th.h = append(th.h, t)
	th.up(len(th.h) - 1)
}

func (th *timerHeap) remove(i int) {
	t := th.h[i]
	last := len(th.h) - 1
	if i != last {
		th.set(i, th.h[last])
	}
	th.h[last] = nil
	th.h = th.h[:last]
	if i != last {
		th.fix(i)
	}
	t.index = 0
}

func (th *timerHeap) fix(i int) {
	if !th.up(i) {
		th.down(i)
	}
}

func (th *timerHeap) up(i int) bool {
	t := th.h[i]
	moved := false
	for i > 0 {
		p := (i - 1) / 4
		if !th.less(t, th.h[p]) {
			break
		}
		th.set(i, th.h[p])
		i, moved = p, true
	}
	th.set(i, t)
	return moved
}

func (th *timerHeap) down(i int) {
	t := th.h[i]
	n := len(th.h)
	for {
		first := 4*i + 1
		if first >= n {
			break
		}
		best := first
		for c := first + 1; c < first+4 && c < n; c++ {
			if th.less(th.h[c], th.h[best]) {
				best = c
			}
		}
		if !th.less(th.h[best], t) {
			break
		}
		th.set(i, th.h[best])
		i = best
	}
	th.set(i, t)
}
