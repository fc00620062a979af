package proxy

import (
	"log/slog"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/upstream"
)

// content is the content handler of a location with proxy_pass (proxy_pass sets it,
// bound to the location's config): it sends the request to the upstream and answers
// with what comes back, asynchronously.
func (lc *LocConf) content(r *httpcore.Request) httpcore.Status {
	if !upstreamPathOK(r, lc.Pass) {
		r.DisableKeepAlive()
		return 400
	}
	if r.AsGET() && r.BodyUnread() {
		// An error_page redirect is proxied without the body, which is still to
		// come: its bytes must not be taken for a next request.
		r.DisableKeepAlive()
	}
	ex, _ := r.Ctx(key).(*exchange)
	if ex == nil {
		ex = &exchange{}
		r.SetCtx(key, ex)
	}
	st := r.Worker().State(key).(*loopState)
	// The tries of an exchange before an internal redirect stay, for $upstream_*.
	states, seq := ex.states[:0], ex.seq
	if seq == r.Seq() && len(ex.states) > 0 {
		states = append(ex.states, upState{})
	}
	*ex = exchange{r: r, lc: lc, st: st, g: lc.Pass.Group, bal: st.balancer(lc.Pass.Group), firstTry: time.Now(),
		states: states, seq: r.Seq()}
	ex.resp.HeadRequest = r.IsHEAD()
	r.SetPending(ex)
	kind := r.BodyFraming()
	ex.chunkedBody = kind == httpcore.BodyChunked
	if ex.chunkedBody && (lc.HTTPMinor == 0 || !lc.PassRequestBody) {
		// An HTTP/1.0 server takes no chunked body: as nginx does (it buffers request
		// bodies), read the whole body first, in memory up to client_body_buffer_size
		// and in a temp file beyond, then send it with its length. A body not passed
		// on is read whole to count it: nginx sends its length all the same.
		ex.buffered = true
		mode := httpcore.BufferBody
		if !lc.PassRequestBody {
			mode = httpcore.CountBody
		}
		r.ReadBody(ex, mode)
		return httpcore.Done
	}
	if !ex.start() {
		return httpcore.Done
	}
	r.ReadBody(ex, httpcore.StreamBody)
	return httpcore.Done
}

// start builds the upstream request head and connects; false when it answered the
// client with an error.
func (ex *exchange) start() bool {
	r := ex.r
	pool := ex.st.pool()
	head, ok := ex.appendUpstreamHead(pool.Get(len(r.RawHead()) + 1024)[:0])
	ex.head = head
	if !ok {
		ex.end()
		r.Fail(500) // as nginx when it cannot build the request
		return false
	}
	// A body read whole goes with the exchange, which sends it again on a retry.
	ex.replay, ex.file = r.TakeBody()
	return ex.connect()
}

// BodyData takes request body data as it arrives.
func (ex *exchange) BodyData(p []byte) {
	if ex.chunkedBody {
		ex.bodyChunk(p)
	} else {
		ex.sendBody(p)
	}
}

// BodyRead: the pieces of one client read are in; they go out as one chunk.
func (ex *exchange) BodyRead() {
	if ex.pieces > 0 {
		ex.flushChunk(false)
	}
}

// BodyEnd: the whole request is read. A body read whole starts the exchange now.
func (ex *exchange) BodyEnd() {
	switch {
	case ex.buffered:
		ex.buffered, ex.chunkedBody = false, false // it goes with its length
		if !ex.start() {
			return
		}
	case ex.chunkedBody:
		ex.flushChunk(true)
	}
	ex.requestSent()
}

// snapState is the proxy's state of one snapshot: its upstream groups and their
// hash keys, compiled.
type snapState struct {
	groups   *upstream.Groups
	hashKeys map[*upstream.Group]*httpcore.Template // hash KEY, compiled
}

func (ex *exchange) snapState() *snapState { return ex.r.Snapshot().State(key).(*snapState) }

// initModule compiles the snapshot's upstream groups for the loops.
func initModule(s *httpcore.Setup) error {
	st := &snapState{groups: upstream.GroupsOf(s.Config), hashKeys: map[*upstream.Group]*httpcore.Template{}}
	for _, g := range st.groups.List {
		if g.Method == upstream.Hash || g.Method == upstream.HashConsistent {
			t, err := s.Variables().Compile(g.HashKey)
			if err != nil {
				return &conf.Error{Pos: g.Pos, Msg: "hash key: " + err.Error()}
			}
			st.hashKeys[g] = t
		}
	}
	s.SetState(key, st)
	return nil
}

// loopState is the proxy's state in one loop: its balancers, its keep-alive
// upstream connections, the handler of its upstream connections.
type loopState struct {
	w         *httpcore.Worker
	log       *slog.Logger
	backends  backendHandler
	balancers map[*upstream.Group]*upstream.Balancer
	idle      map[upstream.PeerKey]*idleList // keep-alive upstream connections by peer
	freeIdle  []*idleConn                    // recycled idleConn structs
	scratch   []byte                         // builds values; reused, never retained
}

func newLoop(w *httpcore.Worker) httpcore.LoopState {
	return &loopState{
		w: w, log: w.Log(),
		balancers: map[*upstream.Group]*upstream.Balancer{},
		idle:      map[upstream.PeerKey]*idleList{},
		scratch:   make([]byte, 0, 4<<10),
	}
}

// Reload drops the balancers and idle upstream connections of groups that are
// gone.
func (st *loopState) Reload(snap *httpcore.Snapshot) {
	keep := map[upstream.PeerKey]bool{}
	for _, g := range snap.State(key).(*snapState).groups.List {
		for _, p := range append(append([]*upstream.Peer(nil), g.Peers...), g.Backup...) {
			keep[p.Key()] = true
		}
	}
	for addr, l := range st.idle {
		if !keep[addr] {
			l.closeAll()
			delete(st.idle, addr)
		}
	}
	for g := range st.balancers {
		delete(st.balancers, g) // new groups, new per-loop state
	}
}

func (st *loopState) pool() eventloop.BufferPool { return st.w.Loop().Pool() }

// balancer returns this loop's balancer for g.
func (st *loopState) balancer(g *upstream.Group) *upstream.Balancer {
	b := st.balancers[g]
	if b == nil {
		b = g.NewBalancer(uint64(time.Now().UnixNano()) ^ uint64(st.w.Loop().CPU()+1)<<32)
		st.balancers[g] = b
	}
	return b
}

// variables are the proxy's: $proxy_host, $proxy_add_x_forwarded_for and the
// $upstream_ ones of the request's tries (upstate.go).
var variables = append(stateVariables, []httpcore.Variable{
	{Name: "proxy_host", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		ex := running(r)
		if ex == nil {
			return dst
		}
		if ex.lc.Pass.Unix {
			return append(dst, "localhost"...) // as nginx for a unix-domain socket
		}
		host := ex.lc.Pass.Host
		if len(host) > 3 && host[len(host)-3:] == ":80" {
			host = host[:len(host)-3]
		}
		return append(dst, host...)
	}},
	{Name: "proxy_add_x_forwarded_for", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		// nginx: every X-Forwarded-For field, each followed by ", ", then the address.
		h := &r.Head().Headers
		for i := h.Index("x-forwarded-for", 0); i >= 0; i = h.Index("x-forwarded-for", i+1) {
			dst = append(dst, h.Value(i)...)
			dst = append(dst, ", "...)
		}
		return r.RemoteAddr().Addr().AppendTo(dst)
	}},
}...)

// ownVariables are the proxy's variables alone, for the templates of its defaults.
var ownVariables = func() *httpcore.Variables {
	v, err := httpcore.NewVariables(variables)
	if err != nil {
		panic(err)
	}
	return v
}()

// running is the request's exchange while it runs, else nil.
func running(r *httpcore.Request) *exchange {
	ex, _ := r.Pending().(*exchange)
	return ex
}
