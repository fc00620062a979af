package freelist

import "testing"

func TestGetPutRelease(t *testing.T) {
	var l List[int]
	a := l.Get()
	*a = 1
	l.Put(a)
	if b := l.Get(); b != a {
		t.Fatal("Put struct not reused")
	}
	l.Release(a)
	if b := l.Get(); b == a {
		t.Fatal("a released struct was handed out before Reuse")
	}
	if !l.Released() {
		t.Fatal("Released false with one waiting")
	}
	l.Reuse()
	if l.Released() {
		t.Fatal("Released true after Reuse")
	}
	if b := l.Get(); b != a {
		t.Fatal("released struct not reused after Reuse")
	}
}

func TestBounded(t *testing.T) {
	var l List[int]
	for range Max + 10 {
		l.Release(new(int))
	}
	l.Reuse()
	if len(l.free) != Max {
		t.Fatalf("%d kept, want %d", len(l.free), Max)
	}
}

func TestGetAllocs(t *testing.T) {
	var l List[[64]byte]
	l.Put(l.Get())
	if n := testing.AllocsPerRun(100, func() { l.Put(l.Get()) }); n != 0 {
		t.Fatalf("%v allocations per Get/Put", n)
	}
}
