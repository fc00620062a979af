package proxy

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/cache"
	"github.com/numaproxy/numaproxy/eventloop"
)

// hitFiles keeps, per loop, the descriptors of the cache files its hits opened, so
// that a hit of an entry served before costs one pread of its head instead of
// open, pread, fstat and close (nginx opens each time; its open_file_cache does not
// cover the proxy cache). strace -c -f over 20000 keep-alive hits of a 100-byte
// entry: read, pread64, writev per hit here; recvfrom, openat, newfstatat, two
// pread64, writev and close for nginx 1.22. A descriptor serves the file of the generation the zone
// gave when it was opened: a file stored anew or revalidated has another, and the
// descriptor is replaced. One slot per hash of the key (a collision replaces the
// older); a sweep every hitFileIdle closes the descriptors not used for as long,
// so that the file of an entry the manager removed, or one unlinked from outside,
// is released (its space with it) within twice that.
type hitFiles struct {
	slots [hitSlots]hitFile
	open  int
	timer eventloop.Timer
	init  bool
}

type hitFile struct {
	zone *cache.Zone // nil: empty
	key  cache.Key
	gen  uint64
	fd   int
	used int64 // unix nanoseconds
}

const (
	hitSlots    = 256
	hitFileIdle = 5 * time.Second
)

func (h *hitFiles) slot(k cache.Key) *hitFile { return &h.slots[int(k[1])%hitSlots] }

// get is the descriptor kept for the file of generation gen of k, -1 when none.
func (h *hitFiles) get(z *cache.Zone, k cache.Key, gen uint64, now int64) int {
	s := h.slot(k)
	if s.zone != z || s.key != k || s.gen != gen {
		return -1
	}
	s.used = now
	return s.fd
}

// put keeps fd, the file of generation gen of k, closing what the slot held.
func (h *hitFiles) put(l *eventloop.Loop, z *cache.Zone, k cache.Key, gen uint64, fd int, now int64) {
	s := h.slot(k)
	if s.zone != nil {
		unix.Close(s.fd)
		h.open--
	}
	*s = hitFile{zone: z, key: k, gen: gen, fd: fd, used: now}
	h.open++
	if !h.init {
		l.InitTimer(&h.timer, h.sweep)
		h.init = true
	}
	if !h.timer.Pending() {
		h.timer.Reset(hitFileIdle)
	}
}

// keeps reports whether fd is the descriptor kept for the file of generation
// gen of k (without counting it as a use).
func (h *hitFiles) keeps(z *cache.Zone, k cache.Key, gen uint64, fd int) bool {
	s := h.slot(k)
	return s.zone == z && s.key == k && s.gen == gen && s.fd == fd
}

// drop closes the descriptor kept for k (its file did not read back).
func (h *hitFiles) drop(z *cache.Zone, k cache.Key) {
	if s := h.slot(k); s.zone == z && s.key == k {
		unix.Close(s.fd)
		*s = hitFile{}
		h.open--
	}
}

// sweep closes the descriptors not used for hitFileIdle.
func (h *hitFiles) sweep(*eventloop.Timer) {
	now := time.Now().UnixNano()
	for i := range h.slots {
		if s := &h.slots[i]; s.zone != nil && now-s.used >= int64(hitFileIdle) {
			unix.Close(s.fd)
			*s = hitFile{}
			h.open--
		}
	}
	if h.open > 0 {
		h.timer.Reset(hitFileIdle)
	}
}
