package proxy

import (
	"bytes"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/internal/freelist"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/cache"
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/tls"
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
	vt, ck := ex.vt, ex.ck
	// The tries of an exchange before an internal redirect stay, for $upstream_*.
	states, seq := ex.states[:0], ex.seq
	if seq == r.Seq() && len(ex.states) > 0 {
		states = append(ex.states, upState{})
	}
	// Cleared in place, then set: a composite literal is built on the stack and
	// copied over the ~1 KB state.
	ex.exchangeState = exchangeState{}
	ex.r, ex.lc, ex.st, ex.firstTry, ex.vt, ex.ck = r, lc, st, st.w.Loop().Clock(), vt, ck
	ex.states, ex.seq, ex.redirects = states, r.Seq(), r.Redirects()
	ex.resp.Reset()
	ex.resp.Limits = http1.Limits{}
	ex.gen++
	if ck != nil {
		ck.ex, ck.zone, ck.status = nil, nil, csNone
	}
	r.SetPending(ex)
	if lc.Pass.Value == nil {
		if !ex.useGroup(lc.Pass.Group) {
			return httpcore.Done // the group's names are being looked up: begin follows
		}
	} else {
		if ex.vt == nil {
			ex.vt = &varTarget{}
		}
		if status := ex.selectTarget(); status != 0 {
			ex.end()
			return status
		}
		if ex.g == nil {
			return httpcore.Done // a name is being looked up: begin follows
		}
	}
	ex.begin()
	return httpcore.Done
}

// begin sends the request to the exchange's group, now known, reading its body
// as it goes or whole first.
func (ex *exchange) begin() {
	if ex.lc.Cache.Zone != nil && ex.cacheStart() {
		return // answered from the cache, or waiting for proxy_cache_lock
	}
	ex.forward()
}

// headSent reports that the request goes upstream as HEAD, so that its response
// has no body: not a HEAD the cache converts to GET (proxy_cache_convert_head).
func (ex *exchange) headSent() bool { return ex.r.IsHEAD() && !ex.convertHead() }

// forward goes upstream.
func (ex *exchange) forward() {
	r, lc := ex.r, ex.lc
	ex.resp.HeadRequest = ex.headSent()
	kind := r.BodyFraming()
	ex.chunkedBody = kind == httpcore.BodyChunked
	// nginx reads the body whole unless it streams it (proxy_request_buffering
	// off, the body passed on); a body not passed on too, for $request_body and
	// client_body_in_file_only.
	readWhole := lc.RequestBuffering || !lc.PassRequestBody
	bufferAll := readWhole && (kind != httpcore.BodyNone || r.BodyInFileOnly())
	if bufferAll || ex.chunkedBody && (lc.HTTPMinor == 0 || !lc.PassRequestBody) {
		// proxy_request_buffering on, and always for a chunked body to an HTTP/1.0
		// server, which takes none: read the whole body first, in memory up to
		// client_body_buffer_size and in a temp file beyond, then send it with its
		// length. A body not passed on is read whole to count it: nginx sends its
		// length all the same. client_body_in_file_only: read whole into its file
		// (a Content-Length: 0 gets an empty one) before the head names it.
		ex.buffered = true
		mode := httpcore.BufferBody
		if !lc.PassRequestBody {
			mode = httpcore.CountBody
		}
		r.ReadBody(ex, mode)
		return
	}
	if !ex.start() {
		return
	}
	r.ReadBody(ex, httpcore.StreamBody)
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
	ex.lent = ex.replay != nil
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
	targets  map[string]*upstream.Group             // for proxy_pass with variables (targetKeys)
	cacheKey *httpcore.Template                     // proxy_cache_key's default
}

func (ex *exchange) snapState() *snapState { return ex.r.Snapshot().State(key).(*snapState) }

// initModule compiles the snapshot's upstream groups for the loops.
func initModule(s *httpcore.Setup) error {
	st := &snapState{groups: upstream.GroupsOf(s.Config), hashKeys: map[*upstream.Group]*httpcore.Template{}}
	st.targets = targetKeys(st.groups)
	k, err := s.Variables().Compile("$scheme$proxy_host$request_uri")
	if err != nil {
		return err
	}
	st.cacheKey = k
	if s.Config.HTTP != nil {
		for _, z := range s.Config.HTTP.Conf(self).(*LocConf).cachePaths {
			zone, err := cache.Open(z.cfg, slog.Default())
			if err != nil {
				return &conf.Error{Pos: z.pos, Msg: "proxy_cache_path: " + err.Error(), Err: err}
			}
			z.zone = zone
		}
	}
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
	tls       *tls.Client // https upstreams: TLS around backends
	balancers map[*upstream.Group]*upstream.Balancer
	// lastGroup and lastBalancer are the last balancer asked for: requests mostly
	// go to one group, asked without a map look-up.
	lastGroup    *upstream.Group
	lastBalancer *upstream.Balancer
	// lastIdle is the idle list idleList last found, for lastIdleKey.
	lastIdle    *idleList
	lastIdleKey upstream.PeerKey
	dyn         map[string]*dynGroup           // targets of proxy_pass with variables (target.go)
	live        map[*upstream.Group]*liveGroup // groups with servers that follow DNS (live.go)
	idle        map[upstream.PeerKey]*idleList // keep-alive upstream connections by peer
	// idleCounts is the connections cached for each group, over its servers' lists.
	idleCounts map[*upstream.Group]*int
	freeIdle   freelist.List[idleConn]     // recycled idleConn structs
	scratch    []byte                      // builds values; reused, never retained
	stats      map[peerStatsKey]*PeerStats // upstream figures (stats.go)
	statsList  []*PeerStats                // the same, in the order they came
	overfull   []*upstream.Group           // groups caching more than their keepalive
	trim       eventloop.Timer             // runs trimIdle
	trimInit   bool                        // trim is bound to the loop
	// bgFrom is the cache state of the request starting a background update, for
	// the background request's content handler to take its key and lock over
	// (cache.go); set only while StartBackground runs.
	bgFrom *cacheCtx
	hits   hitFiles // the cache files' descriptors hits keep (hitfiles.go)
}

func newLoop(w *httpcore.Worker) httpcore.LoopState {
	st := &loopState{
		w: w, log: w.Log(),
		balancers:  map[*upstream.Group]*upstream.Balancer{},
		dyn:        map[string]*dynGroup{},
		live:       map[*upstream.Group]*liveGroup{},
		idle:       map[upstream.PeerKey]*idleList{},
		idleCounts: map[*upstream.Group]*int{},
		scratch:    make([]byte, 0, 4<<10),
		stats:      map[peerStatsKey]*PeerStats{},
	}
	st.tls = tls.NewClient(&st.backends)
	return st
}

// Reload drops the balancers and idle upstream connections of groups that are
// gone.
func (st *loopState) Reload(snap *httpcore.Snapshot) {
	keep := map[upstream.PeerKey]bool{}
	names := map[string]bool{}
	for _, g := range snap.State(key).(*snapState).groups.List {
		for _, p := range append(append([]*upstream.Peer(nil), g.Peers...), g.Backup...) {
			keep[p.Key()] = true
		}
		if len(g.Resolve) > 0 {
			names[g.Name] = true
		}
	}
	for g, lg := range st.live {
		if names[g.Name] {
			// The new snapshot's group looks the names up again (from this loop's
			// resolver cache): its connections stay.
			for _, p := range append(append([]*upstream.Peer(nil), lg.cur.Peers...), lg.cur.Backup...) {
				keep[p.Key()] = true
			}
		}
		lg.stop()
		delete(st.live, g)
	}
	for addr, l := range st.idle {
		if !keep[addr] {
			st.removeList(addr, l)
		}
	}
	st.recount() // the counts of the old snapshot's groups go
	for g := range st.balancers {
		delete(st.balancers, g) // new groups, new per-loop state
	}
	st.lastGroup, st.lastBalancer = nil, nil
	clear(st.dyn)
}

func (st *loopState) pool() eventloop.BufferPool { return st.w.Loop().Pool() }

// balancer returns this loop's balancer for g.
func (st *loopState) balancer(g *upstream.Group) *upstream.Balancer {
	if g == st.lastGroup {
		return st.lastBalancer
	}
	b := st.balancers[g]
	if b == nil {
		b = g.NewBalancer(uint64(time.Now().UnixNano()) ^ uint64(st.w.Loop().CPU()+1)<<32)
		st.balancers[g] = b
	}
	st.lastGroup, st.lastBalancer = g, b
	return b
}

// variables are the proxy's: $proxy_host, $proxy_add_x_forwarded_for and the
// $upstream_ ones of the request's tries (upstate.go).
var variables = append(stateVariables, []httpcore.Variable{
	{Name: "proxy_host", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		// The request's exchange, ended too (the log phase), as long as no internal
		// redirect took the request elsewhere since it started: nginx's proxy
		// context, which an internal redirect clears. (Not the location's config: an
		// if block inside the location has its own, and proxies with the
		// location's.)
		ex, _ := r.Ctx(key).(*exchange)
		if ex == nil || ex.seq != r.Seq() || ex.redirects != r.Redirects() {
			return dst
		}
		if ex.lc.Pass.Value != nil {
			return append(dst, ex.vt.hostHeader...)
		}
		if ex.lc.Pass.Unix {
			return append(dst, "localhost"...) // as nginx for a unix-domain socket
		}
		host := ex.lc.Pass.Host
		if !ex.lc.Pass.HTTPS && len(host) > 3 && host[len(host)-3:] == ":80" {
			host = host[:len(host)-3]
		} else if ex.lc.Pass.HTTPS && len(host) > 4 && host[len(host)-4:] == ":443" {
			host = host[:len(host)-4]
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
	{Name: "upstream_http_", Prefix: true, Compiled: useUpstreamFields, Param: func(rest string) string {
		return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
	}, Get: func(dst []byte, r *httpcore.Request, name string) []byte {
		// nginx: the first field called name of the last upstream response head.
		if h := upstreamFields(r); h != nil {
			if v, ok := h.Get(name); ok {
				return append(dst, v...)
			}
		}
		return dst
	}, Found: func(r *httpcore.Request, name string) bool {
		h := upstreamFields(r)
		return h != nil && h.Index(name, 0) >= 0
	}},
	{Name: "upstream_cookie_", Prefix: true, Compiled: useUpstreamFields, Get: func(dst []byte, r *httpcore.Request, name string) []byte {
		// nginx: the value of the cookie name in the upstream's Set-Cookie fields.
		if h := upstreamFields(r); h != nil {
			for i := h.Index("set-cookie", 0); i >= 0; i = h.Index("set-cookie", i+1) {
				if v, ok := setCookieValue(h.Value(i), name); ok {
					return append(dst, v...)
				}
			}
		}
		return dst
	}, Found: func(r *httpcore.Request, name string) bool {
		if h := upstreamFields(r); h != nil {
			for i := h.Index("set-cookie", 0); i >= 0; i = h.Index("set-cookie", i+1) {
				if _, ok := setCookieValue(h.Value(i), name); ok {
					return true
				}
			}
		}
		return false
	}},
	{Name: "upstream_cache_status", Get: upstreamCacheStatus},
	// nginx's $upstream_trailer_NAME reads the trailer fields an upstream module
	// keeps, which only grpc_pass does: its proxy module (proxy_pass, which this
	// one follows) reads a chunked response's trailer and drops it, so the value is
	// never found ("-" in a log, nginx 1.22 measured with an upstream's trailer).
	{Name: "upstream_trailer_", Prefix: true, Get: func(dst []byte, _ *httpcore.Request, _ string) []byte { return dst }},
}...)

// ownVariables are the proxy's variables alone, for the templates of its defaults.
var ownVariables = func() *httpcore.Variables {
	v, err := httpcore.NewVariables(variables)
	if err != nil {
		panic(err)
	}
	return v
}()

// upstreamFieldsUsed: a template names $upstream_http_* or $upstream_cookie_*, so
// the response head is kept for the request once its buffer goes back (keepHead).
// Set when a configuration is compiled and never cleared (one that was refused may
// have set it: the copy costs little).
var upstreamFieldsUsed atomic.Bool

func useUpstreamFields() { upstreamFieldsUsed.Store(true) }

// upstreamFields is the request's last upstream response head's fields (a cache
// hit's entry's), nil when it has none.
func upstreamFields(r *httpcore.Request) *http1.Headers {
	ex, _ := r.Ctx(key).(*exchange)
	if ex == nil || ex.seq != r.Seq() || ex.upHead == nil {
		return nil
	}
	return &ex.resp.Headers
}

// setCookieValue is the value of a Set-Cookie field whose cookie is called name (any
// case, as nginx's ngx_http_parse_set_cookie_lines compares it).
func setCookieValue(field []byte, name string) ([]byte, bool) {
	pair := field
	if i := bytes.IndexByte(pair, ';'); i >= 0 {
		pair = pair[:i]
	}
	eq := bytes.IndexByte(pair, '=')
	if eq < 0 || !http1.EqualFold(bytes.TrimSpace(pair[:eq]), name) {
		return nil, false
	}
	// nginx keeps the spaces before the ";" (measured: "a = b ;" gives "b ").
	return bytes.TrimLeft(pair[eq+1:], " \t"), true
}
