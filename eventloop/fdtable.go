package eventloop

import "unsafe"

// slotKind says what an fd registered in a loop's epoll set is.
type slotKind uint8

const (
	slotFree slotKind = iota
	slotConn
	slotListener
	slotTimerfd
	slotTasks
	slotWatch // an FDWatch
)

// slot is the loop's record of one fd. Every registration gets a fresh
// generation that also travels in the epoll event's data, so an event queued
// for an fd that was closed and reused later in the same epoll batch carries
// the old generation and is dropped instead of reaching the new connection.
//
// The table has a slot for every fd up to the highest, so a slot is 16 bytes: the
// one object it points to is typed by kind.
type slot struct {
	gen  uint32
	kind slotKind
	p    unsafe.Pointer // *conn, *Listener or *FDWatch, as kind says
}

func (s *slot) conn() *conn     { return (*conn)(s.p) }
func (s *slot) ln() *Listener   { return (*Listener)(s.p) }
func (s *slot) watch() *FDWatch { return (*FDWatch)(s.p) }

// fdTable maps fds to slots; fds are small and dense, so a slice indexed by fd.
type fdTable struct {
	slots   []slot
	lastGen uint32
}

// register records fd as kind, pointing to p (a *conn, *Listener or *FDWatch).
func (t *fdTable) register(fd int, kind slotKind, p unsafe.Pointer) uint32 {
	if fd >= len(t.slots) {
		t.slots = append(t.slots, make([]slot, fd+1-len(t.slots)+64)...)
	}
	t.lastGen++
	if t.lastGen == 0 {
		t.lastGen = 1
	}
	t.slots[fd] = slot{gen: t.lastGen, kind: kind, p: p}
	return t.lastGen
}

func (t *fdTable) unregister(fd int) {
	if fd < len(t.slots) {
		t.slots[fd] = slot{}
	}
}

// lookup returns the slot an event for (fd, gen) belongs to, or nil if stale.
func (t *fdTable) lookup(fd int, gen uint32) *slot {
	if fd < 0 || fd >= len(t.slots) {
		return nil
	}
	s := &t.slots[fd]
	if s.kind == slotFree || s.gen != gen {
		return nil
	}
	return s
}
