package httpcore

import (
	"errors"
	"math"
	"net/netip"
	"time"
	"unsafe"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/httpcore/route"
	"github.com/numaproxy/numaproxy/pcre"
)

// connState is where a client connection is in its request cycle.
type connState uint8

const (
	csHead    connState = iota // waiting for, or reading, a request head
	csBody                     // the request body is being read for a content handler
	csWait                     // the request is read; its response is being produced
	csTunnel                   // upgraded: bytes pass both ways untouched
	csDiscard                  // answered without the request body, which is read and dropped
	csLinger                   // closing: sending is shut down, input is read and dropped until the client ends
	csClosed
)

// bodyFate is what became of a request body announced in the head.
type bodyFate uint8

const (
	bodyOnWire  bodyFate = iota // not read yet
	bodyRefused                 // 413 for its length: to be dropped, and not checked again
	bodyTaken                   // read for a content handler, or being dropped
	bodyDropped                 // dropped whole: nothing of the request is left unread
)

// conn is one client connection. What only a request in progress needs (its parsed
// head, routing, body framing, its response) is in a Request taken from the worker
// when bytes arrive and given back when the connection goes idle, so an idle
// keep-alive connection holds a small struct and no buffer: the small fields
// are together so that it fits the 144-byte size class (it was 192, 176, 160).
type conn struct {
	w     *Worker
	conn  eventloop.Conn
	id    uint64
	state connState
	// lstat is what the connection is doing; stat where the worker's gauges count
	// it (connstats.go).
	lstat, stat connStat
	upgraded    bool // counted as a tunnel
	driving     bool // inside drive: finishing a request must not recurse into the next
	paused      bool // reading paused by us (gateRead) rather than by a pending's backpressure (PauseBody)
	// headTimer: client_header_timeout is running for the head being read.
	headTimer bool
	// outBlocked: output is above the high watermark (OnWriteBlocked until
	// OnWritable); no more is read and no next request started meanwhile.
	outBlocked bool
	// ownWatermarks: the connection has a content handler's watermarks until the
	// response ends (SetWriteWatermarks).
	ownWatermarks bool
	// rateLimited: the connection's output has a rate limit (limit_rate), lifted or
	// replaced when the next response starts.
	rateLimited bool
	keepAlive   bool
	pipelined   bool // the next request's bytes were here when the last one ended
	// gone: OnClose came; the connection is reused (recycle) once its request
	// state is back too.
	gone bool
	// holds: conn is a moreWriter, which may hold back bytes that more follow (TLS
	// records); a flag, not the interface, keeps the struct in its size class.
	holds bool

	// in is the input not served yet, a window of the pooled input buffer (inBuf:
	// held as its start and size, 12 bytes rather than a 24-byte slice) that starts
	// at the request being read or served: its head, then what came after it. Both
	// are nil when idle.
	in      []byte
	inBase  *byte
	inCap   int32
	headLen int32 // the head's bytes at the start of in; 0 while it is read
	// requests started on this connection; 32 bits (saturating) leave room for
	// opened in the 144-byte size class.
	requests uint32
	// opened is when the connection was accepted, in milliseconds of msecNow: its
	// low 32 bits, which tell a duration up to 49 days ($connection_time).
	opened      uint32
	srvConf     *LocConf      // the server's config (the default server's until a request names one)
	lcf         *LocConf      // the location's config, else srvConf
	lingerUntil time.Duration // csDiscard, csLinger: the end of lingering_time (monoNow)
	sub         *subState     // a subrequest's connection (subrequest.go); nil for a client's
	subs        *conn         // the first subrequest running for this client connection's requests (addSub)

	*Request // nil while idle
}

// takeRequest gives the connection request state for the bytes that arrived.
func (c *conn) takeRequest() {
	if c.Request != nil {
		return
	}
	w := c.w
	if n := len(w.freeRequests); n > 0 {
		c.Request = w.freeRequests[n-1]
		w.freeRequests[n-1] = nil
		w.freeRequests = w.freeRequests[:n-1]
	} else {
		c.Request = &Request{}
	}
	c.Request.c = c
	dsc := c.defaultServerConf()
	c.req.Limits = dsc.Limits()
	c.req.Names, c.req.NamesByHost = dsc.NameRules(), nil
	if dsc.nameRulesVary {
		c.req.NamesByHost = c
	}
}

// giveRequest returns the request state to the worker (its buffers went back first).
// A pending answer ends first: another connection may take the state next.
func (c *conn) giveRequest() {
	r := c.Request
	if r == nil {
		return
	}
	r.abortPending()
	c.Request = nil
	r.c = nil
	r.req.Reset()
	r.snap, r.srv, r.loc, r.prefix = nil, nil, nil, ""
	if len(c.w.freeRequests) < maxFreeRequests {
		c.w.freeRequests = append(c.w.freeRequests, r)
	}
}

// maxFreeRequests bounds the request states a worker keeps for reuse.
const maxFreeRequests = 1024

// localAddr and remoteAddr are the connection's (its PROXY protocol layer's,
// if any) addresses; not copied into conn, which an idle connection holds.
func (c *conn) localAddr() netip.AddrPort  { return c.conn.LocalAddr() }
func (c *conn) remoteAddr() netip.AddrPort { return c.conn.RemoteAddr() }

func newConn(w *Worker, c eventloop.Conn) *conn {
	c.LocalAddr() // loaded now, while the socket is open, for the connection's life
	_, holds := c.(moreWriter)
	cl := w.freeConns.Get()
	*cl = conn{w: w, conn: c, holds: holds, id: connectionSerial.Add(1), opened: w.msecNow()}
	return cl
}

// recycle gives a closed client connection back to the worker, and its loop
// connection to the loop, once nothing refers to them: OnClose came and the
// request state went back (a pending answer that outlived its client ended).
// They are reused from the next batch on (reuseEnd), when no callback that may
// still look at them is on the stack.
func (c *conn) recycle() {
	if !c.gone || c.Request != nil || c.subs != nil || c.sub != nil {
		return
	}
	c.gone = false // recycled once
	w := c.w
	w.loop.Release(c.conn)
	w.freeConns.Release(c)
	w.reuseEnd.Arm()
}

// defaultServerConf is the core config of the listen address's default server,
// which governs a connection until a request names its server (nginx does the same).
func (c *conn) defaultServerConf() *LocConf {
	_, a := c.w.addrServers(c.localAddr())
	if a == nil {
		return DefaultConf()
	}
	m := &c.w.addr // addrServers' memo, now for this address: asked three times a request
	if m.dsc == nil {
		m.dsc = ServerConf(a.Default)
	}
	return m.dsc
}

func (c *conn) start() {
	c.setStat(statWaiting)
	c.srvConf = c.defaultServerConf()
	c.lcf = c.srvConf
	c.conn.SetIdle(false)
	c.conn.SetWriteTimeout(c.srvConf.SendTimeout)
	// client_header_timeout runs from the accept for the first request's head.
	c.conn.SetTimeout(c.srvConf.ClientHeaderTimeout)
	c.headTimer = true
}

// inBuf is the pooled input buffer, whole (len == cap); nil when there is none.
func (c *conn) inBuf() []byte {
	if c.inBase == nil {
		return nil
	}
	return unsafe.Slice(c.inBase, c.inCap)
}

// setInBuf records buf (whole) as the input buffer.
func (c *conn) setInBuf(buf []byte) {
	c.inBase, c.inCap = unsafe.SliceData(buf), int32(len(buf))
}

// keep appends data to the unserved input. Serving a request moves the start of the
// window c.in past it without copying; bytes are moved down (or to a bigger buffer)
// only when the window reaches the end of inBuf. data may lie inside inBuf after
// c.in (what followed a head, given back after the body): that always fits in place.
func (c *conn) keep(data []byte) {
	if len(c.in)+len(data) <= cap(c.in) {
		c.in = append(c.in, data...)
		return
	}
	n := len(c.in) + len(data)
	old := c.inBuf()
	buf := old
	if n > len(buf) {
		buf = c.conn.Loop().Pool().Get(max(c.defaultServerConf().ClientHeaderBufferSize, n))
		buf = buf[:cap(buf)]
	}
	copy(buf[copy(buf, c.in):], data)
	if old != nil && &buf[0] != &old[0] {
		c.conn.Loop().Pool().Put(old)
	}
	c.setInBuf(buf)
	c.in = buf[:n]
	if c.Request != nil && c.req.Done() {
		c.req.Parse(c.in) // the parsed head moved: point its fields at the new place
		c.keepSubsInStep()
	}
}

// releaseIn gives the input buffer back.
func (c *conn) releaseIn() {
	if buf := c.inBuf(); buf != nil {
		c.conn.Loop().Pool().Put(buf)
	}
	c.inBase, c.inCap, c.in = nil, 0, nil
}

func (c *conn) onData(data []byte) {
	switch c.state {
	case csHead, csWait:
		// A head in progress, or the next pipelined request: keep it.
		c.keep(data)
		c.drive()
	case csBody:
		c.conn.SetTimeout(c.lcf.ClientBodyTimeout)
		c.takeBody(data)
		c.drive()
	case csTunnel:
		if c.pending != nil {
			c.pending.TunnelData(data)
		}
	case csDiscard:
		c.discardMore(data)
	case csLinger:
		c.lingerRead()
	}
}

// drive parses and serves the requests waiting in the buffer, one after another,
// until one goes asynchronous, the output blocks or the buffer runs out; then it
// decides whether to read on.
func (c *conn) drive() {
	if c.driving {
		return
	}
	c.driving = true
	defer func() { c.driving = false }()
	for c.state == csHead && len(c.in) > 0 && !c.outBlocked {
		c.takeRequest()
		n, err := c.req.Parse(c.in)
		if errors.Is(err, http1.ErrNeedMore) {
			c.setStat(statReading)
			if !c.headTimer {
				// client_header_timeout bounds the whole head from its first byte
				// (a pipelined one's from the end of the request before it), as in
				// nginx; it is not restarted by each read, so a head sent a byte at
				// a time cannot hold the connection.
				c.headTimer = true
				c.conn.SetIdle(false)
				c.conn.SetTimeout(c.defaultServerConf().ClientHeaderTimeout)
			}
			break
		}
		if c.requests < math.MaxUint32 {
			c.requests++
		}
		c.setStat(statWriting)
		a := c.begin()
		if pe, ok := err.(*http1.ParseError); ok {
			c.keepAlive = false
			if n > 0 {
				// A head refused as a whole (no Host, ...) is logged with its request
				// line, length and $uri, as nginx parsed them before it refused it.
				c.headLen = int32(n)
				c.uriBuf = c.Request.newURIBuf(len(c.req.Path()) + 1)
				if uri, err := route.Normalize(c.uriBuf, c.req.Path(), c.srvConf.MergeSlashes); err == nil {
					c.uriBuf = uri
				}
			}
			status := pe.Status
			if status == 400 && pe.Reason == reason(statusHeaderTooLarge) {
				status = statusHeaderTooLarge
			}
			c.respondStatus(status)
			return
		}
		c.headLen = int32(n) // at most the buffer, an int32
		c.handle(a)
	}
	c.gateRead()
}

// gateRead reads the client only while that cannot pile up, as nginx, which reads
// nothing while a response is being sent: not while the output is above the high
// watermark (between requests or waiting for a response), nor, while a request is
// served, once the pipelined input after it reaches the size of the largest head
// (large_client_header_buffers). Reading for a request body is the content
// handler's to pace.
func (c *conn) gateRead() {
	stop := false
	switch c.state {
	case csHead:
		stop = c.outBlocked
	case csWait:
		stop = c.outBlocked || len(c.in)-int(c.headLen) >= c.req.Limits.MaxHeadSize
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

// begin starts a request: its snapshot, clock and server. It returns the servers
// of the connection's address in that snapshot (nil if none), for handle.
func (c *conn) begin() *route.AddrServers {
	c.takeRequest()
	r := c.Request
	// One look-up of the address for the snapshot, the default server and its
	// configuration (each asked the connection's address again).
	s, a := c.w.addrServers(c.localAddr())
	r.snap = s
	r.started = c.w.loop.Now()
	r.status, r.bodySent, r.headSent, r.redirects, r.forceStatus, r.internalGET, r.uriChanged = 0, 0, 0, 0, 0, false, false
	r.wireSent, r.headSize, r.bodyWire, r.pipelined, r.hasID = 0, 0, 0, c.pipelined, false
	c.w.seq++
	r.seq, r.met, r.mods = c.w.seq, 0, &s.all
	r.errorPageDone, r.carried, r.carriedType, r.args = false, r.carried[:0], r.carriedType[:0], r.args[:0]
	r.body, r.buffering, r.logged, r.headerSent, r.done, r.complete = BodyNone, false, false, false, false, false
	r.clientClosed = false
	if r.bodyBuf != nil {
		r.bodyBuf = r.bodyBuf[:0] // a pipelined request's: the last one's body stays until the connection idles
	}
	r.limitRate, r.limitRateSet = 0, false
	r.expectTrailers, r.trailers = false, r.trailers[:0]
	r.srv, r.loc, r.prefix, r.rewritten = nil, nil, "", false
	r.resetVars()
	r.remoteSet, r.accessCode = false, 0
	if a != nil {
		c.srvConf, r.srv = ServerConf(a.Default), a.Default
	} else {
		c.srvConf = DefaultConf()
	}
	c.lcf = c.srvConf
	c.conn.SetIdle(false)
	c.conn.SetTimeout(0) // the head is in: client_header_timeout is over
	c.headTimer = false
	if c.paused {
		// Pipelined input waited for this request; its body, if any, is read now.
		c.paused = false
		c.conn.ResumeRead()
	}
	return a
}

// handle starts a parsed request through the phases, after the core's own checks:
// the server Host selects, the target's form, the path normalised into $uri. a is
// begin's: the servers of the connection's address in the request's snapshot.
func (c *conn) handle(a *route.AddrServers) {
	r := &c.req
	c.bodyFate = bodyOnWire
	// As nginx, the path is normalised by the rules of the address's default server:
	// it is parsed before the Host header names the request's server.
	mergeSlashes := true
	if a != nil {
		mergeSlashes = ServerConf(a.Default).MergeSlashes
		var re *pcre.Regexp
		c.srv, re = a.ServerName(r.Host())
		if re != nil && re.NumCaptures() > 0 {
			// server_name ~regex: its captures, as nginx sets them.
			c.hostBuf = route.CanonicalHost(c.hostBuf[:0], r.Host())
			c.Request.Regex(re, c.hostBuf)
		}
		c.srvConf = ServerConf(c.srv)
		c.lcf = c.srvConf
	}
	c.keepAlive = r.KeepAlive() // and the location's keepalive_* (appendConnection)
	if r.TargetForm() == http1.AsteriskForm || r.TargetForm() == http1.AuthorityForm {
		// OPTIONS * and CONNECT are not for a reverse proxy.
		c.keepAlive = false
		c.respondStatus(405)
		return
	}
	c.uriBuf = c.Request.newURIBuf(len(r.Path()) + 1)
	uri, err := route.Normalize(c.uriBuf, r.Path(), mergeSlashes)
	if err != nil {
		c.keepAlive = false
		c.respondStatus(400)
		return
	}
	c.uriBuf = uri
	c.phase = 0
	c.Request.RunPhases()
}

// finish ends the current request: the connection goes idle for the next one (or on
// to a pipelined request) or closes.
func (c *conn) finish() {
	if c.sub != nil {
		c.endSub()
		return
	}
	if c.state == csClosed {
		c.release() // the end of a pending answer that outlived its client (ClientGone)
		c.recycle()
		return
	}
	if c.Request != nil {
		// As nginx, the request is complete once its response is, even if
		// dropping its unread body fails afterwards.
		c.complete = true
		if c.keepAlive && c.state != csBody && c.bodyUnread() {
			// A handler answered without the request body: it is dropped first, as
			// nginx's handlers discard it, so its bytes are not taken for a request.
			if !c.discardBody() {
				c.keepAlive = false // invalid chunked framing: the rest is not dropped
			} else if c.state == csDiscard {
				return // the request finishes once the body is dropped
			}
		}
		c.done = true
		c.logRequest()
		c.freeURIBuf()
	}
	c.abortPending() // a pending answer never outlives its request
	if c.ownWatermarks {
		c.ownWatermarks = false
		c.conn.SetWriteWatermarks(0, 0)
	}
	if !c.keepAlive || c.w.loop.Draining() {
		c.close()
		return
	}
	// Keep only what came after this request: the window moves past it.
	c.setStat(statWaiting) // until the next request's first byte (drive)
	c.in, c.headLen = c.in[min(int(c.headLen), len(c.in)):], 0
	c.pipelined = len(c.in) > 0
	c.req.Reset()
	c.state = csHead
	c.headTimer = false
	if len(c.in) == 0 {
		// Idle: hold no buffer and no request state.
		c.releaseIn()
		c.releaseBodyBuf()
		c.giveRequest()
		c.conn.SetIdle(true)
		c.conn.SetTimeout(c.lcf.KeepaliveTimeout)
	}
	c.drive() // the next pipelined request unless the output is blocked, and reading
}

// close ends the connection after what is queued is sent, lingering (linger.go)
// when the client may still be sending.
func (c *conn) close() {
	if c.sub != nil {
		c.endSub() // a subrequest that cannot finish its answer ends with what it has
		return
	}
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
func (c *conn) closeAfterFlush() {
	if c.sub != nil {
		c.endSub()
		return
	}
	if c.state == csClosed {
		c.release() // the end of a pending answer that outlived its client (ClientGone)
		c.recycle()
		return
	}
	c.state = csClosed
	c.release()
	c.conn.SetTimeout(c.lcf.SendTimeout) // bound the final flush
	c.conn.Close()
}

// release returns the connection's buffers to the pool.
func (c *conn) release() {
	for sc := c.subs; sc != nil; sc = c.subs {
		// The client went: the subrequests its request waited for end unheard.
		sc.sub.canceled = true
		sc.endSub()
		if c.subs == sc {
			c.removeSub(sc)
		}
	}
	if c.Request != nil && c.pending != nil {
		if c.state == csClosed && c.pending.ClientGone() {
			return // it runs on, and calls Finish when it ends
		}
		c.abortPending() // it may live in the request state given back below
		if c.Request.clientClosed && c.Request.status == 0 {
			// nginx's NGX_HTTP_CLIENT_CLOSED_REQUEST, which only its log sees.
			c.Request.status = 499
		}
	}
	c.logRequest() // before the input goes: $request lies in it
	c.releaseIn()
	if c.Request == nil {
		return
	}
	c.freeURIBuf()
	c.releaseBodyBuf()
	c.giveRequest()
}

// onWriteBlocked: the client reads slower than it is answered. What feeds it is
// paused, and so is reading the client between requests (send_timeout, the
// connection's write timeout, closes a client that does not read at all).
func (c *conn) onWriteBlocked() {
	c.outBlocked = true
	if c.Request != nil && c.pending != nil {
		c.pending.ClientBlocked()
	}
	c.gateRead()
}

func (c *conn) onWritable() {
	c.outBlocked = false
	if c.Request != nil && c.pending != nil {
		c.pending.ClientWritable()
	}
	c.drive() // the pipelined requests that waited, then reading again
}

func (c *conn) onTimeout() {
	switch c.state {
	case csHead:
		if len(c.in) == 0 && c.requests > 0 && c.conn.Queued() > 0 {
			// keepalive_timeout counts from the end of the last response, which is
			// still being sent (the write timeout bounds that): wait on.
			c.conn.SetTimeout(c.lcf.KeepaliveTimeout)
			return
		}
		switch {
		case len(c.in) > 0:
			c.w.log.Info("client timed out while reading client request headers", "client", c.remoteAddr().String())
		case c.requests == 0:
			c.w.log.Info("client timed out while waiting for request", "client", c.remoteAddr().String())
		}
		// As nginx, a head that did not arrive in time gets no answer (its 408 is
		// only logged there): the connection is closed, as an idle one is, and
		// reset with reset_timedout_connection if a request had begun.
		reset := len(c.in) > 0 && c.defaultServerConf().ResetTimedout
		c.state = csClosed
		c.release()
		if reset {
			c.conn.Reset()
		} else {
			c.conn.Close()
		}
	case csBody:
		// The client stopped sending: as nginx, the connection closes without an
		// answer (nginx's 408 goes only to its log) and without lingering.
		c.w.log.Info("client timed out while reading client request body", "client", c.RemoteAddr().String())
		c.abortBody()
		c.keepAlive = false
		if c.lcf.ResetTimedout {
			c.resetNow()
			return
		}
		c.closeAfterFlush()
	case csDiscard:
		c.closeAfterFlush() // the body to drop stopped coming
	case csLinger:
		c.lingerTimedOut()
	default:
		// close()'s bound on the final flush (the write timeout usually comes
		// first).
		if c.Request != nil {
			c.abortBody()
		}
		if c.lcf.ResetTimedout {
			c.resetNow()
			return
		}
		c.state = csClosed
		c.release()
		c.conn.Close()
		c.conn.Close() // a second Close drops what is queued
	}
}

// resetNow closes the connection with an RST (reset_timedout_connection), dropping
// what is queued.
func (c *conn) resetNow() {
	c.state = csClosed
	c.release()
	c.conn.Reset()
}

// armSendTimeout gives the connection the location's send_timeout, and whether it
// resets the connection (reset_timedout_connection).
func (c *conn) armSendTimeout() {
	c.conn.SetWriteTimeout(c.lcf.SendTimeout)
	c.conn.SetResetOnWriteTimeout(c.lcf.ResetTimedout)
}

// onClose: the connection is gone; a pending answer is abandoned (release ends it
// before the request state goes back) unless it runs on (ClientGone).
func (c *conn) onClose(err error) {
	if errors.Is(err, eventloop.ErrWriteTimeout) {
		c.w.log.Info("client timed out while sending response to client", "client", c.remoteAddr().String())
	} else if c.Request != nil && !c.done {
		c.Request.clientClosed = true
	}
	c.state = csClosed
	c.release()
}

// NameRulesFor gives the http1 parser the field name rules of the server host
// selects on the connection's address (http1.NameRulesByHost); it is asked only where
// the servers of the address differ (LocConf.nameRulesVary).
func (c *conn) NameRulesFor(host []byte) http1.NameRules {
	if _, a := c.w.addrServers(c.localAddr()); a != nil {
		return ServerConf(a.Server(host)).NameRules()
	}
	return c.req.Names
}
