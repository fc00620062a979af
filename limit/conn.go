package limit

import (
	"log/slog"
)

// ConnStatus is $limit_conn_status.
type ConnStatus uint8

const (
	ConnNone           ConnStatus = iota // no limit applied: the variable is not found
	ConnPassed                           // PASSED
	ConnRejected                         // REJECTED
	ConnRejectedDryRun                   // REJECTED_DRY_RUN
)

var connStatusNames = [...]string{"", "PASSED", "REJECTED", "REJECTED_DRY_RUN"}

// String is the variable's value ("" for ConnNone).
func (s ConnStatus) String() string { return connStatusNames[s] }

// MaxConnKey is the longest key limit_conn counts; nginx skips a longer one and
// logs `the value of the "KEY" key is more than 255 bytes: "VALUE"` at error.
const MaxConnKey = 255

const (
	connNodeSize = 4  // offsetof(ngx_http_limit_conn_node_t, data)
	connHeadSize = 64 // sizeof(ngx_http_limit_conn_shctx_t)
)

// ConnZone is one limit_conn_zone: a counter per key shared by every loop. A
// counter that drops to 0 stays as a free slot for the next key (nginx frees the
// node), so the zone is full only when every counter in a shard is held.
type ConnZone struct {
	Name string
	Key  string
	Size int64
	t    *table
}

// NewConnZone makes the zone for cfg, keeping prev's counters (the same zone of
// the previous configuration) when the size is the same: requests still held
// across a reload keep counting, as in nginx.
func NewConnZone(cfg ConnZoneConfig, prev *ConnZone) (*ConnZone, error) {
	z := &ConnZone{Name: cfg.Name, Key: cfg.Key, Size: cfg.Size}
	if prev != nil {
		if prev.Key != cfg.Key {
			return nil, errorf("limit_conn_zone %q uses the %q key while previously it used the %q key", cfg.Name, cfg.Key, prev.Key)
		}
		if prev.Size == cfg.Size {
			z.t = prev.t
			return z, nil
		}
	}
	z.t = newTable(zoneBudget(cfg.Size, connHeadSize), connPolicy{})
	return z, nil
}

// Len is how many keys the zone holds, counters at 0 included (it takes every
// shard's lock: not for a loop).
func (z *ConnZone) Len() int { return z.t.len() }

type connPolicy struct{}

func (connPolicy) cost(keyLen int) int        { return slabCost(rbtreeNode + connNodeSize + keyLen) }
func (connPolicy) expired(uint64, int64) bool { return false }

// ConnLimit is one limit_conn directive at a level.
type ConnLimit struct {
	Zone *ConnZone
	Conn uint64
}

// ConnConf is the merged limit_conn configuration of a location.
type ConnConf struct {
	Limits   []ConnLimit
	Status   int        // limit_conn_status, default 503
	LogLevel slog.Level // limit_conn_log_level, default error
	DryRun   bool
}

// ConnDecision is what the preaccess phase does with a request.
type ConnDecision struct {
	Status ConnStatus
	Code   int       // when not 0, finalize the request with this status
	Zone   *ConnZone // the zone that rejected, for the log line
	Full   bool      // the zone had no room for a new key
}

// ConnHold is what a request holds in limit_conn zones until it ends (nginx's pool
// cleanup handlers). Reuse one per connection or request object: after the first
// request it does not allocate.
type ConnHold struct{ refs []connRef }

type connRef struct {
	s *shard
	i int32
}

// Acquire counts the request in each of the location's limits as nginx's
// ngx_http_limit_conn_handler: keys[i] is limit i's key (empty: not counted). A
// limit at its number rejects the request and what it took in the limits before is
// given back (also in a dry run, where the request goes on uncounted). Call it once
// per request (nginx: once per main request) and h.Release when the request is
// freed.
func (c *ConnConf) Acquire(keys [][]byte, h *ConnHold) ConnDecision {
	var st ConnStatus
	for i := range c.Limits {
		key := keys[i]
		if len(key) == 0 || len(key) > MaxConnKey {
			continue
		}
		st = ConnPassed
		l := &c.Limits[i]
		if ok, full := l.Zone.acquire(key, l.Conn, h); !ok {
			h.Release()
			d := ConnDecision{Status: ConnRejected, Code: c.Status, Zone: l.Zone, Full: full}
			if c.DryRun {
				d.Status, d.Code = ConnRejectedDryRun, 0
			}
			return d
		}
	}
	return ConnDecision{Status: st}
}

func (z *ConnZone) acquire(key []byte, limit uint64, h *ConnHold) (ok, full bool) {
	hash := z.t.hash(key)
	s := z.t.shard(hash)
	i := s.lookup(hash, key)
	if i < 0 {
		var created bool
		i, created, ok = z.t.insert(s, hash, key, 1, 0)
		if !ok {
			return false, true
		}
		if created {
			h.refs = append(h.refs, connRef{s, i})
			return true, false
		}
	}
	e := &s.ents[i]
	for {
		n := e.word.Load()
		if n >= limit {
			s.unpin(i)
			return false, false
		}
		if e.word.CompareAndSwap(n, n+1) {
			h.refs = append(h.refs, connRef{s, i})
			return true, false
		}
	}
}

// Release gives back every count the request holds (nginx's cleanup when the
// request's pool is freed). It may be called again: the second time does nothing.
func (h *ConnHold) Release() {
	for _, r := range h.refs {
		r.s.ents[r.i].word.Add(^uint64(0))
		r.s.unpin(r.i)
	}
	h.refs = h.refs[:0]
}

// Held says how many counts h holds.
func (h *ConnHold) Held() int { return len(h.refs) }

// AppendLog appends the error log line nginx writes for a rejection (at
// c.LogLevel; a full zone is logged at crit, as nginx's slab allocator does).
func (d *ConnDecision) AppendLog(b []byte) []byte {
	if d.Status != ConnRejected && d.Status != ConnRejectedDryRun {
		return b
	}
	if d.Full {
		return append(append(append(b, `ngx_slab_alloc() failed: no memory in limit_conn_zone "`...), d.Zone.Name...), '"')
	}
	b = append(b, "limiting connections"...)
	if d.Status == ConnRejectedDryRun {
		b = append(b, ", dry run,"...)
	}
	return append(append(append(b, ` by zone "`...), d.Zone.Name...), '"')
}
