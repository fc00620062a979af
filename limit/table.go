package limit

import (
	"bytes"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// The table holds a zone's per-key states for every loop of the process. Finding a
// key and updating its state take no lock: a lookup walks a bucket's chain, pins the
// entry (an atomic add to its pin count, which also keeps it from being evicted,
// nginx's node->count), compares the key and works on the entry's state word with
// CAS. Only
// a key that is not in the table takes its shard's mutex, to insert it, evicting an
// old one when the zone's bytes are used up. So two loops share a cache line only
// when they touch the same key (or insert into the same shard, or account a new
// key in the zone's byte count), and a loop never waits for another on a known key.

// inlineKey is how many key bytes an entry holds in place: $binary_remote_addr (4
// or 16) and a text IPv4 address fit; longer keys live in shard.long.
const inlineKey = 24

// entry is one key's state. It holds no Go pointer, so a table could be placed in
// memory of a chosen NUMA node. 64 bytes: one cache line.
type entry struct {
	hash atomic.Uint64
	word atomic.Uint64 // the module's state: limit_req's excess and last, limit_conn's count
	pins atomic.Int32  // 1 + the holders while alive; 0 (never used) or freed (<0) when free
	next atomic.Int32  // the next entry of the bucket's chain, index+1 (0: end)
	ref  atomic.Uint32 // CLOCK's reference count: 1 new, 2 used again; the hand takes 1
	klen uint32        // written only while free, read only while pinned or under mu
	key  [inlineKey]byte
	life uint32 // under mu: never used, alive or freed
	_    [4]byte
}

const (
	neverUsed = iota
	alive
	freed
)

// freedPins is a freed entry's pin count. A reader pins with one atomic add and
// gives it back when the result says the entry is free; the insert that brings
// the entry back to life adds to the count rather than setting it, so such a
// reader's add and give-back cancel out whenever they land.
const freedPins = -1 << 30

// shard is one part of a table. ents holds the home entries, one per bucket (the
// first key of a bucket is found at once, one cache miss), then the overflow
// entries that chain off a home for the other keys of its bucket. Fields after mu
// are written under mu only (the entries' atomics are also read without it).
type shard struct {
	mu     sync.Mutex
	ents   []entry
	mask   uint64   // homes - 1
	long   [][]byte // keys longer than inlineKey, by entry index (made on the first)
	freeOv int32    // freed overflow entries chained through next, index+1
	fresh  int32    // overflow entries from here on were never used
	hand   int32    // CLOCK hand
	live   int
	_      [64]byte // keeps two shards' mutexes off one cache line
}

// policy is what a table asks its module on the insert path.
type policy interface {
	// cost is the bytes nginx's slab allocator gives a node with this key length.
	cost(keyLen int) int
	// expired says whether an unpinned entry may go on its own (nginx's expire
	// with n == 1); limit_conn's never do.
	expired(word uint64, now int64) bool
}

type table struct {
	seed   maphash.Seed
	shards []shard
	shift  uint // hash >> shift picks the shard
	pol    policy
	budget int64
	_      [64]byte
	used   atomic.Int64 // bytes taken at nginx's slab sizes; touched on insert and evict only
	_      [56]byte
}

const (
	// usedAgain is an entry's reference count once a key is looked up again: it
	// then outlives two passes of the CLOCK hand, a key seen once one or two.
	// Under a flood of new keys the hand goes round once per 2/3 of a shard's
	// keys, so a key used again at least once per zone's worth of new keys stays,
	// as with nginx's LRU (TestActiveKeySurvivesFlood).
	usedAgain = 2

	maxShards = 64
	// victimSteps bounds the CLOCK hand's walk for one eviction.
	victimSteps = 256
)

// newTable makes a table for budget bytes (the zone's size less nginx's own
// overhead): up to 64 shards of at least 32 of the smallest entries. Each shard
// has homes for 1.5 to 3 times its share of keys and overflow entries for one
// share, so that the zone's byte count, not a shard's luck of the hash, bounds
// it. Memory is touched as entries are first used.
func newTable(budget int, pol policy) *table {
	minCost := pol.cost(0)
	n := 1
	for n < maxShards && budget/(n*2) >= 32*minCost {
		n *= 2
	}
	t := &table{seed: maphash.MakeSeed(), shards: make([]shard, n), shift: 64, pol: pol, budget: int64(budget)}
	if n > 1 {
		t.shift = uint(64 - bits.Len(uint(n-1)))
	}
	share := max(budget/minCost/n, 1)
	homes := 1 << bits.Len(uint(share+share/2-1))
	all := mapEntries(&t.shards[0], n*(homes+share))
	for i := range t.shards {
		s := &t.shards[i]
		s.ents = all[i*(homes+share) : (i+1)*(homes+share) : (i+1)*(homes+share)]
		s.mask = uint64(homes - 1)
		s.fresh = int32(homes)
	}
	return t
}

func (t *table) hash(key []byte) uint64 { return maphash.Bytes(t.seed, key) }

func (t *table) shard(h uint64) *shard {
	if t.shift == 64 {
		return &t.shards[0]
	}
	return &t.shards[h>>t.shift]
}

// len counts the keys held (for tests and status pages; it locks every shard).
func (t *table) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.live
		s.mu.Unlock()
	}
	return n
}

// pin takes a hold on e unless it is free: one atomic add, which on a key used
// by several loops moves the entry's line here once for the whole request.
func pin(e *entry) bool {
	if e.pins.Add(1) >= 2 {
		return true
	}
	e.pins.Add(-1)
	return false
}

func (s *shard) unpin(i int32) { s.ents[i].pins.Add(-1) }

// keyOf is entry i's key; it must be pinned (or s.mu held).
func (s *shard) keyOf(i int32) []byte {
	e := &s.ents[i]
	if e.klen <= inlineKey {
		return e.key[:e.klen]
	}
	return s.long[i][:e.klen]
}

// lookup finds key without the lock and returns its entry pinned, or -1. A miss
// may be wrong while a chain is being changed; the caller then inserts, which
// looks again under the lock.
func (s *shard) lookup(h uint64, key []byte) int32 {
	i := int32(h&s.mask) + 1
	for steps := 0; i != 0 && steps < 64; steps++ {
		e := &s.ents[i-1]
		if e.hash.Load() == h && pin(e) {
			// Pinned, the entry cannot be reused: its hash and key are stable.
			if e.hash.Load() == h && bytes.Equal(s.keyOf(i-1), key) {
				if e.ref.Load() != usedAgain {
					e.ref.Store(usedAgain)
				}
				return i - 1
			}
			s.unpin(i - 1)
		}
		i = e.next.Load()
	}
	return -1
}

// insert returns key's entry in shard s pinned, creating it with state word init
// when it is not there (created is then true). ok is false when no entry could be
// freed for it (nginx: the slab allocation failed even after freeing the oldest).
func (t *table) insert(s *shard, h uint64, key []byte, init uint64, now int64) (i int32, created, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	home := int32(h & s.mask)
	// Under the lock no entry of s can be freed, and the chains are consistent.
	for j := home + 1; j != 0; j = s.ents[j-1].next.Load() {
		if e := &s.ents[j-1]; e.life == alive && e.hash.Load() == h && bytes.Equal(s.keyOf(j-1), key) {
			e.pins.Add(1)
			e.ref.Store(usedAgain)
			return j - 1, false, true
		}
	}
	s.expire(t, now)
	cost := int64(t.pol.cost(len(key)))
	for tries := 0; ; tries++ {
		if tries == victimSteps {
			return -1, false, false
		}
		if s.ents[home].life == alive && s.freeOv == 0 && int(s.fresh) == len(s.ents) {
			if v := s.victim(); v >= 0 {
				s.remove(t, v) // with luck this bucket's home or an overflow entry
				continue
			}
			return -1, false, false
		}
		if t.used.Add(cost) <= t.budget {
			break
		}
		t.used.Add(-cost)
		// nginx's expire(ctx, 0): the oldest by force, then up to two expired.
		if v := s.victim(); v >= 0 {
			s.remove(t, v)
			s.expire(t, now)
		} else if !t.evictElsewhere(s) {
			return -1, false, false
		}
	}
	i = home
	if s.ents[home].life == alive {
		if s.freeOv != 0 {
			i = s.freeOv - 1
			s.freeOv = s.ents[i].next.Load()
		} else {
			i = s.fresh
			s.fresh++
		}
	}
	e := &s.ents[i]
	if len(key) <= inlineKey {
		copy(e.key[:], key)
	} else {
		if s.long == nil {
			s.long = make([][]byte, len(s.ents))
		}
		if cap(s.long[i]) < len(key) {
			s.long[i] = make([]byte, len(key)) // only for keys over inlineKey bytes
		}
		copy(s.long[i][:len(key)], key)
	}
	e.klen = uint32(len(key))
	e.hash.Store(h)
	e.word.Store(init)
	e.ref.Store(1)
	if i != home {
		e.next.Store(s.ents[home].next.Load())
	} // a home keeps its chain
	// Alive and pinned for the caller; this publishes the fields above.
	if e.life == neverUsed {
		e.pins.Add(2)
	} else {
		e.pins.Add(2 - freedPins)
	}
	e.life = alive
	if i != home {
		s.ents[home].next.Store(i + 1)
	}
	s.live++
	return i, true, true
}

// evictElsewhere frees an entry of another shard for s's new key when s has none
// to give; shards busy inserting are passed over (s.mu is held: waiting for
// another shard's lock could deadlock).
func (t *table) evictElsewhere(s *shard) bool {
	start := s.hand // any rotating start will do
	for k := range len(t.shards) {
		o := &t.shards[(int(start)+k)%len(t.shards)]
		if o == s || !o.mu.TryLock() {
			continue
		}
		v := o.victim()
		if v >= 0 {
			o.remove(t, v)
		}
		o.mu.Unlock()
		if v >= 0 {
			return true
		}
	}
	return false
}

// victim runs the CLOCK hand to an unpinned entry whose reference count is 0,
// taking one from the count of each entry it passes, and claims it (pins: 1 ->
// freed). After victimSteps it takes the first unpinned entry it passed; -1 when every
// entry it passed is held.
func (s *shard) victim() int32 {
	n := int32(len(s.ents))
	cand := int32(-1)
	for steps := min(n, victimSteps); steps > 0; steps-- {
		i := s.hand
		s.hand++
		if s.hand == n {
			s.hand = 0
		}
		e := &s.ents[i]
		if e.pins.Load() != 1 {
			continue // held, or free
		}
		if r := e.ref.Load(); r != 0 {
			e.ref.Store(r - 1)
			if cand < 0 {
				cand = i
			}
			continue
		}
		if e.pins.CompareAndSwap(1, freedPins) {
			return i
		}
	}
	if cand >= 0 && s.ents[cand].pins.CompareAndSwap(1, freedPins) {
		return cand
	}
	return -1
}

// expire is nginx's ngx_http_limit_req_expire(ctx, 1) on a CLOCK: of the old
// entries (reference count 0) at the hand, up to two that the policy says are
// expired go; it stops at the first old entry that is held or not expired, as
// nginx stops at the tail of its LRU queue.
func (s *shard) expire(t *table, now int64) {
	if _, ok := t.pol.(connPolicy); ok {
		return // limit_conn has no expiry: a count at 0 is a free slot already
	}
	n := int32(len(s.ents))
	removed := 0
	for steps := 0; steps < 8 && removed < 2; steps++ {
		i := s.hand
		e := &s.ents[i]
		switch {
		case e.life != alive:
		case e.ref.Load() != 0:
			e.ref.Add(^uint32(0))
		case !t.pol.expired(e.word.Load(), now) || !e.pins.CompareAndSwap(1, freedPins):
			return
		default:
			s.remove(t, i)
			removed++
		}
		s.hand++
		if s.hand == n {
			s.hand = 0
		}
	}
}

// remove frees a claimed entry (pins freed): a home stays in place with its
// chain, an overflow entry is unlinked and put on the free list.
func (s *shard) remove(t *table, i int32) {
	e := &s.ents[i]
	e.life = freed
	t.used.Add(-int64(t.pol.cost(int(e.klen))))
	s.live--
	if uint64(i) <= s.mask {
		return
	}
	next := e.next.Load()
	for j := int32(e.hash.Load()&s.mask) + 1; j != 0; j = s.ents[j-1].next.Load() {
		if s.ents[j-1].next.Load() == i+1 {
			s.ents[j-1].next.Store(next)
			break
		}
	}
	// A reader standing on e now follows the free list and misses; a miss is
	// looked up again under the lock.
	e.next.Store(s.freeOv)
	s.freeOv = i + 1
}
