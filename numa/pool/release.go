package pool

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// How idle memory goes back to the kernel.
//
// A class's reserve keeps two stacks of free buffers: dirty ones, whose pages
// may be resident, and clean ones, which hold no memory (given back, or never
// touched since their chunk was carved). Locals take dirty buffers first, top of
// the stack first, and give back on top, so the bottom of the dirty stack is
// what has been free the longest. The domain's releaser goroutine wakes every
// ReleaseDelay/releaseTicks and records the least length the dirty stack had
// since its last wake: buffers below the least length of the last releaseTicks
// wakes were not touched for at least ReleaseDelay, and their pages are given
// back (within ReleaseDelay*(1+1/releaseTicks) of their last use). This is the
// low-water mark tcmalloc's thread caches scavenge by, over a window; it needs
// no clock on the hot path: Get and Put are unchanged, and a Local's refill
// only compares one int under the lock it already holds.
//
// MADV_DONTNEED rather than MADV_FREE: DONTNEED drops the pages at once, so the
// process RSS and its cgroup's charge fall when the proxy goes idle, which is
// what an operator watches; MADV_FREE leaves them counted until the kernel is
// short of memory (Go's runtime went back to DONTNEED by default in 1.16 for
// that reason). What FREE would save, a fault and a zeroed page when the buffer
// is used again, only applies to buffers idle for the whole delay. A page
// faulted in after DONTNEED is placed by the VMA's policy, so the arena's
// mbind(MPOL_BIND) still decides its node.

// releaseTicks is how many releaser wakes make one ReleaseDelay.
const releaseTicks = 4

// releaseStep bounds the buffers one release takes out of the reserve at a
// time: while their pages are being given back, Locals cannot have them.
const releaseStep = 256

// reserveClass is the domain's free buffers of one class, as offsets into the
// arena. Guarded by Domain.mu.
type reserveClass struct {
	dirty     []uintptr // may be resident; the bottom has been free the longest
	clean     []uintptr // hold no memory
	releasing int       // taken out by the releaser, being given back

	low  int               // the least len(dirty) since the releaser's last wake
	lows [releaseTicks]int // low of each of the last wakes
	wake int               // wakes so far, to index lows
}

// free is the number of free buffers of the class in the reserve.
func (r *reserveClass) free() int64 {
	return int64(len(r.dirty) + len(r.clean) + r.releasing)
}

// tick ends one releaser period and returns how many buffers at the bottom of
// the dirty stack have been untouched for the last releaseTicks periods.
func (r *reserveClass) tick() int {
	r.lows[r.wake%releaseTicks] = r.low
	r.wake++
	r.low = len(r.dirty)
	if r.wake < releaseTicks {
		return 0
	}
	return min(slices.Min(r.lows[:]), len(r.dirty))
}

// takeBottom moves the k oldest dirty buffers to dst.
func (r *reserveClass) takeBottom(dst []uintptr, k int) []uintptr {
	dst = append(dst, r.dirty[:k]...)
	n := copy(r.dirty, r.dirty[k:])
	r.dirty = r.dirty[:n]
	// The buffers above moved down by k.
	r.low = max(r.low-k, 0)
	for i := range r.lows {
		r.lows[i] = max(r.lows[i]-k, 0)
	}
	r.releasing += k
	return dst
}

// releaser gives idle reserve memory back every period until stop is closed.
func (d *Domain) releaser(period time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(period)
	defer t.Stop()
	var scratch []uintptr
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for ci := range d.classes {
			scratch = d.releaseIdle(ci, scratch)
		}
	}
}

// releaseIdle gives back the pages of the buffers of class ci that stayed in
// the dirty reserve for the last releaseTicks periods. The reserve's lock is
// not held while the kernel frees the pages.
func (d *Domain) releaseIdle(ci int, scratch []uintptr) []uintptr {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return scratch
	}
	r := &d.reserve[ci]
	idle := r.tick()
	d.mu.Unlock()
	for idle > 0 {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return scratch
		}
		// A Local may have taken some of them meanwhile: low says how far down.
		idle = min(idle, r.low)
		k := min(idle, releaseStep)
		scratch = r.takeBottom(scratch[:0], k)
		d.mu.Unlock()
		idle -= k

		freed, err := d.release(d.classes[ci].size, scratch)

		d.mu.Lock()
		if !d.closed {
			r.clean = append(r.clean, scratch...)
			r.releasing -= k
			d.stats.classes[ci].freeClean.Store(int64(len(r.clean)))
		}
		d.mu.Unlock()
		d.stats.released.Add(freed)
		if err != nil {
			d.stats.releaseErr.Store(&err)
		}
	}
	return scratch
}

// release gives back the whole pages that the buffers at offs (of size bytes,
// owned by the caller) cover, coalescing neighbours into one madvise. A page
// shared with a buffer not in offs (classes below a page) stays.
func (d *Domain) release(size int, offs []uintptr) (freed int64, err error) {
	slices.Sort(offs)
	page := uintptr(unix.Getpagesize())
	for i := 0; i < len(offs); {
		start := offs[i]
		end := start + uintptr(size)
		for i++; i < len(offs) && offs[i] == end; i++ {
			end += uintptr(size)
		}
		start = (start + page - 1) &^ (page - 1)
		end &^= page - 1
		if start >= end {
			continue
		}
		mem := unsafe.Slice((*byte)(unsafe.Add(d.base, start)), end-start)
		if e := unix.Madvise(mem, unix.MADV_DONTNEED); e != nil {
			err = fmt.Errorf("pool: domain %d: madvise(MADV_DONTNEED) +%#x, %d bytes: %w", d.id, start, end-start, e)
			continue
		}
		freed += int64(end - start)
	}
	return freed, err
}
