// Package freelist keeps a loop's released structs for reuse, so that what a
// connection needs is not allocated anew for each connection (and the garbage
// collector has nothing to do on the connection path).
package freelist

// List is a bounded stack of structs of one loop (not safe for concurrent use).
// Put makes a struct reusable at once; Release only from the next Reuse, for
// structs that code up the stack may still look at when they are released.
type List[T any] struct {
	free, released []*T
}

// Max bounds the structs a list keeps; more are left to the garbage collector.
const Max = 1024

// Get returns a kept struct, as it was left (the caller sets every field), or
// a new zero one.
func (l *List[T]) Get() *T {
	n := len(l.free)
	if n == 0 {
		return new(T)
	}
	x := l.free[n-1]
	l.free[n-1] = nil
	l.free = l.free[:n-1]
	return x
}

// Put keeps x for the next Get.
func (l *List[T]) Put(x *T) {
	if len(l.free) < Max {
		l.free = append(l.free, x)
	}
}

// Release keeps x for a Get after the next Reuse.
func (l *List[T]) Release(x *T) { l.released = append(l.released, x) }

// Released reports structs waiting for Reuse.
func (l *List[T]) Released() bool { return len(l.released) > 0 }

// Reuse makes the released structs available to Get.
func (l *List[T]) Reuse() {
	for i, x := range l.released {
		l.Put(x)
		l.released[i] = nil
	}
	l.released = l.released[:0]
}
