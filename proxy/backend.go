package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/internal/stats"
	"github.com/numaproxy/numaproxy/proxyproto"
	"github.com/numaproxy/numaproxy/tls"
	"github.com/numaproxy/numaproxy/upstream"
)

// exState is where an exchange with the upstream is.
type exState uint8

const (
	exConnecting exState = iota // dialling; the request is queued on the socket
	exHead                      // waiting for or reading the response head
	exBody                      // streaming the response body to the client
	exTunnel                    // after 101: bytes pass both ways
	exDone
)

// Constant output, hoisted so that passing it to Conn methods does not allocate.
var (
	crlf      = []byte("\r\n")
	lastChunk = []byte("0\r\n\r\n")
)

// maxReplay bounds the request body kept to resend it to the next server.
const maxReplay = 64 << 10

// exchange is one request's trip upstream, with its retries: the proxy's content
// handler's state for a request, and the request's Pending while it runs. It lives
// in the request's context slot and is reused by the requests the state serves.
type exchange struct {
	exchangeState
	// resp is kept out of exchangeState, which is zeroed for each request: its
	// field array is 1.8 KB, two thirds of the exchange, and Reset readies it.
	resp http1.Response
	// headCopy holds the upstream's response head once its buffer goes back, when a
	// template names $upstream_http_* or $upstream_cookie_* (the access log reads them
	// at the request's end); kept across requests.
	headCopy []byte
	// gen counts the requests (and internal redirects) the exchange served.
	gen uint32
	// bodyIov and chunkHdr are the chunked body's framing (exchangeState.pieces),
	// out of the state cleared for each request: bodyIov is cleared after each
	// chunk, chunkHdr written before it.
	bodyIov  [8][]byte
	chunkHdr [18]byte
}

// exchangeState is an exchange's state but the response head.
type exchangeState struct {
	r     *httpcore.Request
	lc    *LocConf // the location's proxy config
	st    *loopState
	g     *upstream.Group
	bal   *upstream.Balancer
	state exState
	vt    *varTarget // proxy_pass with variables; kept across requests
	// waitingFor is the live group whose first lookups the request waits for.
	waitingFor *liveGroup

	peer      *upstream.Peer
	sticky    *upstream.Peer // the server the request's sticky cookie names
	ps        *PeerStats     // peer's figures in this loop; nil when nothing reports them
	conn      eventloop.Conn
	reused    bool      // conn came from the keep-alive cache
	connReqs  int       // requests conn carried before this one
	idle      *idleList // the keep-alive cache's list for peer, if takeIdle saw one
	tried     upstream.Tried
	tries     int
	firstTry  time.Duration     // the loop's Clock when the exchange began
	tryStart  time.Duration     // the loop's Clock when the current try began
	head      []byte            // pooled: the request head, kept for a retry
	replay    []byte            // pooled: the body sent so far (or a body read whole), kept for a retry
	lent      bool              // replay is the request's body read whole, lent by the core (TakeBody)
	noReplay  bool              // the body outgrew maxReplay: no retry once it started
	file      httpcore.BodyFile // a body read whole into a temp file, sent from it on each try
	fileSent  int64             // bytes of file sent on the current connection
	bodySent  bool              // body bytes went to the current connection
	reqDone   bool              // the whole request has been read from the client
	upgrade   bool              // the request asks for an upgrade and the head carries Upgrade
	connClose bool              // the head asks the upstream to close after the response
	// bodyWithheld: proxy_pass_request_body off kept a body from the upstream, which
	// may still wait for the length it was told: its connection is not reused.
	bodyWithheld bool

	rbuf []byte // pooled: the response head as it arrives
	// rbufLoaned: rbuf is the loop's read buffer, where a whole head came
	// (headInPlace); valid only until OnData returns, never put back.
	rbufLoaned bool
	framing    http1.BodyFraming
	rlen       http1.LengthBody
	rchunks    http1.ChunkedDecoder
	gotBytes   bool // any response byte arrived on the current connection
	// upHead is the upstream response head resp's fields lie in (rbuf, a cached
	// entry's, or headCopy), for $upstream_http_*; nil when there is none.
	upHead []byte

	ck *cacheCtx // proxy_cache's state (cache.go); kept across requests

	// The response spilled to a temporary file for a slow client (spill.go).
	spill         responseSpill
	spillPending  []byte // bytes the file could not take, sent after it
	respBuffered  bool   // proxy_buffering (or X-Accel-Buffering) is on for this response
	clientBlocked bool   // between ClientBlocked and ClientWritable
	upstreamDone  bool   // the upstream part of a spilled response ended

	status       int // the upstream's status, for $upstream_status
	responseTime time.Duration
	// states are the request's tries, for $upstream_* (upstate.go); seq is the
	// request's (Request.Seq) they belong to; redirects is the request's internal
	// redirects when the exchange started (Request.Redirects), for $proxy_host.
	states    []upState
	noState   upState
	seq       uint64
	redirects int

	buffered    bool // the request body is read whole before the exchange starts
	chunkedBody bool // the request body is streamed chunked, framed afresh

	// A chunked request body streamed upstream is framed afresh: data pieces of one
	// client read gather into one chunk of our own (exchange.bodyIov[1:1+pieces]).
	pieces  int
	pending int // data bytes in the pieces
}

// backendHandler is the eventloop.Handler of upstream connections; it hands events to
// the exchange or, for cached idle connections, to the cache.
type backendHandler struct{}

// exchangeOf returns the exchange c serves, or nil (after closing c) when c is a
// stale connection of an exchange that moved on: exchanges are reused.
func exchangeOf(c eventloop.Conn) *exchange {
	ex, ok := c.Context().(*exchange)
	if !ok {
		return nil
	}
	if ex.conn != c {
		c.SetContext(nil)
		c.Close()
		c.Close()
		return nil
	}
	return ex
}

func (b *backendHandler) OnOpen(c eventloop.Conn) {
	if ex := exchangeOf(c); ex != nil {
		ex.connected()
	}
}

func (b *backendHandler) OnData(c eventloop.Conn, data []byte) {
	switch x := c.Context().(type) {
	case *exchange:
		if exchangeOf(c) != nil {
			x.onData(data)
		}
	case *idleConn:
		x.drop() // an idle upstream connection must not talk: close it
	}
}

func (b *backendHandler) OnWriteBlocked(c eventloop.Conn) {
	if ex := exchangeOf(c); ex != nil {
		c.SetTimeout(ex.lc.SendTimeout)
		ex.r.PauseBody() // the upstream is slower than the client's upload
	}
}

func (b *backendHandler) OnWritable(c eventloop.Conn) {
	if ex := exchangeOf(c); ex != nil {
		ex.armRead()
		if !ex.sendFile() {
			return
		}
		ex.r.ResumeBody()
	}
}

func (b *backendHandler) OnTimeout(c eventloop.Conn) {
	switch x := c.Context().(type) {
	case *exchange:
		if exchangeOf(c) != nil {
			x.onTimeout()
		}
	case *idleConn:
		x.drop()
	}
}

func (b *backendHandler) OnClose(c eventloop.Conn, err error) {
	switch x := c.Context().(type) {
	case *exchange:
		if x.conn == c {
			x.onClose(err)
		}
	case *idleConn:
		x.forget()
	}
	// Neither the exchange (onClose let go of it) nor the cache holds c now: the
	// loop may reuse its memory for the next dial.
	c.Loop().Release(c)
}

// now is the loop's time, read once per batch of events (eventloop.Loop.Now).
func (ex *exchange) now() time.Time { return ex.st.w.Loop().Now() }

// clock is now as the loop's monotonic clock, for the exchange's durations.
func (ex *exchange) clock() time.Duration { return ex.st.w.Loop().Clock() }

// connect picks a server and opens (or reuses) a connection to it, queuing the
// request on it. It reports false when it answered the client with an error.
func (ex *exchange) connect() bool {
	r := ex.r
	for {
		now := ex.now()
		var key []byte
		if hk := ex.snapState().hashKeys; len(hk) > 0 { // only hash groups have one
			if t := hk[ex.g.Origin()]; t != nil {
				key = t.Append(ex.st.scratch[:0], r)
			}
		}
		var p *upstream.Peer
		if st := ex.g.Sticky; st != nil && ex.tries == 0 {
			// sticky cookie: the first try goes to the cookie's server if it is
			// available; retries, and clients without it, to the method's pick.
			if ex.sticky = ex.stickyPeer(st); ex.sticky != nil && ex.bal.PickPeer(ex.sticky, now, &ex.tried) {
				p = ex.sticky
			}
		}
		if p == nil {
			p = ex.bal.Pick(now, key, r.RemoteAddr().Addr(), &ex.tried)
		}
		if p == nil {
			ex.st.log.Error("no live upstreams while connecting to upstream", "upstream", ex.g.Name, "client", ex.r.RemoteAddr().String())
			if ex.staleFor(NextError) {
				return false
			}
			ex.end()
			r.Fail(502)
			return false
		}
		clock := ex.clock()
		ex.beginTry(p, clock)
		ex.peer, ex.tries, ex.tryStart = p, ex.tries+1, clock
		ex.gotBytes, ex.bodySent = false, false
		ex.ps = ex.st.peerStats(r, ex.g, p)
		if ex.ps != nil {
			ex.ps.Tries++
		}
		// A connection that carried a client's PROXY header is that client's alone:
		// none is kept idle, and none is taken.
		if idle, reqs := ex.takeIdle(p.Key()); idle != nil {
			if tls.Same(idle, ex.lc.Pass.TLS) {
				if ex.ps != nil {
					ex.ps.Reused++
				}
				ex.conn, ex.reused, ex.connReqs = idle, true, reqs
				idle.SetContext(ex)
				ex.send()
				return ex.connected()
			}
			idle.SetContext(nil) // another location's TLS (or none) to the same server
			idle.Close()
		}
		var conn eventloop.Conn
		var err error
		if cc := ex.lc.Pass.TLS; cc != nil {
			conn, err = ex.st.tls.Dial(ex.st.w.Loop(), p.Addr, ex.dialOptions(p.Unix), cc, ex)
		} else {
			conn, err = ex.st.w.Loop().DialWith(p.Addr, ex.dialOptions(p.Unix), &ex.st.backends, ex)
		}
		var setup *eventloop.SetupError
		if err != nil && !localDialError(err) {
			setup = asSetupError(err)
		}
		if err != nil && (localDialError(err) || setup != nil) {
			// This host is out of descriptors or memory, or could not set the socket
			// up (proxy_bind): the server is not at fault (its state stays as it is)
			// and the next one would fare no better. nginx answers 500 to a failed
			// socket(), setsockopt() or bind().
			ex.bal.Release(p)
			level, msg := errorlog.LevelAlert, "socket() failed "+errorlog.Errno(err)+" while connecting to upstream"
			switch {
			case setup != nil && setup.Op != "socket":
				msg = setup.Op + " failed " + errorlog.Errno(err) + " while connecting to upstream"
				if strings.HasPrefix(setup.Op, "bind") {
					level = errorlog.LevelCrit
				}
			case !errors.Is(err, unix.EMFILE) && !errors.Is(err, unix.ENFILE):
				msg = "upstream connection failed on this host " + errorlog.Errno(err) + " while connecting to upstream"
			}
			ex.st.log.Log(context.Background(), level, msg, "upstream", p.String(), "client", ex.r.RemoteAddr().String())
			ex.end()
			r.Fail(500)
			return false
		}
		if err != nil {
			ex.try().status = 502
			ex.bal.Done(p, now, true)
			ex.st.log.Error("connect() to upstream failed", "upstream", p.String(), "error", err.Error())
			if ps := ex.ps; ps != nil {
				ps.ConnectFailures++
				ps.Failures++
			}
			if ex.canRetry(NextError) {
				ex.countRetry()
				continue
			}
			if ex.staleFor(NextError) {
				return false
			}
			ex.end()
			r.Fail(502)
			return false
		}
		ex.conn, ex.reused, ex.connReqs = conn, false, 0
		ex.state = exConnecting
		if ex.lc.ProxyProtocol {
			// proxy_protocol: the client's address and the one it reached, before
			// anything else on the connection (nginx's stream proxy_protocol), in
			// clear before an https upstream's handshake.
			w := conn
			if tc, ok := conn.(*tls.Conn); ok {
				w = tc.Raw()
			}
			w.Write(proxyproto.AppendV1(ex.st.scratch[:0], r.RemoteAddr(), r.LocalAddr()))
		}
		ex.send()
		return true
	}
}

// takeIdle is a kept-alive connection to k, unless proxy_protocol is on.
func (ex *exchange) takeIdle(k upstream.PeerKey) (eventloop.Conn, int) {
	ex.idle = nil
	if ex.lc.ProxyProtocol {
		return nil, 0
	}
	conn, reqs, l := ex.st.takeIdle(k)
	ex.idle = l
	return conn, reqs
}

// localDialError reports an error of this host's own resources (descriptors, memory,
// socket buffers) in setting up an upstream connection.
// asSetupError is errors.As for a *SetupError, in a function of its own so that
// the target escapes only when a dial failed, not on every dial.
func asSetupError(err error) *eventloop.SetupError {
	var setup *eventloop.SetupError
	errors.As(err, &setup)
	return setup
}

func localDialError(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) ||
		errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM)
}

// send queues the head and whatever body was already sent on the current connection;
// a body in a temp file follows once the connection is up (connected).
func (ex *exchange) send() {
	ex.conn.Write(ex.head)
	ex.try().sent += int64(len(ex.head) + len(ex.replay))
	if len(ex.replay) > 0 {
		ex.conn.Write(ex.replay)
		ex.bodySent = true
	}
	ex.fileSent = 0
}

// connected: the connection is up (or reused); the response is awaited. It reports
// false when sending the body failed and the client was answered.
func (ex *exchange) connected() bool {
	ex.state = exHead
	ex.connectedTry()
	if !ex.sendFile() {
		return false
	}
	ex.armRead()
	return true
}

// armRead sets the upstream timer for the phase the exchange is in: as nginx,
// proxy_read_timeout runs from the end of the request (and between reads after
// it); while the request is still being sent only proxy_send_timeout applies, armed
// when writing blocks (the client's client_body_timeout covers a stalled upload).
func (ex *exchange) armRead() {
	if ex.conn == nil || ex.state == exConnecting || ex.state == exDone {
		return // a connect keeps its proxy_connect_timeout
	}
	if ex.filePending() {
		return // proxy_send_timeout, armed when writing blocks
	}
	if ex.reqDone || ex.gotBytes || ex.state != exHead {
		ex.conn.SetTimeout(ex.lc.ReadTimeout)
	} else {
		ex.conn.SetTimeout(0)
	}
}

// sendBody passes request body bytes on, keeping a copy for a retry while it fits.
func (ex *exchange) sendBody(p []byte) {
	if len(p) == 0 || ex.conn == nil || !ex.lc.PassRequestBody {
		return
	}
	ex.conn.Write(p)
	ex.try().sent += int64(len(p))
	ex.bodySent = true
	ex.keepReplay(p)
}

// keepReplay keeps a copy of body bytes sent, for a retry, while they fit.
func (ex *exchange) keepReplay(p []byte) {
	if ex.noReplay {
		return
	}
	pool := ex.st.pool()
	if len(ex.replay)+len(p) > maxReplay {
		ex.noReplay = true
		if ex.replay != nil {
			pool.Put(ex.replay[:cap(ex.replay)])
			ex.replay = nil
		}
		return
	}
	if ex.replay == nil {
		ex.replay = pool.Get(maxReplay)[:0]
	}
	ex.replay = append(ex.replay, p...)
}

// bodyChunk takes data of a chunked body streamed upstream; it goes in a chunk of our
// own framing (flushChunk), without the client's extensions.
func (ex *exchange) bodyChunk(p []byte) {
	if ex.pieces == len(ex.bodyIov)-3 {
		ex.flushChunk(false)
	}
	ex.pieces++
	ex.bodyIov[ex.pieces] = p
	ex.pending += len(p)
}

// flushChunk sends the data gathered by bodyChunk as one chunk, in one writev, with
// the last-chunk after it when last (no trailer fields: nginx passes none either).
func (ex *exchange) flushChunk(last bool) {
	iov := ex.bodyIov[:0]
	if ex.pieces > 0 {
		iov = ex.bodyIov[:1+ex.pieces]
		iov[0] = http1.AppendChunkHeader(ex.chunkHdr[:0], ex.pending)
		iov = append(iov, crlf)
	}
	if last {
		iov = append(iov, lastChunk)
	}
	ex.sendBodyv(iov)
	clear(ex.bodyIov[:])
	ex.pieces, ex.pending = 0, 0
}

// sendBodyv is sendBody for several pieces, written with one writev.
func (ex *exchange) sendBodyv(iov [][]byte) {
	if len(iov) == 0 || ex.conn == nil {
		return
	}
	ex.conn.Writev(iov)
	ex.bodySent = true
	for _, p := range iov {
		ex.try().sent += int64(len(p))
		ex.keepReplay(p)
	}
}

// requestSent: the client's whole request was read and passed on.
func (ex *exchange) requestSent() {
	ex.reqDone = true
	ex.armRead()
}

// canRetry decides whether the request may go to the next server after a failure of
// kind cond, nginx's proxy_next_upstream rules.
func (ex *exchange) canRetry(cond NextUpstream) bool {
	lcf := ex.lc
	switch {
	case ex.r.HeaderSent(): // part of a response reached the client
		return false
	case lcf.NextUpstream&cond == 0:
		return false
	case ex.bodySent && ex.noReplay:
		return false
	case ex.gotBytes || ex.bodySent || ex.state != exConnecting:
		// The request reached the server: only idempotent ones go again.
		if !idempotent(ex.r) && lcf.NextUpstream&NextNonIdempotent == 0 {
			return false
		}
	}
	if lcf.NextUpstreamTries > 0 && ex.tries >= lcf.NextUpstreamTries {
		return false
	}
	if ex.tries >= ex.g.Tries() {
		// As nginx's peer.tries: every server not marked down had its try. The
		// failure's own status (504 after a timeout) or the upstream's answer stands.
		return false
	}
	if lcf.NextUpstreamTimeout > 0 && ex.clock()-ex.firstTry >= lcf.NextUpstreamTimeout {
		return false
	}
	return true
}

// idempotent is nginx's test: everything but POST, LOCK and PATCH.
func idempotent(r *httpcore.Request) bool {
	m := string(r.Head().Method())
	return m != "POST" && m != "LOCK" && m != "PATCH"
}

// fail handles a failed try of kind cond: the next server when allowed, else an error
// status (or closing the client if the response already started).
func (ex *exchange) fail(cond NextUpstream, status int, why string) {
	now := ex.now()
	ex.try().status = status
	ex.st.log.Error(why, "upstream", ex.peer.String(), "client", ex.r.RemoteAddr().String())
	// A cached connection that failed before any reply says nothing about the server.
	countsAsFailure := !(ex.reused && !ex.gotBytes && cond == NextError)
	if countsAsFailure {
		ex.bal.Done(ex.peer, now, true)
		if ex.ps != nil {
			ex.ps.Failures++
		}
	} else {
		ex.bal.Release(ex.peer)
	}
	ex.dropConn()
	if !countsAsFailure {
		// The server itself was not at fault: this try does not count (nginx's
		// tries++ for a cached connection) and the server may be picked again.
		ex.tries--
		ex.tried.Reset()
	}
	if ex.canRetry(cond) {
		ex.countRetry()
		ex.resetResponse()
		ex.connect()
		return
	}
	if ex.staleFor(cond) {
		return
	}
	r := ex.r
	ex.end()
	r.Fail(status) // closes the client if part of a response went out
}

// countRetry counts the request passing on from the current server.
func (ex *exchange) countRetry() {
	if ex.ps != nil {
		ex.ps.Retries++
	}
}

// dropConn closes the current upstream connection; it is not cached.
func (ex *exchange) dropConn() {
	if ex.conn != nil {
		ex.conn.SetContext(nil)
		ex.conn.Close()
		ex.conn.Close() // drop what is queued
		ex.conn = nil
	}
}

// resetResponse forgets a response head in progress, for the next try.
func (ex *exchange) resetResponse() {
	if ex.rbufLoaned {
		ex.rbuf, ex.rbufLoaned = nil, false
	}
	if ex.rbuf != nil {
		ex.rbuf = ex.rbuf[:0]
	}
	ex.resp.Reset()
	ex.resp.HeadRequest = ex.headSent()
	ex.upHead = nil // as nginx, a next try's fields replace the last one's
}

func (ex *exchange) onTimeout() {
	switch ex.state {
	case exHead:
		ex.fail(NextTimeout, 504, "upstream timed out while reading response header from upstream")
	default:
		// Part of the response went out: as nginx, the server is not marked failed
		// (only errors before the response head count) and the client is closed.
		what := "upstream timed out while reading upstream"
		if ex.state == exTunnel {
			what = "upstream timed out while proxying upgraded connection"
		}
		ex.st.log.Error(what, "upstream", ex.peer.String(), "client", ex.r.RemoteAddr().String())
		ex.bal.Done(ex.peer, ex.now(), false)
		ex.closeClient()
	}
}

// closeClient ends the exchange, then the client connection: the response cannot be
// finished.
func (ex *exchange) closeClient() {
	r := ex.r
	ex.end()
	r.Abort()
}

func (ex *exchange) onClose(err error) {
	ex.conn = nil
	switch ex.state {
	case exConnecting:
		if ex.ps != nil {
			ex.ps.ConnectFailures++
		}
		if errors.Is(err, eventloop.ErrDialTimeout) {
			ex.fail(NextTimeout, 504, "upstream timed out while connecting to upstream")
		} else {
			ex.fail(NextError, 502, "connect() to upstream failed: "+errString(err))
		}
	case exHead:
		ex.fail(NextError, 502, "upstream prematurely closed connection while reading response header from upstream")
	case exBody:
		if ex.framing == http1.BodyUntilClose && errors.Is(err, io.EOF) {
			ex.complete(false)
			return
		}
		// The response is incomplete: the client must not take it as whole.
		ex.st.log.Error("upstream prematurely closed connection while reading upstream", "upstream", ex.peer.String())
		ex.bal.Done(ex.peer, ex.now(), false)
		ex.closeClient()
	case exTunnel:
		ex.bal.Done(ex.peer, ex.now(), false)
		ex.closeClient()
	}
}

func errString(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}

// onData takes response bytes from the upstream.
func (ex *exchange) onData(data []byte) {
	ex.gotBytes = true
	ex.try().received += int64(len(data))
	conn, gen := ex.conn, ex.gen
	switch ex.state {
	case exConnecting:
		ex.state = exHead
		ex.takeHead(data)
		return
	case exHead:
		ex.takeHead(data)
	case exBody:
		ex.takeBody(data)
	case exTunnel:
		ex.armRead()
		ex.r.TunnelWrite(data)
		return
	}
	// proxy_read_timeout runs from this read, armed after the bytes are taken:
	// when they end the response, the connection's timer is set once (cached or
	// closed) instead of twice. Not for a request that moved on (a retry, the next
	// one) nor a tunnel, whose own writes may have set proxy_send_timeout.
	if ex.conn == conn && ex.gen == gen && (ex.state == exHead || ex.state == exBody) {
		ex.armRead()
	}
}

// takeHead accumulates and parses the response head, then starts the response.
func (ex *exchange) takeHead(data []byte) {
	if ex.rbuf == nil && ex.ck == nil && ex.headInPlace(data) {
		return
	}
	pool := ex.st.pool()
	if ex.rbuf == nil {
		ex.rbuf = pool.Get(max(4096, len(data)))[:0]
	}
	if len(ex.rbuf)+len(data) > cap(ex.rbuf) {
		bigger := pool.Get(len(ex.rbuf) + len(data))[:len(ex.rbuf)]
		copy(bigger, ex.rbuf)
		pool.Put(ex.rbuf[:cap(ex.rbuf)])
		ex.rbuf = bigger
	}
	ex.rbuf = append(ex.rbuf, data...)
	limit := ex.lc.BufferSize
	for {
		// As nginx reads a head into a buffer of proxy_buffer_size: the parser sees
		// at most that much, and a head that does not end within it is too big
		// (its own limits are set past the view, so they never fire first).
		view := ex.rbuf[:min(len(ex.rbuf), limit)]
		ex.resp.Limits = http1.Limits{MaxLineSize: limit + 1, MaxHeadSize: limit + 1}
		n, err := ex.resp.Parse(view)
		if errors.Is(err, http1.ErrNeedMore) {
			if len(view) == limit {
				ex.fail(NextInvalidHeader, 502, "upstream sent too big header")
			}
			return
		}
		if err != nil {
			ex.fail(NextInvalidHeader, 502, "upstream sent invalid header: "+err.Error())
			return
		}
		if ex.resp.Interim() {
			// 100 Continue and other interim replies are not passed on, as nginx.
			rest := copy(ex.rbuf, ex.rbuf[n:])
			ex.rbuf = ex.rbuf[:rest]
			ex.resp.Reset()
			ex.resp.HeadRequest = ex.headSent()
			if rest == 0 {
				return
			}
			continue
		}
		ex.startResponse(n)
		return
	}
}

// headInPlace parses a head that begins data, the first bytes of the response,
// where they lie in the loop's read buffer: when the whole head is there (the
// common case) the response starts without copying it into a pool buffer. It
// reports false when the head is not whole, or is interim: takeHead copies data
// and the parse goes on from where it stopped (the parser keeps offsets).
func (ex *exchange) headInPlace(data []byte) bool {
	limit := ex.lc.BufferSize
	ex.resp.Limits = http1.Limits{MaxLineSize: limit + 1, MaxHeadSize: limit + 1}
	n, err := ex.resp.Parse(data[:min(len(data), limit)])
	switch {
	case errors.Is(err, http1.ErrNeedMore):
		return false
	case err != nil:
		ex.fail(NextInvalidHeader, 502, "upstream sent invalid header: "+err.Error())
		return true
	case ex.resp.Interim():
		return false
	}
	ex.rbuf, ex.rbufLoaned = data, true
	ex.startResponse(n)
	if ex.rbufLoaned && ex.rbuf != nil {
		// Something still holds the head after this read: it moves to a pool buffer.
		b := append(ex.st.pool().Get(max(4096, len(ex.rbuf)))[:0], ex.rbuf...)
		ex.rbuf, ex.rbufLoaned = b, false
		ex.resp.Parse(b[:min(len(b), limit)]) // parsed already: points the fields at b
		if ex.upHead != nil {
			ex.upHead = b[:len(ex.upHead)]
		}
	}
	return true
}

// startResponse decides what to do with a complete response head.
func (ex *exchange) startResponse(headLen int) {
	r := ex.r
	code := ex.resp.StatusCode()
	ex.status = code
	ex.responseTime = ex.clock() - ex.tryStart
	if ps := ex.ps; ps != nil {
		ps.Responses[stats.Class(code)]++
		ps.ResponseTime.Observe(ex.responseTime)
	}
	try := ex.try()
	try.status, try.header, try.headLen = code, ex.responseTime, int64(headLen)
	ex.upHead = ex.rbuf[:headLen]
	if code == 101 && !ex.upgrade {
		ex.fail(NextInvalidHeader, 502, "upstream sent 101 to a request that did not ask for an upgrade")
		return
	}
	if cond := ex.lc.NextUpstream.ForStatus(code); cond != 0 && ex.canRetry(cond) {
		failure := code != 403 && code != 404
		ex.bal.Done(ex.peer, ex.now(), failure)
		if ex.ps != nil && failure {
			ex.ps.Failures++
		}
		ex.countRetry()
		ex.dropConn()
		ex.resetResponse()
		if failure {
			ex.st.log.Warn("upstream answered with a status proxy_next_upstream retries", "upstream", ex.peer.String(), "status", code)
		}
		ex.connect()
		return
	}
	if code >= 300 && ex.lc.InterceptErrors && r.CoreConf().HasErrorPage(code) {
		ex.intercept(code, headLen)
		return
	}
	if code != 101 && ex.lc.IgnoreHeaders&IgnoreXAccelRedirect == 0 {
		if uri, ok := ex.resp.Headers.Get("x-accel-redirect"); ok {
			ex.accelRedirect(uri, headLen)
			return
		}
	}
	ex.try().passed = true
	if ex.ck != nil && ex.cacheResponse(code, headLen) {
		return // an expired entry stood in for the response
	}
	ex.responseHeader()
	if ex.ck != nil && ex.ck.w.Active() {
		if !ex.respBuffered {
			ex.ck.w.Abort() // as nginx, an unbuffered response is not cached
		} else if ex.notModified(code) == 304 {
			// The body is stored, the client gets none.
			h := r.Header()
			h.Status, h.Reason = 304, nil
		}
	}
	r.SendHeader()
	rest := ex.rbuf[headLen:]
	if code == 101 {
		ex.state = exTunnel
		// What the client sent after its upgrade request goes through now.
		if early := r.Tunnel(); len(early) > 0 {
			ex.conn.Write(early)
		}
		if len(rest) > 0 {
			r.TunnelWrite(rest)
		}
		ex.releaseResponseBuffer()
		return
	}
	ex.state = exBody
	ex.framing = ex.resp.Framing()
	switch ex.framing {
	case http1.BodyNone:
		ex.releaseResponseBuffer()
		ex.complete(len(rest) == 0)
		return
	case http1.BodyContentLength:
		ex.rlen = http1.NewLengthBody(ex.resp.ContentLength())
	case http1.BodyChunked:
		ex.rchunks.Reset()
	}
	// rest aliases rbuf; pass it on before the buffer goes back.
	ex.takeBody(rest)
	if ex.state == exBody {
		r.Flush() // no body bytes came with the head
	}
	ex.releaseResponseBuffer()
}

func (ex *exchange) releaseResponseBuffer() {
	if ex.rbuf != nil && ex.upHead != nil {
		ex.keepHead()
	}
	if ex.rbufLoaned {
		ex.rbuf, ex.rbufLoaned = nil, false
	}
	if ex.rbuf != nil {
		ex.st.pool().Put(ex.rbuf[:cap(ex.rbuf)])
		ex.rbuf = nil
	}
}

// keepHead copies the response head out of the buffer about to go back when
// $upstream_http_* or $upstream_cookie_* are used; else its fields are gone.
func (ex *exchange) keepHead() {
	if !upstreamFieldsUsed.Load() {
		ex.upHead = nil
		return
	}
	ex.headCopy = append(ex.headCopy[:0], ex.upHead...)
	ex.upHead = ex.headCopy
	ex.resp.Parse(ex.upHead) // parsed already: points the fields at the copy
}

// takeBody passes response body bytes to the client; the core frames them for it.
func (ex *exchange) takeBody(data []byte) {
	if ex.state != exBody {
		return
	}
	switch ex.framing {
	case http1.BodyContentLength:
		part := ex.rlen.Take(data)
		if len(part) > 0 {
			ex.deliver(part)
		}
		if ex.rlen.Done() {
			ex.complete(len(part) == len(data))
		}
	case http1.BodyChunked:
		for len(data) > 0 && ex.state == exBody {
			n, chunk, err := ex.rchunks.Decode(data)
			if err != nil {
				// As nginx, an error after the response head does not mark the server
				// failed.
				ex.st.log.Error("upstream sent invalid chunked response", "upstream", ex.peer.String(), "error", err.Error())
				ex.bal.Done(ex.peer, ex.now(), false)
				ex.closeClient()
				return
			}
			if len(chunk) > 0 {
				ex.deliver(chunk)
			}
			data = data[n:]
			if ex.rchunks.Done() {
				ex.complete(len(data) == 0)
				return
			}
		}
	case http1.BodyUntilClose:
		if len(data) > 0 {
			ex.deliver(data)
		}
	}
}

// intercept replaces an upstream response by the location's error page for its
// status (proxy_intercept_errors), as nginx's ngx_http_upstream_intercept_errors: a
// 401 passes its WWW-Authenticate fields on to the page, the rest of the response is
// dropped, and the connection is kept only if the response has no body.
func (ex *exchange) intercept(code, headLen int) {
	r := ex.r
	if code == 401 {
		for i := 0; i < ex.resp.Headers.Len(); i++ {
			if name := ex.resp.Headers.Name(i); http1.EqualFold(name, "www-authenticate") {
				r.Carry(name, ex.resp.Headers.Value(i))
			}
		}
	}
	ex.bal.Done(ex.peer, ex.now(), false)
	ex.keepClean(headLen)
	ex.end()
	r.SendStatus(code)
}

// keepClean caches the upstream connection of a response that is dropped whole
// before its body: it can carry another request if the response has none.
func (ex *exchange) keepClean(headLen int) {
	if ex.cacheable(ex.resp.Framing() == http1.BodyNone && headLen == len(ex.rbuf)) {
		conn := ex.conn
		ex.conn = nil
		ex.st.cacheIdle(conn, ex.peer.Key(), ex.g, ex.connReqs+1, ex.idle)
	}
}

// accelRedirect serves the request again from the URI or @named location of an
// upstream's X-Accel-Redirect, as nginx: the response's Content-Type, Set-Cookie
// (rewritten by proxy_cookie_*), Content-Disposition, Cache-Control, Expires and
// Accept-Ranges pass on to the new response, the rest of it is dropped (the
// connection kept if it has no body), the request goes on as GET (HEAD stays HEAD);
// a URI that is not safe (a ".." segment, a NUL, once decoded) is 404.
func (ex *exchange) accelRedirect(uri []byte, headLen int) {
	r := ex.r
	for i := 0; i < ex.resp.Headers.Len(); i++ {
		name, value := ex.resp.Headers.Name(i), ex.resp.Headers.Value(i)
		switch {
		case http1.EqualFold(name, "content-type"):
			r.SetCarriedType(value)
		case http1.EqualFold(name, "set-cookie") && (ex.lc.CookieDomains != nil || ex.lc.CookiePaths != nil):
			v := httpcore.EscapeControls(ex.appendCookie(ex.st.scratch[:0], value), 0)
			r.Carry(name, v)
			ex.st.scratch = v[:0]
		case http1.EqualFold(name, "set-cookie"), http1.EqualFold(name, "content-disposition"), http1.EqualFold(name, "cache-control"),
			http1.EqualFold(name, "expires"), http1.EqualFold(name, "accept-ranges"):
			r.Carry(name, value)
		}
	}
	ex.bal.Done(ex.peer, ex.now(), false)
	ex.keepClean(headLen)
	if r.ReadingBody() {
		r.DisableKeepAlive() // the rest of the upload is not read
	}
	// The body went to this upstream and is not sent again: a named location gets
	// the request as GET too (nginx keeps the method there, and resends the body it
	// buffered).
	r.ForceGET()
	if len(uri) > 0 && uri[0] == '@' {
		target := string(uri)
		ex.end()
		r.InternalRedirect(target)
		return
	}
	path, args, ok := unsafeURI(uri, ex.st.scratch[:0])
	if ok {
		r.SetURI(path, args) // before end: args lie in the response buffer
	}
	ex.end()
	if !ok {
		ex.st.log.Error("upstream sent an unsafe X-Accel-Redirect \""+string(httpcore.EscapeControls(append([]byte(nil), uri...), 0))+"\"", "client", r.RemoteAddr().String())
		r.SendStatus(404)
		return
	}
	r.Rerun()
}

// unsafeURI is nginx's ngx_http_parse_unsafe_uri: the path of uri (up to "?",
// percent-decoded into dst) and its arguments; ok is false for an empty path, a NUL
// or a ".." segment.
func unsafeURI(uri, dst []byte) (path, args []byte, ok bool) {
	raw := uri
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		raw, args = uri[:i], uri[i+1:]
	}
	if len(raw) == 0 {
		return nil, nil, false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] == '%' && i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]) {
			dst = append(dst, unhex(raw[i+1])<<4|unhex(raw[i+2]))
			i += 2
			continue
		}
		dst = append(dst, raw[i])
	}
	for _, p := range [][]byte{raw, dst} {
		if bytes.IndexByte(p, 0) >= 0 || bytes.HasPrefix(p, []byte("../")) || bytes.Equal(p, []byte("..")) ||
			bytes.Contains(p, []byte("/../")) || bytes.HasSuffix(p, []byte("/..")) {
			return nil, nil, false
		}
	}
	return dst, args, true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// cacheable reports whether the upstream connection can carry another request now
// that its response ended (clean: no stray bytes followed it).
func (ex *exchange) cacheable(clean bool) bool {
	return ex.conn != nil && clean && ex.reqDone && !ex.filePending() && ex.resp.KeepAlive() && !ex.connClose && ex.g.Keepalive > 0 &&
		!ex.bodyWithheld && ex.keepsConn(ex.peer.Key()) && !ex.lc.ProxyProtocol
}

// complete ends a response that arrived whole: the upstream connection is cached
// when it can carry another request (clean says no stray bytes followed), and the
// client goes on.
func (ex *exchange) complete(clean bool) {
	r := ex.r
	if ex.ck != nil {
		ex.cacheCommit()
	}
	spilling := ex.spill.active
	if !spilling {
		r.SendBody(nil, true) // the end of the body (and the head, if it still waits)
	}
	ex.bal.Done(ex.peer, ex.now(), false)
	if conn := ex.conn; conn != nil {
		keep := ex.cacheable(clean)
		ex.conn = nil
		if keep {
			ex.st.cacheIdle(conn, ex.peer.Key(), ex.g, ex.connReqs+1, ex.idle)
		} else {
			conn.SetContext(nil)
			conn.Close()
			// The response is whole: request bytes the server has not read (it
			// answered early) are dropped, else a server that never reads them
			// would hold the connection open with no timer left to end it.
			conn.Close()
		}
	}
	if spilling {
		// The upstream is done with; the client goes on from the file.
		ex.upstreamDone = true
		ex.drainSpill()
		return
	}
	ex.end()
	if r.ReadingBody() {
		// The server answered before the upload ended: the rest of it is not read.
		r.DisableKeepAlive()
	}
	r.Finish()
}

// ClientGone keeps the exchange going after its client closed, under
// proxy_ignore_client_abort on, once the whole request was passed on: the response
// is read to its end (and dropped) so that the upstream connection can be kept
// alive, and the request is released when the exchange ends (Finish).
func (ex *exchange) ClientGone() bool {
	if !ex.lc.IgnoreClientAbort || !ex.reqDone {
		return false
	}
	return ex.state == exConnecting || ex.state == exHead || ex.state == exBody
}

// Abort ends the exchange without a response (the client went away or failed); the
// core has detached it from the request.
func (ex *exchange) Abort() {
	if ex.peer != nil && ex.conn != nil {
		ex.bal.Done(ex.peer, ex.now(), false)
	}
	ex.end()
}

// end is the one way out of an exchange: its upstream connection, if still held, is
// closed (not cached: it is not at a clean boundary), its buffers go back and it
// detaches from the request. The exchange lives in the request's state, which the
// core may give back (and another connection take) once it is detached, so the
// exchange touches nothing of the request after end; callers that go on to answer
// keep the request in a local first.
func (ex *exchange) end() {
	ex.endTry(ex.clock())
	ex.state = exDone
	if ex.ck != nil {
		ex.cacheEnd()
	}
	if ex.vt != nil {
		ex.vt.query.Cancel()
	}
	if ex.waitingFor != nil {
		ex.stopWaiting()
	}
	ex.dropConn()
	ex.release()
	if ex.r.Pending() == httpcore.Pending(ex) {
		ex.r.SetPending(nil)
	}
}

// ClientBlocked: the client reads slower than the upstream sends.
func (ex *exchange) ClientBlocked() {
	ex.clientBlocked = true
	if ex.spillable() && !ex.spill.full {
		ex.spill.active = true // the upstream goes on, into the file
		return
	}
	if ex.conn != nil && (ex.state == exBody || ex.state == exTunnel) {
		ex.conn.PauseRead()
	}
}

// ClientWritable: the client caught up.
func (ex *exchange) ClientWritable() {
	ex.clientBlocked = false
	if ex.spill.active {
		ex.drainSpill()
		return
	}
	if ex.conn != nil && (ex.state == exBody || ex.state == exTunnel) {
		ex.conn.ResumeRead()
	}
}

// TunnelData passes upgraded client bytes upstream.
func (ex *exchange) TunnelData(data []byte) {
	if ex.conn != nil {
		ex.conn.Write(data)
	}
}

// release returns the exchange's buffers.
func (ex *exchange) release() {
	pool := ex.st.pool()
	putBuffer(pool, &ex.head)
	if ex.lent {
		ex.replay, ex.lent = nil, false // the core's, for $request_body until the request ends
	}
	putBuffer(pool, &ex.replay)
	ex.releaseResponseBuffer()
	ex.file.Close()
	ex.closeSpill()
}

func putBuffer(pool eventloop.BufferPool, b *[]byte) {
	if *b != nil {
		pool.Put((*b)[:cap(*b)])
		*b = nil
	}
}
