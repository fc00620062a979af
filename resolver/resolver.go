package resolver

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/numaproxy/numaproxy/eventloop"
)

// nginx's fixed figures (ngx_resolver.c).
const (
	defaultTimeout = 30 * time.Second // resolver_timeout
	defaultResend  = 5 * time.Second  // r->resend_timeout
	defaultExpire  = 30 * time.Second // r->expire
	tcpTimeout     = 5 * time.Second  // r->tcp_timeout, for the connect here
	errorValid     = 10 * time.Second // ctx->valid of a failure without valid=
	maxRecursion   = 50               // NGX_RESOLVER_MAX_RECURSION: CNAMEs followed
	udpSize        = 4096             // NGX_RESOLVER_UDP_SIZE
)

// Forever is the TTL of a name that is an IP address.
const Forever = time.Duration(math.MaxInt64)

// Config is a resolver's settings: nginx's "resolver address ... [valid=time]
// [ipv4=on|off] [ipv6=on|off] [status_zone=zone]" and resolver_timeout. Zero
// fields take nginx's defaults.
type Config struct {
	// Servers are the name servers, tried round-robin.
	Servers []netip.AddrPort
	// Valid overrides the TTL of answers (valid=); 0 keeps the TTL.
	Valid time.Duration
	// NoIPv4 and NoIPv6 leave out A or AAAA queries (ipv4=off, ipv6=off); not both.
	NoIPv4, NoIPv6 bool
	// StatusZone is status_zone= (NGINX Plus's statistics), kept for the syntax.
	StatusZone string
	// Timeout bounds a lookup (resolver_timeout); default 30s. Query.Timeout
	// overrides it per lookup, as nginx takes it from the location.
	Timeout time.Duration
	// Resend is how long a query waits for its answer before it is sent to the
	// next server; default nginx's fixed 5s.
	Resend time.Duration
	// Expire drops a name from the cache once it has not been looked up for this
	// long, valid or not; default nginx's fixed 30s.
	Expire time.Duration

	key string // settingsKey, set by ParseResolver
}

// Stats count a resolver's work.
type Stats struct {
	Lookups   uint64 // Resolve calls
	CacheHits uint64 // lookups answered from the cache, IP addresses included
	Queries   uint64 // DNS queries sent (an A and an AAAA count two; resends count)
	TCP       uint64 // queries asked again over TCP after a truncated answer
	Timeouts  uint64 // lookups that ran out of time
	Ignored   uint64 // messages dropped: wrong ID or question, malformed, format error
}

// Resolver is one loop's DNS client and cache. Its methods must be called on the
// loop's thread, and so are the handlers it calls.
type Resolver struct {
	loop    *eventloop.Loop
	cfg     Config
	servers []netip.AddrPort
	next    int // the server a new query goes to first
	base    time.Time
	cache   map[string]*entry
	lru     entry // list head: lru.next is the most recently used
	key     []byte
	rbuf    []byte
	parser  dnsmessage.Parser
	chain   []dnsmessage.Name // an answer's CNAME chain (scratch)
	stats   Stats
	closed  bool
}

// New makes a resolver for loop l. It opens nothing until the first query.
func New(l *eventloop.Loop, cfg Config) (*Resolver, error) {
	if len(cfg.Servers) == 0 {
		return nil, ErrNoServers
	}
	if cfg.NoIPv4 && cfg.NoIPv6 {
		return nil, errBothOff
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Resend <= 0 {
		cfg.Resend = defaultResend
	}
	if cfg.Expire <= 0 {
		cfg.Expire = defaultExpire
	}
	r := &Resolver{
		loop: l, cfg: cfg, base: time.Now(), cache: map[string]*entry{},
		rbuf: make([]byte, udpSize), chain: make([]dnsmessage.Name, 0, maxChain),
	}
	for _, s := range cfg.Servers {
		r.servers = append(r.servers, netip.AddrPortFrom(s.Addr().Unmap(), s.Port()))
	}
	r.lru.next, r.lru.prev = &r.lru, &r.lru
	return r, nil
}

// Stats returns the resolver's counters.
func (r *Resolver) Stats() Stats { return r.stats }

// now is the resolver's clock: monotonic nanoseconds since New.
func (r *Resolver) now() int64 { return int64(time.Since(r.base)) }

// Handler receives the outcome of a lookup.
type Handler interface {
	// Resolved runs once per Resolve, on the loop's thread, possibly before
	// Resolve returns (a cached answer, an IP address, a bad name).
	Resolved(q *Query, res Result)
}

// Result is the outcome of a lookup.
type Result struct {
	// Addrs are the addresses: IPv4 first when fresh from the name server, rotated
	// by a random offset when from the cache, as nginx does. The slice is the
	// resolver's and valid only until Resolved returns: copy what is kept.
	Addrs []netip.Addr
	// TTL is how long the answer (or the failure) stays cached from now: valid=
	// or the answer's TTL; Forever for an IP address; 0 after a timeout.
	TTL time.Duration
	// Err is nil or an *Error.
	Err error
}

// Query is one lookup, meant to be embedded in what waits for it (a request), so
// that waiting costs no allocation. A Query runs one lookup at a time and may be
// used again once its handler ran or after Cancel.
type Query struct {
	// Timeout bounds this lookup; 0 takes the resolver's Config.Timeout.
	Timeout time.Duration

	r     *Resolver
	h     Handler
	name  string
	e     *entry // the entry waited on; nil when not waiting
	prev  *Query // e's waiters
	next  *Query
	round uint32 // e.round when it joined
	depth int    // CNAMEs followed
	lit   [1]netip.Addr
	timer eventloop.Timer
	tloop *eventloop.Loop // the loop timer is bound to
}

// Name returns the name of the query's last lookup.
func (q *Query) Name() string { return q.name }

// Pending reports whether the lookup is waiting for an answer.
func (q *Query) Pending() bool { return q.e != nil }

// Cancel abandons a pending lookup: its handler will not run. It does nothing
// to a query that is not waiting.
func (q *Query) Cancel() {
	if q.e != nil {
		q.e.unlink(q)
	}
	q.timer.Stop()
}

// Resolve looks name up and calls h.Resolved with the outcome, within the
// query's timeout. An IP address resolves to itself. A query still waiting for
// an earlier lookup is cancelled first.
func (r *Resolver) Resolve(q *Query, name string, h Handler) {
	q.Cancel()
	q.r, q.h, q.name, q.depth = r, h, name, 0
	r.stats.Lookups++
	if r.closed {
		r.fail(q, Canceled)
		return
	}
	if ip, ok := parseIP(name); ok {
		r.stats.CacheHits++
		q.lit[0] = ip
		r.call(q, Result{Addrs: q.lit[:], TTL: Forever})
		return
	}
	r.lookup(q, name)
}

// parseIP reads an IP address; names that cannot be one are not parsed, as a
// failed netip.ParseAddr allocates its error.
func parseIP(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if c := s[len(s)-1]; (c < '0' || c > '9') && !hasColon(s) {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

func hasColon(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return true
		}
	}
	return false
}

// lookup answers q from the cache, joins the query in flight for name, or
// starts one.
func (r *Resolver) lookup(q *Query, name string) {
	if !r.setKey(name) {
		r.fail(q, NXDomain) // nginx declines such a name as not found
		return
	}
	now := r.now()
	r.expire(now)
	e := r.cache[string(r.key)]
	if e == nil {
		e = r.newEntry(string(r.key))
	}
	r.touch(e, now)
	switch {
	case e.ans.valid > now:
		r.stats.CacheHits++
		r.complete(q, &e.ans, now, true)
	case e.inflight:
		r.join(q, e)
	default:
		r.start(e)
		r.join(q, e)
	}
}

// setKey puts name's cache key in r.key: lower case, without a trailing dot. It
// reports false for a name no query can carry.
func (r *Resolver) setKey(name string) bool {
	if n := len(name); n > 0 && name[n-1] == '.' {
		name = name[:n-1]
	}
	if name == "" || len(name) > 253 {
		return false
	}
	r.key = r.key[:0]
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '.' {
			if label == 0 {
				return false
			}
			label = 0
		} else if label++; label > 63 {
			return false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		r.key = append(r.key, c)
	}
	return true
}

// join makes q wait for e's query in flight, within q's timeout (which keeps
// running along a CNAME chain).
func (r *Resolver) join(q *Query, e *entry) {
	q.e, q.round = e, e.round
	q.prev, q.next = e.waitTail, nil
	if e.waitTail != nil {
		e.waitTail.next = q
	} else {
		e.waitHead = q
	}
	e.waitTail = q
	if q.tloop != r.loop {
		r.loop.InitTimer(&q.timer, q.onTimeout)
		q.tloop = r.loop
	}
	if !q.timer.Pending() {
		d := q.Timeout
		if d <= 0 {
			d = r.cfg.Timeout
		}
		q.timer.Reset(d)
	}
}

func (q *Query) onTimeout(*eventloop.Timer) {
	if q.e == nil {
		return
	}
	q.e.unlink(q)
	q.r.stats.Timeouts++
	q.r.fail(q, TimedOut)
}

// complete answers q from a valid answer, or follows its CNAME. As nginx, a
// cached answer is handed out rotated by a random offset, a fresh one as it came.
func (r *Resolver) complete(q *Query, e *answer, now int64, rotate bool) {
	if e.cname != "" {
		if q.depth++; q.depth > maxRecursion {
			r.fail(q, NXDomain)
			return
		}
		r.lookup(q, e.cname)
		return
	}
	res := Result{TTL: time.Duration(e.valid - now)}
	switch {
	case e.err == nil:
		k, n := 0, e.n
		if rotate && n > 1 {
			k = rand.IntN(n)
		}
		res.Addrs = e.addrs[k : k+n : k+n]
	case e.err.Name == q.name:
		res.Err = e.err
	default:
		res.Err = &Error{Name: q.name, Code: e.err.Code}
	}
	r.call(q, res)
}

// fail ends q with an error code.
func (r *Resolver) fail(q *Query, code int) {
	r.call(q, Result{Err: &Error{Name: q.name, Code: code}})
}

// call hands q its result; q is free again when the handler runs.
func (r *Resolver) call(q *Query, res Result) {
	q.timer.Stop()
	h := q.h
	q.h = nil
	h.Resolved(q, res)
}

// Close ends every lookup in flight (their handlers get Canceled), closes the
// resolver's sockets and empties its cache; later lookups fail with Canceled.
// Call it on the loop's thread, or once the loop has exited (which closed the
// sockets already).
func (r *Resolver) Close() {
	if r.closed {
		return
	}
	r.closed = true
	for _, e := range r.cache {
		r.stopQuery(e)
	}
	for _, e := range r.cache {
		for e.waitHead != nil {
			q := e.waitHead
			e.unlink(q)
			r.fail(q, Canceled)
		}
	}
	clear(r.cache)
	r.lru.next, r.lru.prev = &r.lru, &r.lru
}
