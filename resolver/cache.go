package resolver

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// Address families a name is asked for: A, then AAAA.
const (
	famA = iota
	famAAAA
)

// answer is what a name resolved to: addresses, a CNAME to follow, or a failure.
type answer struct {
	valid int64        // resolver clock
	addrs []netip.Addr // the n addresses twice over, so a rotation is a window
	n     int
	cname string
	err   *Error
}

// entry is a name in the cache: its answer while valid, and the query in
// flight while one is.
type entry struct {
	r    *Resolver
	name string // lower case, no trailing dot
	prev *entry // the LRU list
	next *entry
	used int64 // last lookup, resolver clock

	ans answer // used while ans.valid > now

	// The query in flight.
	inflight bool
	round    uint32 // counts queries, so waiters that join during delivery wait for the next
	waitHead *Query
	waitTail *Query
	ids      [2]uint16
	pending  [2]bool // families still waiting for their answer
	tcp      [2]bool // families asked over TCP after a truncated answer
	query    [2][]byte
	server   int // index of the server last sent to
	socks    []*udpSock
	tc       *tcpConn
	resend   eventloop.Timer
	ttl      uint32 // smallest TTL of the records used
	rcode    int    // the first failure code among the families
	got      [2][]netip.Addr
	gotCname string
}

func (r *Resolver) newEntry(name string) *entry {
	e := &entry{r: r, name: name}
	r.loop.InitTimer(&e.resend, e.onResend)
	r.cache[name] = e
	e.prev, e.next = &r.lru, r.lru.next
	r.lru.next.prev = e
	r.lru.next = e
	return e
}

// touch marks e as just used: first in the LRU list.
func (r *Resolver) touch(e *entry, now int64) {
	e.used = now
	if r.lru.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = &r.lru, r.lru.next
	r.lru.next.prev = e
	r.lru.next = e
}

// expire drops at most two names unused for cfg.Expire, as nginx does on each lookup.
func (r *Resolver) expire(now int64) {
	for range 2 {
		e := r.lru.prev
		if e == &r.lru || e.inflight || e.waitHead != nil || now-e.used <= int64(r.cfg.Expire) {
			return
		}
		r.remove(e)
	}
}

func (r *Resolver) remove(e *entry) {
	if e.prev == nil {
		return // already gone
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(r.cache, e.name)
}

// unlink takes q off e's waiters.
func (e *entry) unlink(q *Query) {
	if q.prev != nil {
		q.prev.next = q.next
	} else {
		e.waitHead = q.next
	}
	if q.next != nil {
		q.next.prev = q.prev
	} else {
		e.waitTail = q.prev
	}
	q.prev, q.next, q.e = nil, nil, nil
}

// start sends a new query for e, dropping its expired answer.
func (r *Resolver) start(e *entry) {
	e.inflight = true
	e.round++
	// The backing array is kept: the next answer overwrites it only once it arrives,
	// after any delivery of this one has ended.
	e.ans = answer{addrs: e.ans.addrs[:0]}
	e.rcode, e.ttl, e.gotCname = 0, math.MaxUint32, ""
	e.got[famA], e.got[famAAAA] = e.got[famA][:0], e.got[famAAAA][:0]
	e.pending = [2]bool{!r.cfg.NoIPv4, !r.cfg.NoIPv6}
	e.tcp = [2]bool{}
	e.ids[famA] = uint16(rand.Uint32())
	e.ids[famAAAA] = e.ids[famA] + 1 + uint16(rand.UintN(0xfffe)) // never the same
	for f := range 2 {
		if e.pending[f] {
			e.query[f] = packQuery(e.query[f][:0], e.ids[f], e.name, qtypes[f])
		}
	}
	e.server = r.next
	r.next = (r.next + 1) % len(r.servers)
	r.transmit(e)
	e.resend.Reset(r.cfg.Resend)
}

// onResend runs when the query went unanswered for cfg.Resend: ask the next
// server, or, if nobody waits any more, give up and forget the name (its answer
// was dropped when the query started), as nginx does.
func (e *entry) onResend(*eventloop.Timer) {
	r := e.r
	if e.waitHead == nil {
		r.stopQuery(e)
		r.remove(e)
		return
	}
	e.server = (e.server + 1) % len(r.servers)
	r.transmit(e)
	e.resend.Reset(r.cfg.Resend)
}

// stopQuery closes what e's query in flight holds.
func (r *Resolver) stopQuery(e *entry) {
	for i, s := range e.socks {
		_ = s.w.Close()
		e.socks[i] = nil
	}
	e.socks = e.socks[:0]
	if tc := e.tc; tc != nil {
		e.tc, tc.e = nil, nil
		_ = tc.conn.Close()
	}
	e.resend.Stop()
	e.inflight = false
}

// finish turns the families' answers into e's answer and hands it to the
// lookups that waited for it.
func (r *Resolver) finish(e *entry) {
	r.stopQuery(e)
	now := r.now()
	valid := time.Duration(e.ttl) * time.Second
	if r.cfg.Valid > 0 {
		valid = r.cfg.Valid
	}
	ans := &e.ans
	switch n := len(e.got[famA]) + len(e.got[famAAAA]); {
	case e.rcode != 0:
		ans.err = &Error{Name: e.name, Code: e.rcode}
		valid = r.errorValid()
	case n > 0:
		ans.addrs = append(append(ans.addrs[:0], e.got[famA]...), e.got[famAAAA]...)
		ans.addrs = append(ans.addrs, ans.addrs...)
		ans.n = n
	case e.gotCname != "":
		ans.cname = e.gotCname
	default:
		ans.err = &Error{Name: e.name, Code: NXDomain} // no address of either family, as nginx
		valid = r.errorValid()
	}
	ans.valid = now + int64(valid)
	// Deliver a copy: a handler may look the name up again, which with a TTL of 0
	// starts the next query on e, and the waiters after it still get this answer.
	got := *ans
	round := e.round
	for e.waitHead != nil && e.waitHead.round == round {
		q := e.waitHead
		e.unlink(q)
		r.complete(q, &got, now, false)
	}
}

func (r *Resolver) errorValid() time.Duration {
	if r.cfg.Valid > 0 {
		return r.cfg.Valid
	}
	return errorValid
}
