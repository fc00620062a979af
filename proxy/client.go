package proxy

import (
	"errors"
	"github.com/numaproxy/numaproxy/httpcore"
	"net/netip"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/httpcore/route"
)

// clientState is where a client connection is in its request cycle.
type clientState uint8

const (
	csHead    clientState = iota // waiting for, or reading, a request head
	csBody                       // proxying; the request body is still arriving
	csWait                       // the request is read; its response is being produced
	csTunnel                     // upgraded: bytes pass both ways untouched
	csDiscard                    // answered without the request body, which is read and dropped
	csLinger                     // closing: sending is shut down, input is read and dropped until the client ends
	csClosed
)

// bodyFate is what became of a request body announced in the head.
type bodyFate uint8

const (
	bodyOnWire  bodyFate = iota // not read yet
	bodyRefused                 // 413 for its length: to be dropped, and not checked again
	bodyTaken                   // read by the proxy, or being dropped
	bodyDropped                 // dropped whole: nothing of the request is left unread
)

// bodyKind is how the request body is framed.
type bodyKind uint8

const (
	bodyNone bodyKind = iota
	bodyLength
	bodyChunked
)

// client is one client connection. What only a request in progress needs (its
// parsed head, routing, body framing, the upstream exchange) is in a request taken
// from the worker when bytes arrive and given back when the connection goes idle,
// so an idle keep-alive connection holds a small struct and no buffer.
type client struct {
	w      *Worker
	conn   eventloop.Conn
	id     uint64
	local  netip.AddrPort
	remote netip.AddrPort
	state  clientState

	// in is the input not served yet, a window of inBuf (pooled) that starts at the
	// request being read or served: its head, then what came after it. Both are nil
	// when idle.
	in       []byte
	inBuf    []byte
	headLen  int
	requests int  // requests started on this connection
	driving  bool // inside drive: finishing a request must not recurse into the next
	paused   bool // reading paused by us (gateRead) rather than by the upstream's backpressure
	// headTimer: client_header_timeout is running for the head being read.
	headTimer bool
	// outBlocked: output is above the high watermark (OnWriteBlocked until
	// OnWritable); no more is read and no next request started meanwhile.
	outBlocked bool
	// ownWatermarks: the connection has proxy_buffering off's watermarks until the
	// response ends.
	ownWatermarks bool
	keepAlive     bool
	srvConf       *LocConf          // the server's config (the default server's until a request names one)
	lcf           *LocConf          // the location's config, else srvConf
	srvCcf        *httpcore.LocConf // the server's core config
	ccf           *httpcore.LocConf // the location's core config, else srvCcf
	ex            *exchange         // the upstream side, while proxying: &exStore or nil
	lingerUntil   time.Time         // csDiscard, csLinger: the end of lingering_time

	*request // nil while idle
}

// request is the state of the request a client is serving.
type request struct {
	req       http1.Request
	snap      *Snapshot
	srv       *conf.Server
	loc       *conf.Location
	prefix    string // the matched prefix location's path, for proxy_pass URI replacement
	uriBuf    []byte // pooled: the normalised path ($uri)
	started   time.Time
	status    int
	bodySent  int64
	redirects int // internal redirects (error_page) taken
	// errorPageDone: an error met error pages with recursive_error_pages off, so no
	// later error gets one (nginx's r->error_page).
	errorPageDone bool
	carried       []byte // fields an upstream response passes on to what replaces it (intercepted error, X-Accel-Redirect)
	carriedType   []byte // the Content-Type an X-Accel-Redirect response passes on
	args          []byte // $args after an internal redirect (uriChanged)
	uriChanged    bool   // an error_page redirect replaced $uri (and dropped the arguments)
	forceStatus   int    // the status an error_page imposes on the response; 0: none
	internalGET   bool   // after an error_page redirect the request goes on as GET

	body          bodyKind
	contentLength int64    // the body length sent upstream (Content-Length)
	buffering     bool     // the chunked body is read whole before it goes upstream
	bodyBuf       []byte   // pooled: the buffered body, or its part not yet in spool
	spool         bodyFile // the buffered body beyond client_body_buffer_size
	bodyLen       http1.LengthBody
	chunks        http1.ChunkedDecoder
	bodyTotal     int64 // body bytes received, against client_max_body_size
	bodyFate      bodyFate

	exStore exchange // the exchange of the current request, reused by the next
}

// takeRequest gives the client request state for the bytes that arrived.
func (c *client) takeRequest() {
	if c.request != nil {
		return
	}
	w := c.w
	if n := len(w.freeRequests); n > 0 {
		c.request = w.freeRequests[n-1]
		w.freeRequests[n-1] = nil
		w.freeRequests = w.freeRequests[:n-1]
	} else {
		c.request = &request{}
	}
	dsc := c.defaultServerCore()
	c.req.Limits = dsc.Limits()
	c.req.Names, c.req.NamesByHost = dsc.NameRules(), nil
	if dsc.NameRulesVary() {
		c.req.NamesByHost = c
	}
}

// giveRequest returns the request state to the worker (its buffers went back first).
// An exchange still running in it ends first: another connection may take the state
// next, and c.ex must not point into it.
func (c *client) giveRequest() {
	r := c.request
	if r == nil {
		return
	}
	if c.ex != nil {
		c.ex.abort()
	}
	c.request = nil
	r.req.Reset()
	r.snap, r.srv, r.loc, r.prefix = nil, nil, nil, ""
	r.exStore = exchange{chunkIov: r.exStore.chunkIov}
	if len(c.w.freeRequests) < maxFreeRequests {
		c.w.freeRequests = append(c.w.freeRequests, r)
	}
}

// maxFreeRequests bounds the request states a worker keeps for reuse.
const maxFreeRequests = 1024

func newClient(w *Worker, c eventloop.Conn) *client {
	return &client{w: w, conn: c, id: connectionSerial.Add(1), local: c.LocalAddr(), remote: c.RemoteAddr()}
}

// defaultServerConf is the proxy config of the listen address's default server, which
// governs a connection until a request names its server (nginx does the same).
func (c *client) defaultServerConf() *LocConf {
	if a := c.w.snapshotFor(c.local).Routes.Addr(c.local); a != nil {
		return serverConf(a.Default)
	}
	d := defaults()
	return &d
}

// defaultServerCore is defaultServerConf for the core's config.
func (c *client) defaultServerCore() *httpcore.LocConf {
	if a := c.w.snapshotFor(c.local).Routes.Addr(c.local); a != nil {
		return httpcore.ServerConf(a.Default)
	}
	return httpcore.DefaultConf()
}

func (c *client) start() {
	c.srvConf = c.defaultServerConf()
	c.srvCcf = c.defaultServerCore()
	c.lcf = c.srvConf
	c.ccf = c.srvCcf
	c.conn.SetIdle(false)
	c.conn.SetWriteTimeout(c.srvCcf.SendTimeout)
	// client_header_timeout runs from the accept for the first request's head.
	c.conn.SetTimeout(c.srvCcf.ClientHeaderTimeout)
	c.headTimer = true
}

// keep appends data to the unserved input. Serving a request moves the start of the
// window c.in past it without copying; bytes are moved down (or to a bigger buffer)
// only when the window reaches the end of inBuf. data may lie inside inBuf after
// c.in (what followed a head, given back after the body): that always fits in place.
func (c *client) keep(data []byte) {
	if len(c.in)+len(data) <= cap(c.in) {
		c.in = append(c.in, data...)
		return
	}
	n := len(c.in) + len(data)
	buf := c.inBuf
	if n > len(buf) {
		buf = c.conn.Loop().Pool().Get(max(c.defaultServerCore().ClientHeaderBufferSize, n))
		buf = buf[:cap(buf)]
	}
	copy(buf[copy(buf, c.in):], data)
	if c.inBuf != nil && &buf[0] != &c.inBuf[0] {
		c.conn.Loop().Pool().Put(c.inBuf)
	}
	c.inBuf, c.in = buf, buf[:n]
	if c.request != nil && c.req.Done() {
		c.req.Parse(c.in) // the parsed head moved: point its fields at the new place
	}
}

// releaseIn gives the input buffer back.
func (c *client) releaseIn() {
	if c.inBuf != nil {
		c.conn.Loop().Pool().Put(c.inBuf)
	}
	c.inBuf, c.in = nil, nil
}

func (c *client) onData(data []byte) {
	switch c.state {
	case csHead, csWait:
		// A head in progress, or the next pipelined request: keep it.
		c.keep(data)
		c.drive()
	case csBody:
		c.conn.SetTimeout(c.ccf.ClientBodyTimeout)
		c.takeBody(data)
		c.drive()
	case csTunnel:
		c.ex.tunnelFromClient(data)
	case csDiscard:
		c.discardMore(data)
	case csLinger:
		c.lingerRead()
	}
}

// drive parses and serves the requests waiting in the buffer, one after another,
// until one goes asynchronous (proxying), the output blocks or the buffer runs out;
// then it decides whether to read on.
func (c *client) drive() {
	if c.driving {
		return
	}
	c.driving = true
	defer func() { c.driving = false }()
	for c.state == csHead && len(c.in) > 0 && !c.outBlocked {
		c.takeRequest()
		n, err := c.req.Parse(c.in)
		if errors.Is(err, http1.ErrNeedMore) {
			if !c.headTimer {
				// client_header_timeout bounds the whole head from its first byte
				// (a pipelined one's from the end of the request before it), as in
				// nginx; it is not restarted by each read, so a head sent a byte at
				// a time cannot hold the connection.
				c.headTimer = true
				c.conn.SetIdle(false)
				c.conn.SetTimeout(c.defaultServerCore().ClientHeaderTimeout)
			}
			break
		}
		c.requests++
		c.begin()
		if pe, ok := err.(*http1.ParseError); ok {
			c.keepAlive = false
			status := pe.Status
			if status == 400 && pe.Reason == reason(statusHeaderTooLarge) {
				status = statusHeaderTooLarge
			}
			c.respondStatus(status)
			return
		}
		c.headLen = n
		c.handle()
	}
	c.gateRead()
}

// gateRead reads the client only while that cannot pile up, as nginx, which reads
// nothing while a response is being sent: not while the output is above the high
// watermark (between requests or waiting for a response), nor, while a request is
// served, once the pipelined input after it reaches the size of the largest head
// (large_client_header_buffers). Reading for a request body is the upstream's to
// pace.
func (c *client) gateRead() {
	stop := false
	switch c.state {
	case csHead:
		stop = c.outBlocked
	case csWait:
		stop = c.outBlocked || len(c.in)-c.headLen >= c.req.Limits.MaxHeadSize
	default:
		return
	}
	c.paused = stop
	if stop {
		c.conn.PauseRead()
	} else {
		c.conn.ResumeRead()
	}
}

// begin starts a request: its snapshot, clock and server.
func (c *client) begin() {
	c.takeRequest()
	c.snap = c.w.snapshotFor(c.local)
	c.started = time.Now()
	c.status, c.bodySent, c.redirects, c.forceStatus, c.internalGET, c.uriChanged = 0, 0, 0, 0, false, false
	c.errorPageDone, c.carried, c.carriedType, c.args = false, c.carried[:0], c.carriedType[:0], c.args[:0]
	c.body, c.buffering = bodyNone, false
	c.srv, c.loc, c.prefix = nil, nil, ""
	c.srvConf = c.defaultServerConf()
	c.srvCcf = c.defaultServerCore()
	c.lcf = c.srvConf
	c.ccf = c.srvCcf
	if a := c.snap.Routes.Addr(c.local); a != nil {
		c.srv = a.Default
	}
	c.conn.SetIdle(false)
	c.conn.SetTimeout(0) // the head is in: client_header_timeout is over
	c.headTimer = false
	if c.paused {
		// Pipelined input waited for this request; its body, if any, is read now.
		c.paused = false
		c.conn.ResumeRead()
	}
}

// handle routes a parsed request and starts answering it, nginx's phases: server
// return, location, location return, proxy_pass.
func (c *client) handle() {
	r := &c.req
	c.bodyFate = bodyOnWire
	if a := c.snap.Routes.Addr(c.local); a != nil {
		c.srv = a.Server(r.Host())
		c.srvConf = serverConf(c.srv)
		c.srvCcf = httpcore.ServerConf(c.srv)
		c.lcf = c.srvConf
		c.ccf = c.srvCcf
		c.ccf = c.srvCcf
	}
	c.keepAlive = r.KeepAlive() // and the location's keepalive_* (appendConnection)
	if r.TargetForm() == http1.AsteriskForm || r.TargetForm() == http1.AuthorityForm {
		// OPTIONS * and CONNECT are not for a reverse proxy.
		c.keepAlive = false
		c.respondStatus(405)
		return
	}
	pool := c.conn.Loop().Pool()
	c.uriBuf = pool.Get(len(r.Path()) + 1)[:0]
	uri, err := route.Normalize(c.uriBuf, r.Path())
	if err != nil {
		c.keepAlive = false
		c.respondStatus(400)
		return
	}
	c.uriBuf = uri
	if c.srv != nil {
		if ret := c.srvConf.Return; ret != nil {
			c.respondReturn(ret)
			return
		}
	}
	c.route()
}

// route finds the location for the current $uri and answers from it. It runs again
// after an internal redirect (error_page).
func (c *client) route() {
	c.loc, c.prefix, c.lcf, c.ccf = nil, "", c.srvConf, c.srvCcf
	if c.srv != nil {
		locs := c.snap.Routes.Locations(c.srv)
		if l := locs.AutoRedirect(c.uriBuf); l != nil && locationConf(l).Pass != nil {
			c.loc, c.lcf, c.ccf = l, locationConf(l), httpcore.LocationConf(l)
			if !c.refuseBodyLength() {
				c.respondAutoRedirect()
			}
			return
		}
		if m := locs.Find(c.uriBuf); m.Location != nil {
			c.loc, c.prefix, c.lcf, c.ccf = m.Location, m.Prefix, locationConf(m.Location), httpcore.LocationConf(m.Location)
		}
	}
	if !c.refuseBodyLength() {
		c.serveLocation()
	}
}

// refuseBodyLength answers 413 to a Content-Length over the location's
// client_max_body_size. nginx checks it as soon as the location is chosen, before
// any of its handlers (return included; a server-level return ran before), and then
// drops the body; once a request, not again after an error_page redirect.
func (c *client) refuseBodyLength() bool {
	max := c.ccf.ClientMaxBodySize
	if max == 0 || c.bodyFate != bodyOnWire || c.req.ContentLength() <= max {
		return false
	}
	c.bodyFate = bodyRefused
	c.keepAlive = false
	c.respondStatus(413)
	return true
}

// serveLocation answers from the current location: its return, else its proxy_pass,
// else 404 (numaproxy serves no files).
func (c *client) serveLocation() {
	if c.loc != nil {
		if ret := c.lcf.Return; ret != nil {
			c.respondReturn(ret)
			return
		}
	}
	if c.loc != nil && c.lcf.Pass != nil {
		if !c.upstreamPathOK() {
			c.keepAlive = false
			c.respondStatus(400)
			return
		}
		if c.internalGET && c.bodyUnread() {
			// An error_page redirect is proxied without the body, which is still to
			// come: its bytes must not be taken for a next request.
			c.keepAlive = false
		}
		c.conn.SetWriteTimeout(c.ccf.SendTimeout)
		c.proxy()
		return
	}
	c.respondStatus(404)
}

// bodyFraming sets up reading the request body (its Content-Length was checked
// against client_max_body_size when the location was chosen).
func (c *client) bodyFraming() {
	r := &c.req
	c.bodyTotal = 0
	switch {
	case r.Chunked():
		c.body = bodyChunked
		c.chunks.Reset()
	case r.ContentLength() > 0:
		c.body = bodyLength
		c.bodyLen = http1.NewLengthBody(r.ContentLength())
		c.contentLength = r.ContentLength()
	default:
		c.body = bodyNone
	}
}

// takeBody feeds request body bytes to the upstream exchange; what follows the body
// is the next pipelined request and is kept.
func (c *client) takeBody(data []byte) {
	for len(data) > 0 && c.state == csBody {
		switch c.body {
		case bodyLength:
			part := c.bodyLen.Take(data)
			data = data[len(part):]
			c.bodyTotal += int64(len(part))
			c.ex.sendBody(part)
			if c.bodyLen.Done() {
				c.bodyDone()
			}
		case bodyChunked:
			n, chunk, err := c.chunks.Decode(data)
			if err != nil {
				c.abortExchange()
				c.keepAlive = false
				c.failRequest(400)
				return
			}
			c.bodyTotal += int64(len(chunk))
			if c.bodyTooLarge() {
				c.abortExchange()
				c.keepAlive = false
				c.failRequest(413)
				return
			}
			if c.buffering {
				if !c.bufferChunk(chunk) {
					return
				}
			} else if len(chunk) > 0 {
				c.ex.bodyChunk(chunk)
			}
			data = data[n:]
			if c.chunks.Done() {
				if c.buffering {
					c.sendBuffered()
				} else {
					c.ex.flushChunk(true)
					c.bodyDone()
				}
			}
		}
	}
	if c.ex != nil && c.ex.pieces > 0 {
		c.ex.flushChunk(false) // the pieces are in the loop's read buffer
	}
	if len(data) > 0 {
		c.keep(data)
		c.paused = true
		c.conn.PauseRead()
	}
}

// bodyTooLarge checks client_max_body_size, which counts data bytes only.
func (c *client) bodyTooLarge() bool {
	max := c.ccf.ClientMaxBodySize
	return max > 0 && c.bodyTotal > max
}

// abortExchange drops the upstream side, if there is one yet (abort detaches it).
func (c *client) abortExchange() {
	if c.ex != nil {
		c.ex.abort()
	}
	c.releaseBodyBuf()
}

// bodyDone: the whole request is read and sent on.
func (c *client) bodyDone() {
	c.state = csWait
	c.conn.SetTimeout(0)
	c.ex.requestSent()
}

// failRequest answers an error for the current request if nothing of a response was
// sent yet, else closes the connection (a truncated response must never look
// complete).
func (c *client) failRequest(status int) {
	if c.status != 0 {
		c.close()
		return
	}
	c.respondStatus(status)
}

// finish ends the current request: the connection goes idle for the next one (or on
// to a pipelined request) or closes.
func (c *client) finish() {
	if c.state == csClosed {
		c.release() // the end of an exchange that outlived its client (ex.orphan)
		return
	}
	pool := c.conn.Loop().Pool()
	if c.request != nil && c.uriBuf != nil {
		pool.Put(c.uriBuf[:cap(c.uriBuf)])
		c.uriBuf = nil
	}
	if c.ex != nil {
		c.ex.abort() // an exchange never outlives its request
	}
	if c.ownWatermarks {
		c.ownWatermarks = false
		c.conn.SetWriteWatermarks(0, 0)
	}
	if !c.keepAlive || c.w.loop.Draining() {
		c.close()
		return
	}
	// Keep only what came after this request: the window moves past it.
	c.in, c.headLen = c.in[min(c.headLen, len(c.in)):], 0
	c.req.Reset()
	c.state = csHead
	c.headTimer = false
	if len(c.in) == 0 {
		// Idle: hold no buffer and no request state.
		c.releaseIn()
		c.releaseBodyBuf()
		c.giveRequest()
		c.conn.SetIdle(true)
		c.conn.SetTimeout(c.ccf.KeepaliveTimeout)
	}
	c.drive() // the next pipelined request unless the output is blocked, and reading
}

// close ends the connection after what is queued is sent, lingering (linger.go)
// when the client may still be sending.
func (c *client) close() {
	if c.state == csClosed || c.state == csLinger {
		return
	}
	if c.shouldLinger() {
		c.linger()
		return
	}
	c.closeAfterFlush()
}

// closeAfterFlush closes once what is queued is sent, reading no more.
func (c *client) closeAfterFlush() {
	if c.state == csClosed {
		c.release() // the end of an exchange that outlived its client (ex.orphan)
		return
	}
	c.state = csClosed
	c.release()
	c.conn.SetTimeout(c.ccf.SendTimeout) // bound the final flush
	c.conn.Close()
}

// release returns the connection's buffers to the pool.
func (c *client) release() {
	if c.ex != nil {
		if c.ex.orphan() {
			return // proxy_ignore_client_abort: it runs on, and calls back when it ends
		}
		c.ex.abort() // it lives in the request state given back below, and detaches
	}
	pool := c.conn.Loop().Pool()
	c.releaseIn()
	if c.request == nil {
		return
	}
	if c.uriBuf != nil {
		pool.Put(c.uriBuf[:cap(c.uriBuf)])
		c.uriBuf = nil
	}
	c.releaseBodyBuf()
	c.giveRequest()
}

// onWriteBlocked: the client reads slower than it is answered. The upstream is
// paused, and so is reading the client between requests (send_timeout, the
// connection's write timeout, closes a client that does not read at all).
func (c *client) onWriteBlocked() {
	c.outBlocked = true
	if c.ex != nil {
		c.ex.clientBlocked()
	}
	c.gateRead()
}

func (c *client) onWritable() {
	c.outBlocked = false
	if c.ex != nil {
		c.ex.clientWritable()
	}
	c.drive() // the pipelined requests that waited, then reading again
}

func (c *client) onTimeout() {
	switch c.state {
	case csHead:
		if len(c.in) == 0 && c.requests > 0 && c.conn.Queued() > 0 {
			// keepalive_timeout counts from the end of the last response, which is
			// still being sent (the write timeout bounds that): wait on.
			c.conn.SetTimeout(c.ccf.KeepaliveTimeout)
			return
		}
		switch {
		case len(c.in) > 0:
			c.w.log.Info("client timed out while reading client request headers", "client", c.remote.String())
		case c.requests == 0:
			c.w.log.Info("client timed out while waiting for request", "client", c.remote.String())
		}
		// As nginx, a head that did not arrive in time gets no answer (its 408 is
		// only logged there): the connection is closed, as an idle one is.
		c.state = csClosed
		c.release()
		c.conn.Close()
	case csBody:
		// The client stopped sending: as nginx, the connection closes without an
		// answer (nginx's 408 goes only to its log) and without lingering.
		c.w.log.Info("client timed out while reading client request body", "client", c.remote.String())
		c.abortExchange()
		c.keepAlive = false
		c.closeAfterFlush()
	case csDiscard:
		c.closeAfterFlush() // the body to drop stopped coming
	case csLinger:
		c.lingerTimedOut()
	default:
		// close()'s bound on the final flush (the write timeout usually comes
		// first).
		c.abortExchange()
		c.state = csClosed
		c.release()
		c.conn.Close()
		c.conn.Close() // a second Close drops what is queued
	}
}

// onClose: the connection is gone; an exchange still running is abandoned (release
// ends it before the request state goes back).
func (c *client) onClose(err error) {
	if errors.Is(err, eventloop.ErrWriteTimeout) {
		c.w.log.Info("client timed out while sending response to client", "client", c.remote.String())
	}
	c.state = csClosed
	c.release()
}
