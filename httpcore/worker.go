package httpcore

import (
	crand "crypto/rand"
	"github.com/numaproxy/numaproxy/internal/freelist"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore/route"
)

// Version is what the Server header and error pages say (server_tokens on).
var Version = "0.1.0"

// connectionSerial numbers client connections for $connection, process-wide.
var connectionSerial atomic.Uint64

// Worker serves the client connections of one loop: it is the loop's
// eventloop.Handler. Everything in it is touched only on its loop's thread, so it
// needs no locks; modules keep their per-loop state in it (State).
type Worker struct {
	loop     *eventloop.Loop
	snap     *Snapshot
	prev     *Snapshot // the one before the last reload, for addresses it removed
	addr     addrMemo  // the last address asked of addrServers
	locs     locsMemo  // the last server asked of locations
	log      *slog.Logger
	numaNode int // the loop's domain, for $numa_node
	states   [maxKeys]LoopState

	freeRequests []*Request // request states idle connections gave back, for reuse
	freeSubs     []*conn    // subrequest connections, for reuse (subrequest.go)
	// freeConns are closed client connections for reuse; those recycled during
	// a batch join them at its end (reuseEnd).
	freeConns freelist.List[conn]
	reuseEnd  eventloop.BatchEnd

	scratch  []byte // builds response heads; reused, never retained
	sizeBuf  []byte // evaluates size templates (limit_rate); reused
	page     []byte // builds built-in pages; reused, never retained
	date     []byte // "Date: ...\r\n", rebuilt once a second
	dateUnix int64
	hostname string
	stats    workerStats   // client connection figures (connstats.go)
	clients  int           // open client connections, for tests and metrics
	seq      uint64        // requests started (Request.Seq)
	ids      *rand.ChaCha8 // $request_id
	// $time_local and $time_iso8601 of the current second, as nginx caches them
	localTime, isoTime []byte
	localUnix, isoUnix int64
}

// NewWorker makes the worker of one loop, with every module's loop state; call
// SetLoop before the loop starts.
func NewWorker(snap *Snapshot, log *slog.Logger, numaNode int) *Worker {
	host, _ := os.Hostname()
	w := &Worker{
		snap: snap, log: log, numaNode: numaNode, hostname: host, ids: newIDSource(),
		scratch: make([]byte, 0, 16<<10),
	}
	for _, h := range snap.hooks {
		if h.NewLoop != nil {
			w.states[h.Key] = h.NewLoop(w)
		}
	}
	return w
}

// SetLoop tells the worker which loop runs it (the loop is made with the worker as
// its handler, so the two are tied after both exist).
func (w *Worker) SetLoop(l *eventloop.Loop) {
	w.loop = l
	l.InitBatchEnd(&w.reuseEnd, w.freeConns.Reuse)
	// The first task of the loop: a reload queued later runs after it.
	_ = l.Run(func() {
		for _, st := range w.states {
			if s, ok := st.(LoopStarter); ok {
				s.Start(w.snap)
			}
		}
	})
}

// Loop is the worker's loop.
func (w *Worker) Loop() *eventloop.Loop { return w.loop }

// Log is the error log.
func (w *Worker) Log() *slog.Logger { return w.log }

// Domain is the NUMA domain of the worker's loop.
func (w *Worker) Domain() int { return w.numaNode }

// State is module key's state in this loop (Hooks.NewLoop).
func (w *Worker) State(k Key) LoopState { return w.states[k] }

// Reload switches the worker to a new snapshot at a safe point: it runs as a task on
// the loop, between events. Requests in flight keep the snapshot they started with;
// idle keep-alive connections serve their next request with the new one. Each
// module's loop state hears of it (LoopState.Reload).
func (w *Worker) Reload(snap *Snapshot) error {
	return w.loop.Run(func() { w.setSnapshot(snap) })
}

func (w *Worker) setSnapshot(snap *Snapshot) {
	w.prev, w.snap = w.snap, snap
	w.addr, w.locs = addrMemo{}, locsMemo{}
	for _, st := range w.states {
		if st != nil {
			st.Reload(snap)
		}
	}
}

// addrMemo is the last answer of addrServers; a loop's requests mostly come to
// one address, and a request asked up to 9 times (two map lookups each).
type addrMemo struct {
	local netip.AddrPort
	snap  *Snapshot
	a     *route.AddrServers
	dsc   *LocConf // a's default server's config, once asked (conn.defaultServerConf)
	ok    bool
}

// locsMemo is the last answer of locations.
type locsMemo struct {
	snap *Snapshot
	srv  *conf.Server
	locs *route.Locations
}

// locations is s.Routes.Locations(srv), from the memo when it is the last asked: a
// loop's requests mostly go to one server, and the routes index them in a map.
func (w *Worker) locations(s *Snapshot, srv *conf.Server) *route.Locations {
	if m := &w.locs; m.srv == srv && m.snap == s && srv != nil {
		return m.locs
	}
	l := s.Routes.Locations(srv)
	w.locs = locsMemo{snap: s, srv: srv, locs: l}
	return l
}

// addrServers is the snapshot a connection accepted on local is served with (the
// current one, or, for an address the last reload removed, its listener still
// emptying its accept queue, the one the connection was accepted under) and the
// servers of local in it (nil if none).
func (w *Worker) addrServers(local netip.AddrPort) (*Snapshot, *route.AddrServers) {
	if m := &w.addr; m.ok && m.local == local {
		return m.snap, m.a
	}
	s, a := w.snap, w.snap.Routes.Addr(local)
	if a == nil && w.prev != nil {
		if pa := w.prev.Routes.Addr(local); pa != nil {
			s, a = w.prev, pa
		}
	}
	w.addr = addrMemo{local: local, snap: s, a: a, ok: true}
	return s, a
}

// addrIn is s.Routes.Addr(local), from the memo when s is the snapshot it holds.
func (w *Worker) addrIn(s *Snapshot, local netip.AddrPort) *route.AddrServers {
	if ms, a := w.addrServers(local); ms == s {
		return a
	}
	return s.Routes.Addr(local)
}

// dateHeader returns the cached "Date: ...\r\n" line for now.
// timeLocal is $time_local for now, formatted once a second.
func (w *Worker) timeLocal(now time.Time) []byte {
	if sec := now.Unix(); sec != w.localUnix || w.localTime == nil {
		w.localUnix = sec
		w.localTime = now.AppendFormat(w.localTime[:0], "02/Jan/2006:15:04:05 -0700")
	}
	return w.localTime
}

// timeISO8601 is $time_iso8601 for now, formatted once a second.
func (w *Worker) timeISO8601(now time.Time) []byte {
	if sec := now.Unix(); sec != w.isoUnix || w.isoTime == nil {
		w.isoUnix = sec
		w.isoTime = now.AppendFormat(w.isoTime[:0], "2006-01-02T15:04:05-07:00")
	}
	return w.isoTime
}

func (w *Worker) dateHeader(now time.Time) []byte {
	if sec := now.Unix(); sec != w.dateUnix || w.date == nil {
		w.dateUnix = sec
		w.date = append(w.date[:0], "Date: "...)
		w.date = now.UTC().AppendFormat(w.date, "Mon, 02 Jan 2006 15:04:05 GMT")
		w.date = append(w.date, "\r\n"...)
	}
	return w.date
}

// OnOpen implements eventloop.Handler for accepted client connections.
func (w *Worker) OnOpen(c eventloop.Conn) {
	if w.snap.stats {
		w.stats.accepts.Add(1)
	}
	cl := newConn(w, c)
	c.SetContext(cl)
	cl.start()
}

// OnData implements eventloop.Handler.
func (w *Worker) OnData(c eventloop.Conn, data []byte) { c.Context().(*conn).onData(data) }

// OnWriteBlocked implements eventloop.Handler: a slow client stops what feeds it.
func (w *Worker) OnWriteBlocked(c eventloop.Conn) { c.Context().(*conn).onWriteBlocked() }

// OnWritable implements eventloop.Handler.
func (w *Worker) OnWritable(c eventloop.Conn) { c.Context().(*conn).onWritable() }

// OnTimeout implements eventloop.Handler.
func (w *Worker) OnTimeout(c eventloop.Conn) { c.Context().(*conn).onTimeout() }

// OnClose implements eventloop.Handler.
func (w *Worker) OnClose(c eventloop.Conn, err error) {
	if cl, ok := c.Context().(*conn); ok {
		cl.onClose(err)
		cl.setStat(statNone)
		cl.gone = true
		cl.recycle()
	}
}

// newIDSource seeds a worker's generator of $request_id from the system's.
func newIDSource() *rand.ChaCha8 {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		panic("httpcore: no random seed: " + err.Error())
	}
	return rand.NewChaCha8(seed)
}
