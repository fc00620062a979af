package proxy

import (
	"log/slog"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/upstream"
)

// Version is what the Server header and error pages say (server_tokens on).
var Version = "0.1.0"

// connectionSerial numbers client connections for $connection, process-wide.
var connectionSerial atomic.Uint64

// Worker serves the connections of one loop. It is the loop's eventloop.Handler for
// client connections; upstream connections get its backend handler. Everything in it
// is touched only on its loop's thread, so it needs no locks.
type Worker struct {
	loop     *eventloop.Loop
	snap     *Snapshot
	prev     *Snapshot // the one before the last reload, for addresses it removed
	log      *slog.Logger
	backends backendHandler
	numaNode int // the loop's domain, for $numa_node

	freeRequests []*request // request states idle connections gave back, for reuse
	balancers    map[*upstream.Group]*upstream.Balancer
	idle         map[upstream.PeerKey]*idleList // keep-alive upstream connections by peer
	freeIdle     []*idleConn                    // recycled idleConn structs

	scratch  []byte // builds heads; reused, never retained
	body     []byte // builds local response bodies (return text); reused
	date     []byte // "Date: ...\r\n", rebuilt once a second
	dateUnix int64
	hostname string
	clients  int // open client connections, for tests and metrics
}

// NewWorker makes the worker of one loop; call SetLoop before the loop starts.
func NewWorker(snap *Snapshot, log *slog.Logger, numaNode int) *Worker {
	host, _ := os.Hostname()
	w := &Worker{
		snap: snap, log: log, numaNode: numaNode, hostname: host,
		balancers: map[*upstream.Group]*upstream.Balancer{},
		idle:      map[upstream.PeerKey]*idleList{},
		scratch:   make([]byte, 0, 16<<10),
		body:      make([]byte, 0, 1<<10),
	}
	w.backends.w = w
	return w
}

// SetLoop tells the worker which loop runs it (the loop is made with the worker as
// its handler, so the two are tied after both exist).
func (w *Worker) SetLoop(l *eventloop.Loop) { w.loop = l }

// Reload switches the worker to a new snapshot at a safe point: it runs as a task on
// the loop, between events. Requests in flight keep the snapshot they started with;
// idle keep-alive connections serve their next request with the new one. Balancers
// and idle upstream connections of groups that are gone are dropped.
func (w *Worker) Reload(snap *Snapshot) error {
	return w.loop.Run(func() { w.setSnapshot(snap) })
}

func (w *Worker) setSnapshot(snap *Snapshot) {
	w.prev, w.snap = w.snap, snap
	keep := map[upstream.PeerKey]bool{}
	for _, g := range snap.Groups.List {
		for _, p := range append(append([]*upstream.Peer(nil), g.Peers...), g.Backup...) {
			keep[p.Key()] = true
		}
	}
	for addr, l := range w.idle {
		if !keep[addr] {
			l.closeAll()
			delete(w.idle, addr)
		}
	}
	for g := range w.balancers {
		delete(w.balancers, g) // new groups, new per-loop state
	}
}

// snapshotFor is the snapshot a connection accepted on local is served with: the
// current one, or, for an address the last reload removed (its listener still
// empties its accept queue), the one the connection was accepted under.
func (w *Worker) snapshotFor(local netip.AddrPort) *Snapshot {
	if w.snap.Routes.Addr(local) == nil && w.prev != nil && w.prev.Routes.Addr(local) != nil {
		return w.prev
	}
	return w.snap
}

// balancer returns this loop's balancer for g.
func (w *Worker) balancer(g *upstream.Group) *upstream.Balancer {
	b := w.balancers[g]
	if b == nil {
		b = g.NewBalancer(uint64(time.Now().UnixNano()) ^ uint64(w.loop.CPU()+1)<<32)
		w.balancers[g] = b
	}
	return b
}

// dateHeader returns the cached "Date: ...\r\n" line for now.
func (w *Worker) dateHeader(now time.Time) []byte {
	if sec := now.Unix(); sec != w.dateUnix || w.date == nil {
		w.dateUnix = sec
		w.date = append(w.date[:0], "Date: "...)
		w.date = now.UTC().AppendFormat(w.date, "Mon, 02 Jan 2006 15:04:05 GMT")
		w.date = append(w.date, "\r\n"...)
	}
	return w.date
}

// Clients is the number of open client connections of this worker (read it on the
// loop, or racily for a rough figure).
func (w *Worker) Clients() int { return w.clients }

// OnOpen implements eventloop.Handler for accepted client connections.
func (w *Worker) OnOpen(c eventloop.Conn) {
	w.clients++
	cl := newClient(w, c)
	c.SetContext(cl)
	cl.start()
}

// OnData implements eventloop.Handler.
func (w *Worker) OnData(c eventloop.Conn, data []byte) { c.Context().(*client).onData(data) }

// OnWriteBlocked implements eventloop.Handler: a slow client stops its upstream.
func (w *Worker) OnWriteBlocked(c eventloop.Conn) { c.Context().(*client).onWriteBlocked() }

// OnWritable implements eventloop.Handler.
func (w *Worker) OnWritable(c eventloop.Conn) { c.Context().(*client).onWritable() }

// OnTimeout implements eventloop.Handler.
func (w *Worker) OnTimeout(c eventloop.Conn) { c.Context().(*client).onTimeout() }

// OnClose implements eventloop.Handler.
func (w *Worker) OnClose(c eventloop.Conn, err error) {
	w.clients--
	if cl, ok := c.Context().(*client); ok {
		cl.onClose(err)
	}
}
