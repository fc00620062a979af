package proxy

import (
	"net/netip"
	"slices"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/resolver"
	"github.com/numaproxy/numaproxy/upstream"
)

// liveGroup is one loop's current version of an upstream group whose servers
// follow DNS (server name resolve, nginx 1.27.3+): the loop looks their names up
// with the group's resolver, at its first request to the group and again when
// each answer expires, and makes a new version of the group when the addresses
// change. Requests in flight keep the version (and balancer) they started with.
type liveGroup struct {
	st      *loopState
	g       *upstream.Group // as configured
	cur     *upstream.Group // the version new requests use
	bal     *upstream.Balancer
	res     *resolver.Resolver
	hosts   []*liveHost
	pending int         // names still waiting for their first answer
	waiting []*exchange // requests that came before the first answers
	removed map[upstream.PeerKey]bool
	stopped bool
}

// liveHost is one server name of a live group.
type liveHost struct {
	lg    *liveGroup
	i     int // in g.Resolve
	query resolver.Query
	timer eventloop.Timer
	addrs []netip.Addr // sorted
	first bool         // its first answer has not come yet
}

// useGroup gives the exchange g and this loop's balancer of it, or for a group
// with servers that follow DNS this loop's current version. It reports false when
// the request waits for the group's first lookups: it begins when they end.
func (ex *exchange) useGroup(g *upstream.Group) bool {
	if len(g.Resolve) == 0 {
		ex.g, ex.bal = g, ex.st.balancer(g)
		return true
	}
	lg := ex.st.liveGroup(g)
	if lg.pending > 0 {
		lg.waiting = append(lg.waiting, ex)
		ex.waitingFor = lg
		return false
	}
	ex.g, ex.bal = lg.cur, lg.bal
	return true
}

// stopWaiting takes the exchange off the requests its live group holds.
func (ex *exchange) stopWaiting() {
	lg := ex.waitingFor
	ex.waitingFor = nil
	if i := slices.Index(lg.waiting, ex); i >= 0 {
		lg.waiting = slices.Delete(lg.waiting, i, i+1)
	}
}

// liveGroup returns this loop's live version of g, starting its lookups the first
// time. An answer the loop's resolver has cached (after a reload, say) comes at
// once.
func (st *loopState) liveGroup(g *upstream.Group) *liveGroup {
	if lg := st.live[g]; lg != nil {
		return lg
	}
	lg := &liveGroup{st: st, g: g, res: resolver.Of(st.w, g.Resolver), removed: map[upstream.PeerKey]bool{}}
	lg.setVersion(g.Resolved(make([][]netip.Addr, len(g.Resolve)), nil))
	st.live[g] = lg
	if lg.res == nil {
		return lg // a binary without the resolver module: no servers from names
	}
	lg.pending = len(g.Resolve)
	for i := range g.Resolve {
		h := &liveHost{lg: lg, i: i, first: true}
		st.w.Loop().InitTimer(&h.timer, h.onTimer)
		lg.hosts = append(lg.hosts, h)
	}
	for _, h := range lg.hosts {
		h.lookup()
	}
	return lg
}

func (lg *liveGroup) setVersion(v *upstream.Group) {
	lg.cur = v
	lg.bal = v.NewBalancer(uint64(time.Now().UnixNano()) ^ uint64(lg.st.w.Loop().CPU()+1)<<32)
}

func (h *liveHost) lookup() {
	h.query.Timeout = h.lg.g.ResolverTimeout
	h.lg.res.Resolve(&h.query, h.lg.g.Resolve[h.i].Host, h)
}

func (h *liveHost) onTimer(*eventloop.Timer) {
	if !h.lg.stopped {
		h.lookup()
	}
}

// Resolved takes an answer for the name, nginx's
// ngx_http_upstream_zone_resolve_handler: new addresses make a new version of the
// group; a name that does not exist has none; another failure keeps the last ones
// and asks again after resolver_timeout (at least a second). An answer is asked
// again a second after it expires.
func (h *liveHost) Resolved(_ *resolver.Query, res resolver.Result) {
	lg := h.lg
	if lg.stopped {
		return
	}
	next := res.TTL + time.Second
	addrs := h.addrs
	switch {
	case res.Err == nil:
		addrs = append([]netip.Addr(nil), res.Addrs...)
		slices.SortFunc(addrs, netip.Addr.Compare)
		addrs = slices.Compact(addrs)
	default:
		lg.st.log.Error(res.Err.Error(), "upstream", lg.g.Name)
		if e, ok := res.Err.(*resolver.Error); ok && e.Code == resolver.NXDomain {
			addrs = nil
		} else {
			next = max(lg.g.ResolverTimeout, time.Second)
		}
	}
	if res.TTL == resolver.Forever {
		next = 0 // an address does not expire
	}
	if !slices.Equal(addrs, h.addrs) {
		h.addrs = addrs
		lg.rebuild()
	}
	if next > 0 {
		h.timer.Reset(next)
	}
	if h.first {
		h.first = false
		if lg.pending--; lg.pending == 0 {
			lg.wake()
		}
	}
}

// rebuild makes the version of the group with the names' addresses now; idle
// keep-alive connections to addresses it no longer has are closed, and busy ones
// are not kept once their response ends.
func (lg *liveGroup) rebuild() {
	all := make([][]netip.Addr, len(lg.g.Resolve))
	for _, h := range lg.hosts {
		all[h.i] = h.addrs
	}
	prev := lg.cur
	v := lg.g.Resolved(all, prev)
	has := map[upstream.PeerKey]bool{}
	for _, p := range append(append([]*upstream.Peer(nil), v.Peers...), v.Backup...) {
		has[p.Key()] = true
		delete(lg.removed, p.Key())
	}
	for _, p := range append(append([]*upstream.Peer(nil), prev.Peers...), prev.Backup...) {
		if k := p.Key(); !has[k] {
			lg.removed[k] = true
			if l := lg.st.idle[k]; l != nil {
				lg.st.removeList(k, l)
			}
		}
	}
	lg.setVersion(v)
}

// wake starts the requests that waited for the first answers.
func (lg *liveGroup) wake() {
	w := lg.waiting
	lg.waiting = nil
	for _, ex := range w {
		ex.waitingFor = nil
		ex.g, ex.bal = lg.cur, lg.bal
		ex.begin()
	}
}

// stop ends the group's lookups (a reload made new groups); requests that
// waited go on with what the group has.
func (lg *liveGroup) stop() {
	lg.stopped = true
	for _, h := range lg.hosts {
		h.query.Cancel()
		h.timer.Stop()
	}
	lg.pending = 0
	lg.wake()
}

// keepsConn reports whether a connection to peer k of the exchange's group may
// be kept alive: not when DNS took the address out of the group.
func (ex *exchange) keepsConn(k upstream.PeerKey) bool {
	o := ex.g.Origin()
	if o == ex.g {
		return true
	}
	lg := ex.st.live[o]
	return lg == nil || !lg.removed[k]
}
