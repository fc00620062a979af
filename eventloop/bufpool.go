package eventloop

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// BufferPool lends the buffers that hold queued output. A later issue plugs in
// pools whose memory is bound to the loop's NUMA node; nothing stored in the
// buffers holds Go pointers.
type BufferPool interface {
	// Get returns a buffer of len size (its cap may be larger).
	Get(size int) []byte
	// Put returns a buffer obtained from Get.
	Put(b []byte)
}

const (
	minPoolShift    = 12 // 4 KiB
	maxPoolShift    = 20 // 1 MiB
	maxFreePerClass = 4096
)

// HeapPool is a BufferPool on the Go heap with power-of-two size classes from
// 4 KiB to 1 MiB, safe for concurrent use. It counts buffers handed out so tests
// and metrics can see what connections hold.
type HeapPool struct {
	mu          sync.Mutex
	free        [maxPoolShift - minPoolShift + 1][][]byte
	outstanding atomic.Int64
	allocated   atomic.Int64
}

// NewHeapPool returns an empty HeapPool.
func NewHeapPool() *HeapPool { return &HeapPool{} }

// Get implements BufferPool.
func (p *HeapPool) Get(size int) []byte {
	p.outstanding.Add(1)
	shift := max(minPoolShift, bits.Len(uint(max(size, 1)-1)))
	if shift > maxPoolShift {
		p.allocated.Add(1)
		return make([]byte, size)
	}
	class := shift - minPoolShift
	p.mu.Lock()
	if n := len(p.free[class]); n > 0 {
		b := p.free[class][n-1]
		p.free[class][n-1] = nil
		p.free[class] = p.free[class][:n-1]
		p.mu.Unlock()
		return b[:size]
	}
	p.mu.Unlock()
	p.allocated.Add(1)
	return make([]byte, size, 1<<shift)
}

// Put implements BufferPool.
func (p *HeapPool) Put(b []byte) {
	p.outstanding.Add(-1)
	c := cap(b)
	if c&(c-1) != 0 || c < 1<<minPoolShift || c > 1<<maxPoolShift {
		return // not one of ours: let the GC have it
	}
	class := bits.Len(uint(c)) - 1 - minPoolShift
	p.mu.Lock()
	if len(p.free[class]) < maxFreePerClass {
		p.free[class] = append(p.free[class], b[:c])
	}
	p.mu.Unlock()
}

// Outstanding returns the number of buffers handed out and not yet returned.
func (p *HeapPool) Outstanding() int64 { return p.outstanding.Load() }

// Allocated returns the number of buffers the pool ever had to allocate.
func (p *HeapPool) Allocated() int64 { return p.allocated.Load() }
