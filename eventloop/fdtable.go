package eventloop

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
type slot struct {
	gen   uint32
	kind  slotKind
	conn  *conn
	ln    *Listener
	watch *FDWatch
}

// fdTable maps fds to slots; fds are small and dense, so a slice indexed by fd.
type fdTable struct {
	slots   []slot
	lastGen uint32
}

func (t *fdTable) register(fd int, kind slotKind, c *conn, ln *Listener) uint32 {
	if fd >= len(t.slots) {
		t.slots = append(t.slots, make([]slot, fd+1-len(t.slots)+64)...)
	}
	t.lastGen++
	if t.lastGen == 0 {
		t.lastGen = 1
	}
	t.slots[fd] = slot{gen: t.lastGen, kind: kind, conn: c, ln: ln}
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
