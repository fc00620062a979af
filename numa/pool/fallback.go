package pool

import "errors"

// HeapFallback is a Local that never fails: what the Local cannot serve (a
// size above the largest class, an exhausted domain) comes from the Go heap
// and is left to the garbage collector when put back. It satisfies
// eventloop.BufferPool, whose Get must not return nil. Buffers from another
// domain's arena are still refused (Put panics with a *PutError). Counted as
// HeapGets and HeapPuts in the domain's Stats. Same threading rule as Local.
type HeapFallback struct {
	l *Local
}

// NewHeapFallback wraps l.
func NewHeapFallback(l *Local) *HeapFallback { return &HeapFallback{l: l} }

// Local returns the wrapped Local.
func (f *HeapFallback) Local() *Local { return f.l }

// Get returns a buffer of len size from the Local, else from the Go heap.
func (f *HeapFallback) Get(size int) []byte {
	if b := f.l.Get(size); b != nil {
		return b
	}
	inc(&f.l.heapGets)
	return make([]byte, size)
}

// Put returns b to the Local if it is from the domain's arena, drops it if it
// is from no arena, and panics with a *PutError otherwise.
func (f *HeapFallback) Put(b []byte) {
	err := f.l.TryPut(b)
	if err == nil {
		return
	}
	var pe *PutError
	if errors.As(err, &pe) && pe.Owner < 0 {
		inc(&f.l.heapPuts)
		return
	}
	panic(err)
}
