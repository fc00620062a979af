package tls

import (
	"crypto/rand"
	"crypto/sha256"
	stdtls "crypto/tls"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/conf"
)

// sessionCache keeps sessions on the server for clients to resume by an
// identifier: nginx's ssl_session_cache. crypto/tls resumes only from tickets,
// so the cache's identifiers travel as tickets (stateful tickets, as OpenSSL's
// with tickets off); TLS 1.2 resumption by session ID is not implemented by
// crypto/tls. A shared cache serves every loop of the process (a mutex held
// for a map operation, never across I/O); a builtin one belongs to one loop.
// Entries go first in, first out, past the size or their timeout.
type sessionCache struct {
	mu      sync.Mutex
	size    int
	used    int
	entries map[[32]byte]cacheEntry
	order   [][32]byte // insertion order; may name entries already gone
	head    int
}

type cacheEntry struct {
	state   []byte
	expires time.Time
}

// entryOverhead is what an entry costs beyond its state in the size.
const entryOverhead = 96

func newSessionCache(size int) *sessionCache {
	return &sessionCache{size: size, entries: map[[32]byte]cacheEntry{}}
}

// put stores a session's state under id.
func (c *sessionCache) put(id [32]byte, state []byte, expires time.Time) {
	cost := len(state) + entryOverhead
	if cost > c.size {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.used+cost > c.size && c.head < len(c.order) {
		c.evictOldest()
	}
	c.entries[id] = cacheEntry{state: state, expires: expires}
	c.order = append(c.order, id)
	c.used += cost
	if c.head > 1024 && c.head*2 > len(c.order) {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

func (c *sessionCache) evictOldest() {
	id := c.order[c.head]
	c.head++
	if e, ok := c.entries[id]; ok {
		c.used -= len(e.state) + entryOverhead
		delete(c.entries, id)
	}
}

// get returns the state stored under id, nil when unknown or expired.
func (c *sessionCache) get(id []byte, now time.Time) []byte {
	if len(id) != 32 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[[32]byte(id)]
	if !ok {
		return nil
	}
	if now.After(e.expires) {
		c.used -= len(e.state) + entryOverhead
		delete(c.entries, [32]byte(id))
		return nil
	}
	return e.state
}

// len is the number of sessions held.
func (c *sessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// sharedCaches are the process's shared caches by name. As nginx's zones they
// outlive a reload that keeps their name and size.
var (
	sharedMu     sync.Mutex
	sharedCaches = map[string]*sessionCache{}
)

// sharedCache returns the shared cache name, made or kept with size.
func sharedCache(name string, size int) *sessionCache {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if c := sharedCaches[name]; c != nil && c.size == size {
		return c
	}
	c := newSessionCache(size)
	sharedCaches[name] = c
	return c
}

// cacheMode is ssl_session_cache's kind.
type cacheMode uint8

const (
	cacheNone cacheMode = iota // nginx's default: no cache
	cacheOff
	cacheOn // builtin and/or shared
)

// sessionCacheConf is ssl_session_cache's value.
type sessionCacheConf struct {
	mode        cacheMode
	sharedName  string
	sharedSize  int
	hasShared   bool
	builtinSize int
}

// builtinEntrySize turns builtin's size in sessions (OpenSSL's unit) into bytes.
const builtinEntrySize = 1024

func setSessionCache(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	if sc.set&bitCache != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	var v sessionCacheConf
	v.mode = cacheOn
	for _, a := range s.Args {
		switch {
		case a.Value == "off" && len(s.Args) == 1:
			v.mode = cacheOff
		case a.Value == "none" && len(s.Args) == 1:
			v.mode = cacheNone
		case a.Value == "builtin":
			v.builtinSize = 20480 * builtinEntrySize // OpenSSL's default, 20480 sessions
		case len(a.Value) > 8 && a.Value[:8] == "builtin:":
			n, err := conf.ParseNumber(a.Value[8:])
			if err != nil || n <= 0 {
				return s.InvalidValue(a, "")
			}
			v.builtinSize = n * builtinEntrySize
		case len(a.Value) > 7 && a.Value[:7] == "shared:":
			rest := a.Value[7:]
			i := len(rest) - 1
			for i >= 0 && rest[i] != ':' {
				i--
			}
			if i <= 0 {
				return s.InvalidValue(a, "")
			}
			size, err := conf.ParseSize(rest[i+1:])
			if err != nil {
				return s.InvalidValue(a, "")
			}
			if size < 8*4096 { // nginx: "session cache is too small"
				return s.Errorf("session cache \"%s\" is too small", a.Value)
			}
			v.hasShared, v.sharedName, v.sharedSize = true, rest[:i], int(size)
		default:
			return s.InvalidValue(a, "")
		}
	}
	sc.cache = v
	sc.set |= bitCache
	return nil
}

// ticketKey reads an ssl_session_ticket_key file: nginx's 48 or 80 bytes. The
// key crypto/tls gets is derived from them (crypto/tls's tickets are not
// OpenSSL's, so the same file gives the same keys to every numaproxy, not to
// nginx).
func ticketKey(f fileRef) ([32]byte, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return [32]byte{}, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("cannot read session ticket key \"%s\": %v", f.path, err), Err: err}
	}
	if len(data) != 48 && len(data) != 80 {
		return [32]byte{}, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("\"%s\" must be 48 or 80 bytes", f.path)}
	}
	h := sha256.New()
	h.Write([]byte("numaproxy session ticket key\x00"))
	h.Write(data)
	return [32]byte(h.Sum(nil)), nil
}

// Ticket keys of servers without ssl_session_ticket_key: made by numaproxy,
// the same for every loop and kept across reloads. The first key encrypts; a
// new one takes its place every ticketRotation (checked by the handshakes that
// issue or open tickets), the ones before it still decrypt, ticketKeysKept in
// all. Reading them is an atomic load; the mutex only orders rotations.
const (
	ticketRotation = 12 * time.Hour
	ticketKeysKept = 3
)

type ticketRing struct {
	keys [][32]byte
	made time.Time
}

var (
	autoRing   atomic.Pointer[ticketRing]
	autoRingMu sync.Mutex
)

// currentTicketRing is the ring, rotated first when its key is too old.
func currentTicketRing(now time.Time) *ticketRing {
	if r := autoRing.Load(); r != nil && now.Sub(r.made) < ticketRotation {
		return r
	}
	autoRingMu.Lock()
	defer autoRingMu.Unlock()
	r := autoRing.Load()
	if r != nil && now.Sub(r.made) < ticketRotation {
		return r
	}
	var k [32]byte
	rand.Read(k[:])
	keys := [][32]byte{k}
	if r != nil {
		keys = append(keys, r.keys[:min(len(r.keys), ticketKeysKept-1)]...)
	}
	nr := &ticketRing{keys: keys, made: now}
	autoRing.Store(nr)
	return nr
}

// ticketConfig is this loop's crypto/tls configuration holding the current
// ring, for EncryptTicket and DecryptTicket (one per loop: crypto/tls takes a
// read lock on it per use).
func (l *Layer) ticketConfig(now time.Time) *stdtls.Config {
	r := currentTicketRing(now)
	if r != l.ringSeen {
		cfg := &stdtls.Config{}
		cfg.SetSessionTicketKeys(r.keys)
		l.ringCfg, l.ringSeen = cfg, r
	}
	return l.ringCfg
}
