package proxy

import (
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/upstream"
)

// idleConn is a keep-alive upstream connection waiting in this loop's cache. It is
// the connection's Context while cached: any byte or close from the server drops it.
// idleConns are recycled through the worker's free list.
type idleConn struct {
	conn     eventloop.Conn
	list     *idleList
	requests int // requests the connection has carried
}

// idleList is the cached connections to one server address, newest last.
type idleList struct {
	st    *loopState
	conns []*idleConn
	group *upstream.Group
	count *int // the connections this loop caches for group, over all its lists (st.idleCounts)
	low   int  // fewest cached since the last trim: conns[:low] stayed unused since then
	gone  bool // taken out of st.idle (a reload, DNS): an exchange's hint to it is stale
}

// setGroup makes g the list's group; its connections count for g from now on.
func (l *idleList) setGroup(g *upstream.Group) {
	if l.group == g {
		return
	}
	if l.count != nil {
		*l.count -= len(l.conns)
	}
	l.group, l.count = g, l.st.idleCounter(g)
	*l.count += len(l.conns)
}

// idleCounter is the count of cached connections to g's servers, created at 0.
func (st *loopState) idleCounter(g *upstream.Group) *int {
	n := st.idleCounts[g]
	if n == nil {
		n = new(int)
		st.idleCounts[g] = n
	}
	return n
}

// recount rebuilds the counts per group from the lists, after lists went away.
func (st *loopState) recount() {
	clear(st.idleCounts)
	for _, l := range st.idle {
		l.count = nil
		if l.group != nil {
			l.count = st.idleCounter(l.group)
			*l.count += len(l.conns)
		}
	}
}

// idleList is st.idle[addr], from a one-entry memo first: a loop's requests mostly
// go to a few servers, and the map hashes the whole key (its Unix string included).
// A list leaves the map only through removeList, which marks it gone.
func (st *loopState) idleList(addr upstream.PeerKey) *idleList {
	if l := st.lastIdle; l != nil && !l.gone && st.lastIdleKey == addr {
		return l
	}
	l := st.idle[addr]
	if l != nil {
		st.lastIdle, st.lastIdleKey = l, addr
	}
	return l
}

// removeList takes the list for addr out of the cache, closing its connections.
func (st *loopState) removeList(addr upstream.PeerKey, l *idleList) {
	l.closeAll()
	l.gone = true
	delete(st.idle, addr)
}

// cacheIdle keeps conn, which has carried requests requests, for the next request to
// addr. Over the group's keepalive per loop, the oldest cached connections are closed
// once they stayed unused for overGrace (nginx closes the oldest at once): at rest
// the loop keeps keepalive connections as nginx does, and under load no more than
// the requests in flight needed in the last moments. A connection that reached the group's
// keepalive_requests, or that a draining loop would only keep waiting, is closed
// instead. Cached connections are idle for the loop: Drain closes them at once, and
// a loop short of connections or fds may close them (oldest idle first).
// hint is the list takeIdle looked at for addr (or nil): it saves the lookup.
func (st *loopState) cacheIdle(conn eventloop.Conn, addr upstream.PeerKey, g *upstream.Group, requests int, hint *idleList) {
	g = g.Origin() // the versions of a group that follows DNS share its keepalive
	if (g.KeepaliveRequests > 0 && requests >= g.KeepaliveRequests) || st.w.Loop().Draining() {
		conn.SetContext(nil)
		conn.Close()
		return
	}
	l := hint
	if l == nil || l.gone {
		l = st.idleList(addr)
		if l == nil {
			l = &idleList{st: st}
			st.idle[addr] = l
		}
	}
	l.setGroup(g)
	if g.Keepalive <= 0 {
		conn.SetContext(nil)
		conn.Close()
		return
	}
	if *l.count >= g.Keepalive {
		st.overLimit(g)
	}
	ic := st.freeIdle.Get()
	*ic = idleConn{conn: conn, list: l, requests: requests}
	conn.SetContext(ic)
	conn.SetTimeout(g.KeepaliveTimeout)
	l.conns = append(l.conns, ic)
	*l.count++
	conn.SetIdle(true)
}

// overGrace is how long a cached connection over the keepalive may stay unused
// before it is closed (nginx: not at all; trimIdle runs every overGrace, so it goes
// between one and two of them). Loaded, the requests in flight rise and fall many
// times a second: with 50 clients and keepalive 32, nginx opened (and closed) an
// upstream connection for every 5th request, numaproxy for every 6th; with 10 ms of
// grace one for every 1,600th, with 100 ms and 1 s none.
const overGrace = time.Second

// overLimit notes that g is about to cache more connections than its keepalive.
func (st *loopState) overLimit(g *upstream.Group) {
	for _, x := range st.overfull {
		if x == g {
			return
		}
	}
	st.overfull = append(st.overfull, g)
	if !st.trimInit {
		st.w.Loop().InitTimer(&st.trim, st.trimIdle)
		st.trimInit = true
	}
	if !st.trim.Pending() {
		for _, l := range st.idle {
			if l.group == g {
				l.low = len(l.conns)
			}
		}
		st.trim.Reset(overGrace)
	}
}

// trimIdle closes, oldest first, the cached connections over their group's
// keepalive that stayed unused since the last trim.
func (st *loopState) trimIdle(*eventloop.Timer) {
	keep := st.overfull[:0]
	for i, g := range st.overfull {
		st.overfull[i] = nil
		over := st.idleCount(g) - g.Keepalive
		for _, l := range st.idle {
			if l.group != g {
				continue
			}
			for n := min(over, l.low); n > 0; n-- {
				l.conns[0].drop()
				over--
			}
			l.low = len(l.conns)
		}
		if over > 0 {
			keep = append(keep, g)
		}
	}
	st.overfull = keep
	if len(keep) > 0 {
		st.trim.Reset(overGrace)
	}
}

// idleCount is how many connections to g's servers this loop has cached.
func (st *loopState) idleCount(g *upstream.Group) int {
	if n := st.idleCounts[g]; n != nil {
		return *n
	}
	return 0
}

// takeIdle returns the newest cached connection to addr and the requests it has
// carried, or nil; and the list for addr (nil if none), cacheIdle's hint.
func (st *loopState) takeIdle(addr upstream.PeerKey) (eventloop.Conn, int, *idleList) {
	l := st.idleList(addr)
	if l == nil || len(l.conns) == 0 {
		return nil, 0, l
	}
	ic := l.conns[len(l.conns)-1]
	l.conns[len(l.conns)-1] = nil
	l.conns = l.conns[:len(l.conns)-1]
	*l.count--
	l.low = min(l.low, len(l.conns))
	conn, requests := ic.conn, ic.requests
	st.recycleIdle(ic)
	conn.SetIdle(false)
	conn.SetTimeout(0)
	return conn, requests, l
}

func (st *loopState) recycleIdle(ic *idleConn) {
	*ic = idleConn{}
	st.freeIdle.Put(ic)
}

// drop closes a cached connection.
func (ic *idleConn) drop() {
	conn := ic.conn
	ic.forget()
	conn.SetContext(nil)
	conn.Close()
}

// forget removes a cached connection from its list and recycles it.
func (ic *idleConn) forget() {
	l := ic.list
	for i, x := range l.conns {
		if x == ic {
			copy(l.conns[i:], l.conns[i+1:])
			l.conns[len(l.conns)-1] = nil
			l.conns = l.conns[:len(l.conns)-1]
			*l.count--
			l.low = min(l.low, len(l.conns))
			break
		}
	}
	l.st.recycleIdle(ic)
}

func (l *idleList) closeAll() {
	for len(l.conns) > 0 {
		l.conns[0].drop()
	}
}
