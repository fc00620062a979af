package httpcore

import (
	"slices"
	"testing"
	"unsafe"
)

// TestIdleConnSize: an idle keep-alive connection holds this struct (and the
// loop's); it stays within the 144-byte size class (proxy's
// TestIdleConnectionBytes measures the whole).
func TestIdleConnSize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 144 {
		t.Fatalf("conn is %d bytes, want at most 144 (the size class an idle connection pays)", n)
	}
}

// TestSubList: a connection's subrequests, a list through their subState, keep
// their order as any one of them ends.
func TestSubList(t *testing.T) {
	var m conn
	subs := make([]*conn, 4)
	for i := range subs {
		subs[i] = &conn{sub: &subState{}}
		m.addSub(subs[i])
	}
	list := func() []*conn {
		var out []*conn
		for sc := m.subs; sc != nil; sc = sc.sub.next {
			out = append(out, sc)
		}
		return out
	}
	check := func(want ...*conn) {
		t.Helper()
		if got := list(); !slices.Equal(got, want) {
			t.Fatalf("list %p, want %p", got, want)
		}
		if len(want) > 0 && m.subs.sub.prev != want[len(want)-1] {
			t.Fatalf("first's prev %p, want the last %p", m.subs.sub.prev, want[len(want)-1])
		}
	}
	check(subs...)
	m.removeSub(subs[2]) // middle
	check(subs[0], subs[1], subs[3])
	m.removeSub(subs[2]) // not in the list: nothing
	check(subs[0], subs[1], subs[3])
	m.removeSub(subs[3]) // last
	check(subs[0], subs[1])
	m.addSub(subs[2])
	check(subs[0], subs[1], subs[2])
	m.removeSub(subs[0]) // first
	check(subs[1], subs[2])
	m.removeSub(subs[1])
	m.removeSub(subs[2])
	check()
	if m.subs != nil {
		t.Fatal("list not empty")
	}
}
