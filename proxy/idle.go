package proxy

import (
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
}

// cacheIdle keeps conn, which has carried requests requests, for the next request to
// addr, up to the group's keepalive per loop; the oldest cached connection of the
// address makes room, as in nginx. A connection that reached the group's
// keepalive_requests, or that a draining loop would only keep waiting, is closed
// instead. Cached connections are idle for the loop: Drain closes them at once, and
// a loop short of connections or fds may close them (oldest idle first).
func (st *loopState) cacheIdle(conn eventloop.Conn, addr upstream.PeerKey, g *upstream.Group, requests int) {
	g = g.Origin() // the versions of a group that follows DNS share its keepalive
	if (g.KeepaliveRequests > 0 && requests >= g.KeepaliveRequests) || st.w.Loop().Draining() {
		conn.SetContext(nil)
		conn.Close()
		return
	}
	l := st.idle[addr]
	if l == nil {
		l = &idleList{st: st}
		st.idle[addr] = l
	}
	l.group = g
	if st.idleCount(g) >= g.Keepalive && len(l.conns) > 0 {
		l.conns[0].drop()
	}
	if st.idleCount(g) >= g.Keepalive {
		conn.SetContext(nil)
		conn.Close()
		return
	}
	var ic *idleConn
	if n := len(st.freeIdle); n > 0 {
		ic = st.freeIdle[n-1]
		st.freeIdle[n-1] = nil
		st.freeIdle = st.freeIdle[:n-1]
	} else {
		ic = &idleConn{}
	}
	*ic = idleConn{conn: conn, list: l, requests: requests}
	conn.SetContext(ic)
	conn.SetTimeout(g.KeepaliveTimeout)
	l.conns = append(l.conns, ic)
	conn.SetIdle(true)
}

// idleCount is how many connections to g's servers this loop has cached.
func (st *loopState) idleCount(g *upstream.Group) int {
	n := 0
	for _, l := range st.idle {
		if l.group == g {
			n += len(l.conns)
		}
	}
	return n
}

// takeIdle returns the newest cached connection to addr and the requests it has
// carried, or nil.
func (st *loopState) takeIdle(addr upstream.PeerKey) (eventloop.Conn, int) {
	l := st.idle[addr]
	if l == nil || len(l.conns) == 0 {
		return nil, 0
	}
	ic := l.conns[len(l.conns)-1]
	l.conns[len(l.conns)-1] = nil
	l.conns = l.conns[:len(l.conns)-1]
	conn, requests := ic.conn, ic.requests
	st.recycleIdle(ic)
	conn.SetIdle(false)
	conn.SetTimeout(0)
	return conn, requests
}

func (st *loopState) recycleIdle(ic *idleConn) {
	*ic = idleConn{}
	st.freeIdle = append(st.freeIdle, ic)
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
