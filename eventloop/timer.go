package eventloop

import "time"

// Timer is a one-shot timer owned by one loop. It is meant to be embedded in
// the struct it times (a connection, a listener) and re-armed in place, so
// arming, resetting and cancelling never allocate. Its methods must be called
// on the loop's thread.
//
// Pushing a deadline later is lazy, as in the Go runtime's timers: the heap
// entry keeps its earlier key and only due moves; runTimers re-files an entry
// whose key comes up before its deadline. The loop's connection timers also
// cancel lazily (cancel): a keep-alive connection cancels its idle timer when a
// request arrives and arms it again when the request is done, each O(1) where
// removing and re-inserting cost a heap walk.
type Timer struct {
	// due is the deadline on the loop clock (ns) while armed, 0 when not (a
	// deadline is never 0).
	due int64
	// seq orders timers of the same deadline by arming, FIFO; it wraps, and is
	// compared as a serial number (a wrong order among equal deadlines of
	// timers armed 2^31 arms apart is harmless). 32 bits, beside index, keep
	// the timer at 32 bytes: a connection has two.
	seq   uint32
	index int32 // position of its entry in the heap + 1; 0 when none
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
	t.due, t.seq = max(l.now()+int64(max(d, 0)), 1), l.timerSeq
	if l.firing && t.due <= l.firingNow {
		// Re-armed by a callback of the current pass: it waits for the next one,
		// so a callback that re-arms with 0 cannot spin the loop.
		t.due = l.firingNow + 1
	}
	th := &l.timers
	switch i := int(t.index - 1); {
	case i < 0:
		th.push(timerEntry{when: t.due, seq: t.seq, t: t})
	case t.due < th.h[i].when:
		th.h[i].when, th.h[i].seq = t.due, t.seq
		th.up(i)
	default:
		// As late as the entry's key or later: the entry stays where it is, and
		// runTimers files it under due when its key comes up.
		return
	}
	if th.h[0].t == t {
		l.armTimerfd()
	}
}

// Stop cancels t and reports whether it was pending. It takes t's entry out of
// the heap, so t's memory may be reused or zeroed afterwards.
func (t *Timer) Stop() bool {
	was := t.due != 0
	t.due = 0
	if t.index != 0 {
		// A cancelled minimum leaves the timerfd armed early: that wake finds
		// nothing due and re-arms, which is cheaper than a syscall per Stop.
		t.loop.timers.remove(int(t.index - 1))
	}
	return was
}

// cancel is Stop that leaves t's entry in the heap until its key comes up, for
// a Reset before then to reuse: O(1). t must be Stopped before its memory is
// zeroed or reused for another timer (a connection's close does that).
func (t *Timer) cancel() { t.due = 0 }

// Pending reports whether t is armed and has not fired.
func (t *Timer) Pending() bool { return t.due != 0 }

// timerHeap is a 4-ary min-heap of entries keyed by (when, seq), each timer's
// entry index stored in the timer, so Reset and Stop find it without
// searching. The keys sit in the heap's own array, so sifting reads no timer;
// four children per node keep the tree shallow and siblings on one cache line.
type timerHeap struct {
	h []timerEntry
}

// timerEntry is a timer's place in the heap. Its key is the timer's deadline
// and seq when filed; a deadline pushed later, or a lazy cancel, leaves it
// earlier than the timer's (pop re-files or drops it).
type timerEntry struct {
	when int64
	seq  uint32
	t    *Timer
}

func (th *timerHeap) less(a, b *timerEntry) bool {
	return a.when < b.when || (a.when == b.when && int32(a.seq-b.seq) < 0)
}

func (th *timerHeap) set(i int, e timerEntry) {
	th.h[i] = e
	e.t.index = int32(i + 1)
}

func (th *timerHeap) push(e timerEntry) {
	th.h = append(th.h, e)
	th.up(len(th.h) - 1)
}

func (th *timerHeap) remove(i int) {
	t := th.h[i].t
	last := len(th.h) - 1
	if i != last {
		th.set(i, th.h[last])
	}
	th.h[last] = timerEntry{}
	th.h = th.h[:last]
	if i != last {
		th.fix(i)
	}
	t.index = 0
}

// pop takes the heap's earliest entry if its key is at or before now, and
// returns the timer to fire: nil for the entry of a cancelled timer (dropped)
// or of one pushed later (filed under its deadline, even if that is due too, so
// that timers fire in deadline order). ok is false when nothing is due.
func (th *timerHeap) pop(now int64) (t *Timer, ok bool) {
	if len(th.h) == 0 || th.h[0].when > now {
		return nil, false
	}
	e := &th.h[0]
	t = e.t
	if t.due != 0 && (t.due != e.when || t.seq != e.seq) {
		e.when, e.seq = t.due, t.seq
		th.down(0)
		return nil, true
	}
	th.remove(0)
	if t.due == 0 {
		return nil, true
	}
	t.due = 0
	return t, true
}

func (th *timerHeap) fix(i int) {
	if !th.up(i) {
		th.down(i)
	}
}

func (th *timerHeap) up(i int) bool {
	e := th.h[i]
	moved := false
	for i > 0 {
		p := (i - 1) / 4
		if !th.less(&e, &th.h[p]) {
			break
		}
		th.set(i, th.h[p])
		i, moved = p, true
	}
	th.set(i, e)
	return moved
}

func (th *timerHeap) down(i int) {
	e := th.h[i]
	n := len(th.h)
	for {
		first := 4*i + 1
		if first >= n {
			break
		}
		best := first
		for c := first + 1; c < first+4 && c < n; c++ {
			if th.less(&th.h[c], &th.h[best]) {
				best = c
			}
		}
		if !th.less(&th.h[best], &e) {
			break
		}
		th.set(i, th.h[best])
		i = best
	}
	th.set(i, e)
}
