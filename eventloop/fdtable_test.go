package eventloop

import (
	"testing"
	"unsafe"
)

// TestFDTableChunks: slots on both sides of chunk boundaries, and far beyond the
// last chunk, are found by fd and generation, and each visits them in fd order.
func TestFDTableChunks(t *testing.T) {
	var tb fdTable
	fds := []int{0, slotChunk - 1, slotChunk, 5*slotChunk + 3}
	conns := make([]conn, len(fds))
	gens := make([]uint32, len(fds))
	for i, fd := range fds {
		gens[i] = tb.register(fd, slotConn, unsafe.Pointer(&conns[i]))
	}
	for i, fd := range fds {
		if s := tb.lookup(fd, gens[i]); s == nil || s.conn() != &conns[i] {
			t.Fatalf("fd %d: lookup %v", fd, s)
		}
		if tb.conn(fd) != &conns[i] {
			t.Fatalf("fd %d: conn", fd)
		}
		if tb.lookup(fd, gens[i]+100) != nil {
			t.Fatalf("fd %d: stale generation found", fd)
		}
	}
	for _, fd := range []int{-1, 1, 3 * slotChunk, 100 * slotChunk} {
		if tb.lookup(fd, 1) != nil {
			t.Fatalf("fd %d: found, never registered", fd)
		}
	}
	tb.unregister(fds[1])
	tb.unregister(100 * slotChunk) // beyond the table: nothing
	var seen []*conn
	tb.each(slotConn, func(s *slot) { seen = append(seen, s.conn()) })
	if len(seen) != 3 || seen[0] != &conns[0] || seen[1] != &conns[2] || seen[2] != &conns[3] {
		t.Fatalf("each visited %v", seen)
	}
}
