package proxy

import (
	"net/netip"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/upstream"
)

// idleConn is a keep-alive upstream connection waiting in this loop's cache. It is
// the connection's Context while cached: any byte or close from the server drops it.
type idleConn struct {
	conn eventloop.Conn
	list *idleList
}

// idleList is the cached connections to one server address, newest last.
type idleList struct {
	conns []*idleConn
	group *upstream.Group
}

// cacheIdle keeps conn for the next request to addr, up to the group's keepalive per
// loop; the oldest cached connection of the address makes room, as in nginx.
func (w *Worker) cacheIdle(conn eventloop.Conn, addr netip.AddrPort, g *upstream.Group) {
	l := w.idle[addr]
	if l == nil {
		l = &idleList{}
		w.idle[addr] = l
	}
	l.group = g
	if w.idleCount(g) >= g.Keepalive && len(l.conns) > 0 {
		l.conns[0].drop()
	}
	if w.idleCount(g) >= g.Keepalive {
		conn.SetContext(nil)
		conn.Close()
		return
	}
	ic := &idleConn{conn: conn, list: l}
	conn.SetContext(ic)
	conn.SetTimeout(g.KeepaliveTimeout)
	l.conns = append(l.conns, ic)
}

// idleCount is how many connections to g's servers this loop has cached.
func (w *Worker) idleCount(g *upstream.Group) int {
	n := 0
	for _, l := range w.idle {
		if l.group == g {
			n += len(l.conns)
		}
	}
	return n
}

// takeIdle returns the newest cached connection to addr, or nil.
func (w *Worker) takeIdle(addr netip.AddrPort) eventloop.Conn {
	l := w.idle[addr]
	if l == nil || len(l.conns) == 0 {
		return nil
	}
	ic := l.conns[len(l.conns)-1]
	l.conns = l.conns[:len(l.conns)-1]
	ic.conn.SetTimeout(0)
	return ic.conn
}

// drop closes a cached connection.
func (ic *idleConn) drop() {
	ic.forget()
	ic.conn.SetContext(nil)
	ic.conn.Close()
}

// forget removes a cached connection from its list.
func (ic *idleConn) forget() {
	l := ic.list
	for i, x := range l.conns {
		if x == ic {
			l.conns = append(l.conns[:i], l.conns[i+1:]...)
			return
		}
	}
}

func (l *idleList) closeAll() {
	for len(l.conns) > 0 {
		l.conns[0].drop()
	}
}
