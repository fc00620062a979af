package pool

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Local is one event loop's free list over a Domain. It takes no locks and
// must be used by one goroutine at a time: the loop's own locked thread. It
// satisfies eventloop.BufferPool's method set, but its Get returns nil when it
// cannot serve; wrap it in a HeapFallback where the caller needs a buffer
// every time.
type Local struct {
	d       *Domain
	classes []localClass
	closed  bool

	// Counters written only by the owner (load+store, no lock prefix) and
	// read by Stats from any goroutine.
	tooLarge atomic.Int64
	heapGets atomic.Int64
	heapPuts atomic.Int64
}

type localClass struct {
	size int
	free []uintptr // offsets into the arena; cap is the class's high mark
	gets atomic.Int64
	puts atomic.Int64
	// taken and given count the buffers moved from and to the reserve, so that
	// the free list's length is taken-given-gets+puts for Stats: a Get or Put
	// stores one counter (a locked instruction on amd64), not two.
	taken atomic.Int64
	given atomic.Int64
}

// inc adds one to a counter that only the calling goroutine writes.
func inc(c *atomic.Int64) { c.Store(c.Load() + 1) }

// Domain returns the domain the Local lends from.
func (l *Local) Domain() *Domain { return l.d }

// Get returns a buffer with len size and cap the smallest class holding size,
// from this Local's domain only, or nil if no class is that large or the
// domain is exhausted (TryGet says which). Its bytes are not zeroed. The
// buffer must go back through Put of a Local of the same Domain.
func (l *Local) Get(size int) []byte {
	b, _ := l.TryGet(size)
	return b
}

// TryGet is Get that reports why it returned nil: ErrTooLarge (use other
// memory for this size), ErrExhausted (the domain reached its cap) or
// ErrClosed. A negative size is ErrTooLarge too.
func (l *Local) TryGet(size int) ([]byte, error) {
	ci := -1
	for i := range l.classes {
		if uint(size) <= uint(l.classes[i].size) {
			ci = i
			break
		}
	}
	if ci < 0 {
		inc(&l.tooLarge)
		return nil, ErrTooLarge
	}
	c := &l.classes[ci]
	n := len(c.free)
	if n == 0 {
		if err := l.refill(ci); err != nil {
			return nil, err
		}
		n = len(c.free)
	}
	off := c.free[n-1]
	c.free = c.free[:n-1]
	l.d.lend(off)
	inc(&c.gets)
	return unsafe.Slice((*byte)(unsafe.Add(l.d.base, off)), c.size)[:size], nil
}

func (l *Local) refill(ci int) error {
	if l.closed {
		panic("pool: Local used after Close")
	}
	c := &l.classes[ci]
	n := len(c.free)
	var err error
	c.free, err = l.d.take(ci, c.free, l.d.classes[ci].batch)
	c.taken.Add(int64(len(c.free) - n))
	return err
}

// Put returns b, a buffer from Get of any Local of the same Domain, with its
// original start and capacity (its length does not matter). It panics with
// a *PutError if b is not such a buffer or is not handed out (a second Put):
// either is a bug that, tolerated, would mix another node's memory into this
// domain or give one buffer to two owners.
func (l *Local) Put(b []byte) {
	if err := l.TryPut(b); err != nil {
		panic(err)
	}
}

// TryPut is Put that returns the *PutError instead of panicking; the
// buffer is then left alone.
func (l *Local) TryPut(b []byte) error {
	ci, off, perr := l.d.locate(b)
	if perr != nil {
		return perr
	}
	if !l.d.unlend(off) {
		return l.d.putError(b, l.d.id, "not handed out (put twice?)")
	}
	c := &l.classes[ci]
	if len(c.free) == cap(c.free) {
		l.flush(ci)
	}
	c.free = append(c.free, off)
	inc(&c.puts)
	return nil
}

// flush gives the oldest batch of class ci back to the reserve.
func (l *Local) flush(ci int) {
	if l.closed {
		panic("pool: Local used after Close")
	}
	c := &l.classes[ci]
	k := min(l.d.classes[ci].batch, len(c.free))
	l.d.give(ci, c.free[:k])
	c.given.Add(int64(k))
	n := copy(c.free, c.free[k:])
	c.free = c.free[:n]
}

// Owns reports whether b lies in this Local's domain arena (not whether Put
// would accept it).
func (l *Local) Owns(b []byte) bool { return l.d.Contains(b) }

// Close gives the Local's free buffers back to the domain reserve. Buffers
// handed out stay valid and may be Put to another Local of the domain. The
// Local must not be used afterwards.
func (l *Local) Close() {
	if l.closed {
		return
	}
	d := l.d
	for ci := range l.classes {
		c := &l.classes[ci]
		if len(c.free) > 0 {
			d.give(ci, c.free)
			c.given.Add(int64(len(c.free)))
		}
		c.free = nil
		cs := &d.stats.classes[ci]
		cs.gets.Add(c.gets.Load())
		cs.puts.Add(c.puts.Load())
	}
	d.stats.tooLarge.Add(l.tooLarge.Load())
	d.stats.heapGets.Add(l.heapGets.Load())
	d.stats.heapPuts.Add(l.heapPuts.Load())
	l.closed = true

	d.mu.Lock()
	defer d.mu.Unlock()
	d.nlocals--
	var ls []*Local
	for _, o := range *d.locals.Load() {
		if o != l {
			ls = append(ls, o)
		}
	}
	d.locals.Store(&ls)
}

// String names the Local for logs.
func (l *Local) String() string { return fmt.Sprintf("pool.Local(domain %d)", l.d.id) }
