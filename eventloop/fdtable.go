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
// The table has a slot for every fd up to the highest (in chunks), so a slot is
// 16 bytes: the one object it points to is typed by kind.
type slot struct {
	gen  uint32
	kind slotKind
	p    unsafe.Pointer // *conn, *Listener or *FDWatch, as kind says
}

func (s *slot) conn() *conn     { return (*conn)(s.p) }
func (s *slot) ln() *Listener   { return (*Listener)(s.p) }
func (s *slot) watch() *FDWatch { return (*FDWatch)(s.p) }

// fdTable maps fds to slots. fds are small and dense, so the slots are indexed
// by fd, in chunks of slotChunk that are never moved: a table grown by append
// copied every slot at each growth (by a quarter, past 256) and left the old
// arrays to the garbage collector, some 5 times the final size of garbage while
// 10,000 connections opened.
type fdTable struct {
	chunks  []*[slotChunk]slot
	lastGen uint32
}

// slotChunk is the slots allocated at a time: 4 KiB.
const slotChunk = 256

// register records fd as kind, pointing to p (a *conn, *Listener or *FDWatch).
func (t *fdTable) register(fd int, kind slotKind, p unsafe.Pointer) uint32 {
	i := fd / slotChunk
	if i >= len(t.chunks) {
		t.chunks = append(t.chunks, make([]*[slotChunk]slot, i+1-len(t.chunks))...)
	}
	if t.chunks[i] == nil {
		t.chunks[i] = new([slotChunk]slot)
	}
	t.lastGen++
	if t.lastGen == 0 {
		t.lastGen = 1
	}
	t.chunks[i][fd%slotChunk] = slot{gen: t.lastGen, kind: kind, p: p}
	return t.lastGen
}

func (t *fdTable) unregister(fd int) {
	if ch := t.chunk(fd); ch != nil {
		ch[fd%slotChunk] = slot{}
	}
}

// chunk is the chunk that holds fd's slot, nil if none does.
func (t *fdTable) chunk(fd int) *[slotChunk]slot {
	if i := uint(fd) / slotChunk; i < uint(len(t.chunks)) {
		return t.chunks[i]
	}
	return nil
}

// lookup returns the slot an event for (fd, gen) belongs to, or nil if stale.
func (t *fdTable) lookup(fd int, gen uint32) *slot {
	ch := t.chunk(fd)
	if ch == nil {
		return nil
	}
	s := &ch[uint(fd)%slotChunk]
	if s.kind == slotFree || s.gen != gen {
		return nil
	}
	return s
}

// conn is the connection registered for fd, which must be one.
// (fd taken unsigned: a signed division by the chunk size takes more instructions.)
func (t *fdTable) conn(fd int) *conn {
	u := uint(fd)
	return t.chunks[u/slotChunk][u%slotChunk].conn()
}

// each calls fn for every slot of kind, in fd order; fn may unregister fds.
func (t *fdTable) each(kind slotKind, fn func(*slot)) {
	for _, ch := range t.chunks {
		if ch == nil {
			continue
		}
		for i := range ch {
			if s := &ch[i]; s.kind == kind {
				fn(s)
			}
		}
	}
}
