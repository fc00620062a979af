package cache

import (
	"container/list"
	"crypto/md5"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
)

// Key is the MD5 of a cache key, the entry's file name.
type Key [md5.Size]byte

// KeyOf hashes a cache key.
func KeyOf(k []byte) Key { return md5.Sum(k) }

// shards splits the keys zone so that loops on different CPUs rarely take the same
// lock; each shard's mutex is held only for map and list updates, never across I/O.
const shards = 64

// entryCost is what one key costs the keys zone, as nginx counts (about 8000 keys
// per megabyte).
const entryCost = 128

// Zone is a keys zone (proxy_cache_path's keys_zone) and its directory: the index of
// the entries on disk, shared by every loop of the process (see doc.go).
type Zone struct {
	Config
	shard      [shards]shard
	maxEntries int          // per shard
	size       atomic.Int64 // bytes of the entries' files
	loaded     atomic.Bool  // the loader is done
	tmpSerial  atomic.Uint64
	gens       atomic.Uint64 // the last generation given to an entry's file

	params atomic.Pointer[Config] // the manager's and loader's limits (a reload's)

	delMu   sync.Mutex
	deletes []Key // evicted entries whose files the manager unlinks
	stop    chan struct{}
}

type shard struct {
	mu  sync.Mutex
	m   map[Key]*list.Element
	lru list.List // front: most recently used; values are *node
}

// node is one key's state.
type node struct {
	key           Key
	uses          int
	exists        bool   // a complete file is on disk
	validSec      int64  // fresh until (unix seconds)
	size          int64  // the file's bytes
	updating      bool   // a request fetches it
	updatingSince int64  // unix nanoseconds
	lastAccess    int64  // unix nanoseconds
	vary          []byte // the Vary of the key's responses: its entries are variants
	gen           uint64 // the file's generation: a new one for each file stored, or header rewritten
	updatingSec   int64  // stale-while-revalidate's seconds past validSec
	errorSec      int64  // stale-if-error's
}

// State is a copy of an entry's state, taken under its shard's lock.
type State struct {
	Uses          int
	Exists        bool
	ValidSec      int64
	Updating      bool
	UpdatingSince int64
	// Vary is the Vary the key's responses came with: the entries are stored under
	// variant keys (VariantOf). Valid until the next call on the zone's key.
	Vary []byte
	// Gen names the file the zone knows for the key (with Exists): a descriptor
	// opened for the same Gen reads that file (a file stored anew, or revalidated,
	// has another).
	Gen uint64
	// The seconds past ValidSec the expired entry may stand in while it is fetched
	// anew (stale-while-revalidate), and for an upstream's error (stale-if-error).
	UpdatingSec, ErrorSec int64
}

func newZone(c Config) *Zone {
	z := &Zone{Config: c, stop: make(chan struct{})}
	z.maxEntries = max(int(c.KeysSize/entryCost/shards), 1)
	z.setParams(c)
	for i := range z.shard {
		z.shard[i].m = map[Key]*list.Element{}
	}
	return z
}

func (z *Zone) shardOf(k Key) *shard { return &z.shard[k[0]%shards] }

// Acquire counts a use of k at now (unix nanoseconds), creating its node, and
// returns its state.
func (z *Zone) Acquire(k Key, now int64) State {
	s := z.shardOf(k)
	s.mu.Lock()
	n := s.get(k)
	if n == nil {
		n = z.insert(s, k)
	}
	n.uses++
	n.lastAccess = now
	st := State{Uses: n.uses, Exists: n.exists, ValidSec: n.validSec, Updating: n.updating, UpdatingSince: n.updatingSince, Vary: n.vary, Gen: n.gen,
		UpdatingSec: n.updatingSec, ErrorSec: n.errorSec}
	s.mu.Unlock()
	return st
}

// get finds k and marks it recently used; the caller holds s.mu.
func (s *shard) get(k Key) *node {
	e := s.m[k]
	if e == nil {
		return nil
	}
	s.lru.MoveToFront(e)
	return e.Value.(*node)
}

// insert adds k, evicting the least recently used entry nobody fetches when the
// shard is full (its file is left to the manager); the caller holds s.mu.
func (z *Zone) insert(s *shard, k Key) *node {
	if len(s.m) >= z.maxEntries {
		for e := s.lru.Back(); e != nil; e = e.Prev() {
			old := e.Value.(*node)
			if old.updating {
				continue
			}
			z.drop(s, e)
			break
		}
	}
	n := &node{key: k}
	s.m[k] = s.lru.PushFront(n)
	return n
}

// drop removes an entry and queues its file for removal; the caller holds s.mu.
func (z *Zone) drop(s *shard, e *list.Element) {
	n := e.Value.(*node)
	s.lru.Remove(e)
	delete(s.m, n.key)
	if n.exists {
		z.size.Add(-n.size)
		z.delMu.Lock()
		z.deletes = append(z.deletes, n.key)
		z.delMu.Unlock()
	}
}

// Lock makes the caller the one request that fetches k, unless another one does
// and began less than lockAge (nanoseconds) ago.
func (z *Zone) Lock(k Key, now, lockAge int64) bool {
	s := z.shardOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.get(k)
	if n == nil {
		n = z.insert(s, k)
	}
	if n.updating && now-n.updatingSince < lockAge {
		return false
	}
	n.updating, n.updatingSince = true, now
	return true
}

// Unlock ends the caller's fetch of k without a new file.
func (z *Zone) Unlock(k Key) {
	s := z.shardOf(k)
	s.mu.Lock()
	if e := s.m[k]; e != nil {
		e.Value.(*node).updating = false
	}
	s.mu.Unlock()
}

// stored records the file of k, complete on disk, and ends its fetch.
func (z *Zone) stored(k Key, h *fileHeader, size int64, now int64) {
	s := z.shardOf(k)
	s.mu.Lock()
	n := s.get(k)
	if n == nil {
		n = z.insert(s, k)
		n.lastAccess = now
	}
	if n.exists {
		z.size.Add(-n.size)
	}
	size = blocks(size)
	n.exists, n.validSec, n.size, n.updating = true, h.ValidSec, size, false
	n.updatingSec, n.errorSec = h.UpdatingSec, h.ErrorSec
	n.gen = z.gens.Add(1)
	z.size.Add(size)
	s.mu.Unlock()
}

// Remove forgets k (its file could not be read); the file is unlinked by the
// manager.
func (z *Zone) Remove(k Key) {
	s := z.shardOf(k)
	s.mu.Lock()
	if e := s.m[k]; e != nil {
		z.drop(s, e)
	}
	s.mu.Unlock()
}

// Path appends the file name of k: PATH, the levels' directories, the hex MD5.
func (z *Zone) Path(dst []byte, k Key) []byte {
	var h [2 * md5.Size]byte
	hex.Encode(h[:], k[:])
	dst = append(dst, z.Dir...)
	end := len(h)
	for _, l := range z.Levels {
		dst = append(dst, '/')
		dst = append(dst, h[end-l:end]...)
		end -= l
	}
	dst = append(dst, '/')
	return append(dst, h[:]...)
}

// tempName is a fresh name for a file being written, in PATH (so that the rename
// into place stays on one filesystem).
func (z *Zone) tempName(pid int) string {
	return z.Dir + "/" + tempPrefix + strconv.Itoa(pid) + "." + strconv.FormatUint(z.tmpSerial.Add(1), 10)
}

// Size is the bytes of the entries' files the zone knows.
func (z *Zone) Size() int64 { return z.size.Load() }

// Loaded reports the cache loader done.
func (z *Zone) Loaded() bool { return z.loaded.Load() }

// blocks is a file's size in whole 4 KiB blocks, as nginx counts max_size.
func blocks(size int64) int64 { return (size + 4095) &^ 4095 }

// SetVary records that the responses of k vary by the request fields named in
// vary (a response's Vary value).
func (z *Zone) SetVary(k Key, vary []byte) {
	s := z.shardOf(k)
	s.mu.Lock()
	if n := s.get(k); n != nil && string(n.vary) != string(vary) {
		n.vary = append([]byte(nil), vary...)
	}
	s.mu.Unlock()
}

// VariantOf is the key of the variant of k for the request fields' values (as
// values appends them, by name), scratch holding them.
func VariantOf(k Key, vary []byte, scratch []byte, values func(dst []byte, name []byte) []byte) (Key, []byte) {
	b := append(scratch[:0], k[:]...)
	for len(vary) > 0 {
		i := 0
		for i < len(vary) && vary[i] != ',' {
			i++
		}
		name := trimSpace(vary[:i])
		if len(name) > 0 {
			b = append(b, name...)
			b = append(b, ':')
			b = values(b, name)
			b = append(b, '\n')
		}
		if i == len(vary) {
			break
		}
		vary = vary[i+1:]
	}
	return KeyOf(b), b
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
