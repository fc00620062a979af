package limit

import (
	"log/slog"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// ReqStatus is $limit_req_status: what the limit_req limits decided for a request.
type ReqStatus uint8

const (
	ReqNone           ReqStatus = iota // no limit applied (no limit_req, or every key empty): the variable is not found
	ReqPassed                          // PASSED
	ReqDelayed                         // DELAYED
	ReqRejected                        // REJECTED
	ReqDelayedDryRun                   // DELAYED_DRY_RUN
	ReqRejectedDryRun                  // REJECTED_DRY_RUN
)

var reqStatusNames = [...]string{"", "PASSED", "DELAYED", "REJECTED", "DELAYED_DRY_RUN", "REJECTED_DRY_RUN"}

// String is the variable's value ("" for ReqNone).
func (s ReqStatus) String() string { return reqStatusNames[s] }

// MaxReqKey is the longest key limit_req accounts; nginx skips a longer one and
// logs `the value of the "KEY" key is more than 65535 bytes: "VALUE"` at error,
// which the caller does.
const MaxReqKey = 65535

// The state of a key is one 64-bit word: excess in milli-requests (nginx's
// lr->excess) in the top 26 bits, the time of the last accounted request in
// milliseconds (lr->last) in the low 38 bits. Times compare modulo 2^38 ms (8.7
// years), so only a key idle that long is misread. Bursts are limited to 65535 so
// that excess fits.
const (
	lastBits  = 38
	lastMask  = 1<<lastBits - 1
	maxExcess = 1<<(64-lastBits) - 1
	// MaxBurst is the largest burst= (nginx takes any int).
	MaxBurst = 65535
	// never is how far back a new node's "last" lies when it is not accounted at
	// once (nginx sets it to 0, its clock's origin): far enough for any rate to
	// have drained it.
	never = 1 << 32
)

func pack(excess uint64, last int64) uint64 {
	return min(excess, maxExcess)<<lastBits | uint64(last)&lastMask
}

// ReqZone is one limit_req_zone: a key's table shared by every loop of the process.
type ReqZone struct {
	Name string
	Key  string // the key as configured ("$binary_remote_addr"); the caller evaluates it
	Size int64
	rate uint64 // milli-requests per second, as nginx's ctx->rate
	t    *table
}

// NewReqZone makes the zone for cfg. With prev, the same zone of the previous
// configuration, it keeps prev's states when the size is the same (nginx keeps a
// shared zone across a reload unless its size changed); a different key is an
// error, as in nginx.
func NewReqZone(cfg ReqZoneConfig, prev *ReqZone) (*ReqZone, error) {
	z := &ReqZone{Name: cfg.Name, Key: cfg.Key, Size: cfg.Size, rate: cfg.Rate}
	if prev != nil {
		if prev.Key != cfg.Key {
			return nil, errorf("limit_req %q uses the %q key while previously it used the %q key", cfg.Name, cfg.Key, prev.Key)
		}
		if prev.Size == cfg.Size {
			z.t = prev.t
			return z, nil
		}
	}
	z.t = newTable(zoneBudget(cfg.Size, reqHeadSize), reqPolicy{z})
	return z, nil
}

// Len is how many keys the zone holds (it takes every shard's lock: not for a loop).
func (z *ReqZone) Len() int { return z.t.len() }

const (
	reqNodeSize = 48 // offsetof(ngx_http_limit_req_node_t, data)
	reqHeadSize = 80 // sizeof(ngx_http_limit_req_shctx_t)
)

type reqPolicy struct{ z *ReqZone }

func (p reqPolicy) cost(keyLen int) int { return slabCost(rbtreeNode + reqNodeSize + keyLen) }

// expired is nginx's test for dropping an old node: not touched for a minute and
// drained.
func (p reqPolicy) expired(w uint64, now int64) bool {
	ms, ok := elapsed(w, now)
	if ms < 0 {
		ms = -ms
	}
	if ok && ms < 60000 {
		return false
	}
	return !ok || leak(p.z.rate, ms) >= w>>lastBits
}

// elapsed is now - last in ms; ok is false when last lies more than a minute
// ahead, which a shared monotonic clock makes impossible but for a key idle for
// 2^37 ms: it is then drained. (nginx takes ms = 1 there, for a wall clock that
// jumped back.)
func elapsed(w uint64, now int64) (ms int64, ok bool) {
	d := (uint64(now) - w) & lastMask
	if d >= 1<<(lastBits-1) {
		ms = int64(d) - 1<<lastBits
		if ms < -60000 {
			return 0, false
		}
		return ms, true
	}
	return int64(d), true
}

// leak is rate * ms / 1000 (the milli-requests drained in ms), saturating.
func leak(rate uint64, ms int64) uint64 {
	hi, lo := bits.Mul64(rate, uint64(ms))
	if hi >= 1000 {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, 1000)
	return q
}

// excessAt is nginx's excess = lr->excess - ctx->rate * ms / 1000 + 1000 (not below
// 0) and the word to store for it (last moves to now unless ms is 0).
func (z *ReqZone) excessAt(w uint64, now int64) (excess, nw uint64) {
	ms, ok := elapsed(w, now)
	if !ok {
		return 0, pack(0, now)
	}
	if ms < 0 {
		ms = 0
	}
	l := leak(z.rate, ms)
	old := w >> lastBits
	if l >= old+1000 {
		excess = 0
	} else {
		excess = old + 1000 - l
	}
	if ms == 0 {
		return excess, pack(excess, int64(w&lastMask))
	}
	return excess, pack(excess, now)
}

// ReqLimit is one limit_req directive at a level.
type ReqLimit struct {
	Zone  *ReqZone
	Burst uint64 // milli-requests
	Delay uint64 // milli-requests; math.MaxUint64 for nodelay
}

// ReqConf is the merged limit_req configuration of a location.
type ReqConf struct {
	Limits   []ReqLimit
	Status   int        // limit_req_status, default 503
	LogLevel slog.Level // limit_req_log_level, default error
	DryRun   bool
}

// DelayLogLevel is the level of "delaying request" lines: one below LogLevel
// (info stays info), as nginx.
func (c *ReqConf) DelayLogLevel() slog.Level { return delayLevel(c.LogLevel) }

// ReqDecision is what the preaccess phase does with a request.
type ReqDecision struct {
	Status ReqStatus
	// Code, when not 0, finalizes the request with this status (ReqRejected).
	Code int
	// Delay, when not 0, holds the request on the loop's timer for this long
	// before the next phase (ReqDelayed; nginx also stops reading the body).
	Delay time.Duration
	// For the error log line: the zone that rejected or set the longest delay,
	// and its excess in milli-requests; Full when a new key found its zone full.
	Zone   *ReqZone
	Excess uint64
	Full   bool
}

// reqPin is an entry a limit holds until the request is accounted.
type reqPin struct {
	s *shard
	i int32
}

// lookup results, nginx's rc.
const (
	rcDeclined = iota
	rcOK
	rcAgain
	rcBusy
	rcError
)

// Check runs a request through the location's limits as nginx's
// ngx_http_limit_req_handler: keys[i] is limit i's key evaluated for the request
// (empty: the limit does not apply). now is Now() or the loop's cached copy of it.
//
// Limits are looked up in order; the last one is accounted at once, the others
// only when every limit passed (until then they are pinned). A limit whose excess
// is over its burst rejects the request, and nothing is accounted. The delay is the
// longest of the limits'. Call it once per request (nginx: once per main request,
// skipped after an internal redirect once $limit_req_status is set). No allocation
// with up to 8 limits.
func (c *ReqConf) Check(keys [][]byte, now int64) ReqDecision {
	var buf [8]reqPin
	pins := buf[:]
	if len(c.Limits) > len(buf) {
		pins = make([]reqPin, len(c.Limits))
	}
	rc := rcDeclined
	var excess uint64
	var lim *ReqLimit
	n := 0
	for ; n < len(c.Limits); n++ {
		key := keys[n]
		if len(key) == 0 || len(key) > MaxReqKey {
			continue
		}
		lim = &c.Limits[n]
		rc, excess = lim.Zone.lookup(key, now, lim.Burst, n == len(c.Limits)-1, &pins[n])
		if rc != rcAgain {
			break
		}
	}
	switch rc {
	case rcDeclined:
		return ReqDecision{}
	case rcBusy, rcError:
		unpinAll(pins[:n])
		d := ReqDecision{Status: ReqRejected, Code: c.Status, Zone: lim.Zone, Excess: excess, Full: rc == rcError}
		if c.DryRun {
			d.Status, d.Code = ReqRejectedDryRun, 0
		}
		return d
	case rcAgain:
		excess = 0
	}
	delay, excess, lim := account(c.Limits, pins[:n], now, excess, lim)
	if delay == 0 {
		return ReqDecision{Status: ReqPassed}
	}
	d := ReqDecision{Status: ReqDelayed, Delay: time.Duration(delay) * time.Millisecond, Zone: lim.Zone, Excess: excess}
	if c.DryRun {
		d.Status, d.Delay = ReqDelayedDryRun, 0
	}
	return d
}

func unpinAll(pins []reqPin) {
	for _, p := range pins {
		if p.s != nil {
			p.s.unpin(p.i)
		}
	}
}

// lookup is ngx_http_limit_req_lookup: rcOK when accounted (account: the last
// limit), rcAgain when it passes and is left pinned in *p, rcBusy over the burst,
// rcError when the zone has no room for a new key.
func (z *ReqZone) lookup(key []byte, now int64, burst uint64, account bool, p *reqPin) (int, uint64) {
	h := z.t.hash(key)
	s := z.t.shard(h)
	i := s.lookup(h, key)
	if i < 0 {
		init := pack(0, now)
		if !account {
			init = pack(0, now-never)
		}
		var created, ok bool
		i, created, ok = z.t.insert(s, h, key, init, now)
		if !ok {
			return rcError, 0
		}
		if created {
			if account {
				s.unpin(i)
				return rcOK, 0
			}
			*p = reqPin{s, i}
			return rcAgain, 0
		}
	}
	e := &s.ents[i]
	for {
		w := e.word.Load()
		excess, nw := z.excessAt(w, now)
		if excess > burst {
			s.unpin(i)
			return rcBusy, excess
		}
		if !account {
			*p = reqPin{s, i}
			return rcAgain, excess
		}
		if e.word.CompareAndSwap(w, nw) {
			s.unpin(i)
			return rcOK, excess
		}
	}
}

// account is ngx_http_limit_req_account: the pinned limits before the last one
// looked up are accounted now (without a second look at their bursts, as nginx),
// and the longest delay wins.
func account(limits []ReqLimit, pins []reqPin, now int64, excess uint64, lim *ReqLimit) (uint64, uint64, *ReqLimit) {
	var maxDelay uint64
	if excess > lim.Delay {
		maxDelay = (excess - lim.Delay) * 1000 / lim.Zone.rate
	}
	for n := len(pins) - 1; n >= 0; n-- {
		p := pins[n]
		if p.s == nil {
			continue
		}
		l := &limits[n]
		s := p.s
		e := &s.ents[p.i]
		var ex uint64
		for {
			w := e.word.Load()
			var nw uint64
			ex, nw = l.Zone.excessAt(w, now)
			if e.word.CompareAndSwap(w, nw) {
				break
			}
		}
		s.unpin(p.i)
		if ex <= l.Delay {
			continue
		}
		if d := (ex - l.Delay) * 1000 / l.Zone.rate; d > maxDelay {
			maxDelay, excess, lim = d, ex, l
		}
	}
	return maxDelay, excess, lim
}

// AppendLog appends the error log line nginx writes for d (at c.LogLevel for a
// rejection, c.DelayLogLevel() for a delay; nothing for a pass).
func (d *ReqDecision) AppendLog(b []byte) []byte {
	switch d.Status {
	case ReqRejected, ReqRejectedDryRun:
		if d.Full {
			return append(append(append(b, `could not allocate node in limit_req zone "`...), d.Zone.Name...), '"')
		}
		b = append(b, "limiting requests"...)
		if d.Status == ReqRejectedDryRun {
			b = append(b, ", dry run"...)
		}
		b = append(b, ", excess: "...)
		b = appendExcess(b, d.Excess)
		b = append(b, " by zone \""...)
	case ReqDelayed, ReqDelayedDryRun:
		b = append(b, "delaying request"...)
		if d.Status == ReqDelayedDryRun {
			b = append(b, ", dry run"...)
		}
		b = append(b, ", excess: "...)
		b = appendExcess(b, d.Excess)
		b = append(b, ", by zone \""...)
	default:
		return b
	}
	return append(append(b, d.Zone.Name...), '"')
}

// appendExcess writes milli-requests as nginx's "%ui.%03ui".
func appendExcess(b []byte, x uint64) []byte {
	b = strconv.AppendUint(b, x/1000, 10)
	b = append(b, '.')
	f := x % 1000
	if f < 100 {
		b = append(b, '0')
	}
	if f < 10 {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, f, 10)
}
