package httpcore

import (
	"net/netip"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// A subrequest (nginx's ngx_http_subrequest) is a request the core runs inside
// another one for a module, auth_request's check: its own URI, location, phases
// (from the server rewrite phase, access skipped) and content handler, with the
// parent's head (method, fields, $request_uri), client address and server, and no
// request body. Its response goes nowhere: the status and head (Status, Header) and
// the variables of its content handler ($upstream_*) are read by the module when
// it ends; its body is dropped. It is not logged (nginx's log_subrequest off).
//
// It runs on a connection of its own that is not a socket (subSocket), so every
// path of the core, error_page and internal redirects included, serves it as any
// request; what would go to the client is dropped, and its end (Finish, an
// answer, Fail, Abort) calls the module back instead of serving a next request.
// A request that starts none pays nothing: the connection's subs list stays nil.

// subState is what makes a connection a subrequest's.
type subState struct {
	parent   *Request
	main     *conn // the client connection; nil for a background request
	hooks    SubrequestHooks
	canceled bool
	sock     subSocket
	head     []byte // pooled: a background request's copy of the client's head
	// The main connection's list of subrequests (addSub): the first's prev is the
	// last; prev is nil when not in the list.
	prev, next *conn
}

// addSub appends subrequest connection sc to m's list. A list through the
// subrequests rather than a slice keeps the client's conn small (8 bytes, not 24).
func (m *conn) addSub(sc *conn) {
	s := sc.sub
	s.next = nil
	if first := m.subs; first != nil {
		last := first.sub.prev
		last.sub.next, s.prev, first.sub.prev = sc, last, sc
		return
	}
	m.subs, s.prev = sc, sc
}

// removeSub takes sc out of m's list, if it is there.
func (m *conn) removeSub(sc *conn) {
	s := sc.sub
	if s.prev == nil {
		return
	}
	if m.subs == sc {
		m.subs = s.next
		if s.next != nil {
			s.next.sub.prev = s.prev
		}
	} else {
		s.prev.sub.next = s.next
		if s.next != nil {
			s.next.sub.prev = s.prev
		} else {
			m.subs.sub.prev = s.prev
		}
	}
	s.prev, s.next = nil, nil
}

// takeSubConn is a subrequest connection from the worker's free list (they are
// reused: a request that checks every time costs no allocation).
func (w *Worker) takeSubConn() *conn {
	if n := len(w.freeSubs); n > 0 {
		sc := w.freeSubs[n-1]
		w.freeSubs[n-1] = nil
		w.freeSubs = w.freeSubs[:n-1]
		return sc
	}
	return &conn{sub: &subState{}}
}

// maxFreeSubs bounds the subrequest connections a worker keeps for reuse.
const maxFreeSubs = 256

// SubrequestHooks are how a module hears of its subrequest.
type SubrequestHooks struct {
	// Header runs when the subrequest's response head is sent (through the header
	// filters): its Status, Header and the variables of its content handler
	// ($upstream_http_*, $sent_http_*) are valid during the call. It may not run
	// (the subrequest failed before a head).
	Header func(sr *Request)
	// Done runs once the subrequest ended and is gone, with the status it answered
	// (0 without one), maybe before StartSubrequest returns. Not after
	// CancelSubrequest.
	Done func(status int)
}

// StartSubrequest runs uri (a path without arguments) as a subrequest of r, whose
// module hears of it through h. The parent waits (its phase handler returns Again)
// until h.Done, or cancels it (CancelSubrequest) if it ends first; the core cancels
// the subrequests of a client connection that closes.
func (r *Request) StartSubrequest(uri []byte, h SubrequestHooks) *Request {
	sr := r.newSub(h, false)
	sr.req = r.req // the parent's head: offsets into the client's input (kept in step by keep)
	sr.uriBuf = append(sr.newURIBuf(len(uri)+1), uri...)
	sr.args, sr.uriChanged = sr.args[:0], true
	sr.c.sub.main.addSub(sr.c)
	sr.phase = r.snap.serverIndex
	sr.RunPhases()
	return sr
}

// StartBackground runs r's content handler again in a request of its own that
// outlives r and its client connection (nginx's background subrequest, a clone
// of r in its location, for proxy_cache_background_update): the same URI,
// arguments, location and head (a copy of it), no body, what it would send
// dropped; h.Done hears of its end. The client's going does not cancel it; the
// content handler of a background request must bound its own run (the proxy's
// timeouts do).
func (r *Request) StartBackground(h SubrequestHooks) *Request {
	c := r.c
	sr := r.newSub(h, true)
	sc, st := sr.c, sr.c.sub
	pool := c.conn.Loop().Pool()
	raw := r.RawHead()
	st.head = append(pool.Get(len(raw))[:0], raw...)
	sr.req = r.req // its limits and name rules
	sr.req.Reset()
	sr.req.Parse(st.head) // parsed before, parsed again the same
	sr.uriBuf = append(sr.newURIBuf(len(r.uriBuf)+1), r.uriBuf...)
	args, _ := r.Args()
	sr.args, sr.uriChanged = append(sr.args[:0], args...), true
	sr.loc, sr.prefix, sc.lcf = r.loc, r.prefix, c.lcf
	sr.redirects = r.redirects
	// The location's regex captures, as nginx's clone takes them ($1 in proxy_pass).
	sr.caps, sr.capData, sr.ncaps = append(sr.caps[:0], r.caps...), append(sr.capData[:0], r.capData...), r.ncaps
	sr.phase = r.snap.contentIndex
	sr.RunPhases()
	return sr
}

// newSub takes a subrequest connection and request for r; background: one that
// does not belong to r's client connection.
func (r *Request) newSub(h SubrequestHooks, background bool) *Request {
	c := r.c
	sc := c.w.takeSubConn()
	st := sc.sub
	*sc = conn{w: c.w, id: c.id, state: csWait, requests: c.requests, opened: c.opened,
		srvConf: c.srvConf, lcf: c.srvConf, sub: st}
	*st = subState{parent: r, main: c, hooks: h, sock: subSocket{loop: c.conn.Loop(), fd: c.conn.Fd(),
		local: c.conn.LocalAddr(), remote: c.conn.RemoteAddr()}}
	sc.conn = &st.sock
	if c.sub != nil {
		st.main = c.sub.main
	}
	if background {
		st.parent, st.main, st.sock.fd = nil, nil, -1
	}
	sc.takeRequest()
	sr := sc.Request
	sr.snap, sr.srv, sr.loc, sr.prefix = r.snap, r.srv, nil, ""
	sr.started = time.Now()
	sr.c.w.seq++
	sr.seq = sr.c.w.seq // a request of its own: its $upstream_* start afresh
	sr.met, sr.mods = 0, &r.snap.all
	sr.wireSent, sr.headSize, sr.bodyWire, sr.hasID = 0, 0, 0, false
	sr.status, sr.bodySent, sr.redirects, sr.forceStatus = 0, 0, 0, 0
	sr.internalGET = true // a subrequest is a GET without a body (nginx's), HEAD too
	sr.errorPageDone, sr.carried, sr.carriedType = false, sr.carried[:0], sr.carriedType[:0]
	sr.body, sr.buffering, sr.headerSent, sr.done, sr.complete = BodyNone, false, false, false, false
	sr.logged = true // subrequests are not logged
	sr.bodyFate = bodyDropped
	sr.remote, sr.remoteSet, sr.accessCode = r.remote, r.remoteSet, 0
	sr.pending = nil
	sr.expectTrailers, sr.trailers = false, sr.trailers[:0]
	sr.resetVars()
	return sr
}

// IsSubrequest reports a subrequest.
func (r *Request) IsSubrequest() bool { return r.c.sub != nil }

// IsBackground reports a request of StartBackground.
func (r *Request) IsBackground() bool { return r.c.sub != nil && r.c.sub.main == nil }

// Parent is the request a subrequest runs for, nil for a client's request.
func (r *Request) Parent() *Request {
	if s := r.c.sub; s != nil {
		return s.parent
	}
	return nil
}

// CancelSubrequest ends a subrequest that is still running without calling its
// done: the parent went away. Its content handler is aborted.
func (r *Request) CancelSubrequest() {
	c := r.c
	if c == nil || c.sub == nil || c.Request != r {
		return
	}
	c.sub.canceled = true
	c.endSub()
}

// endSub ends a subrequest's run: its buffers and request state go back, then
// Done hears of it.
func (c *conn) endSub() {
	r, s := c.Request, c.sub
	if r == nil || c.state == csClosed {
		return
	}
	c.state = csClosed
	status := r.status
	c.abortPending()
	c.freeURIBuf()
	c.releaseBodyBuf()
	c.giveRequest()
	if s.head != nil {
		c.conn.Loop().Pool().Put(s.head[:cap(s.head)])
	}
	if m := s.main; m != nil {
		m.removeSub(c)
	}
	done := s.hooks.Done
	if s.canceled {
		done = nil
	}
	*s = subState{}
	if w := c.w; len(w.freeSubs) < maxFreeSubs {
		w.freeSubs = append(w.freeSubs, c) // c is not touched after this
	}
	if done != nil {
		done(status)
	}
}

// keepSubsInStep points the running subrequests' heads at the client's input
// again after it moved (keep).
func (c *conn) keepSubsInStep() {
	for sc := c.subs; sc != nil; sc = sc.sub.next {
		if sc.Request != nil {
			sc.req = c.req
		}
	}
}

// subSocket is a subrequest's connection: it drops what is written and does
// nothing a socket does; the client's connection gave the loop, descriptor and
// addresses (a background request's descriptor is -1: the client's may be gone).
type subSocket struct {
	loop          *eventloop.Loop
	fd            int
	local, remote netip.AddrPort
}

func (s *subSocket) Write(p []byte) (int, error) { return len(p), nil }
func (s *subSocket) Writev(bufs [][]byte) (int, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n, nil
}
func (s *subSocket) CloseWrite()                          {}
func (s *subSocket) WriteFile(fd int, off, n int64) error { return nil }
func (s *subSocket) SetSendfile(on bool, maxChunk int)    {}
func (s *subSocket) Close() error                         { return nil }
func (s *subSocket) PauseRead()                           {}
func (s *subSocket) ResumeRead()                          {}
func (s *subSocket) SetIdle(idle bool)                    {}
func (s *subSocket) SetTimeout(d time.Duration)           {}
func (s *subSocket) Queued() int                          { return 0 }
func (s *subSocket) SetWriteTimeout(d time.Duration)      {}
func (s *subSocket) SetWriteWatermarks(high, low int)     {}
func (s *subSocket) SetResetOnWriteTimeout(on bool)       {}
func (s *subSocket) Reset()                               {}
func (s *subSocket) SetRateLimit(rate, after int64)       {}
func (s *subSocket) Fd() int                              { return s.fd }
func (s *subSocket) LocalAddr() netip.AddrPort            { return s.local }
func (s *subSocket) RemoteAddr() netip.AddrPort           { return s.remote }
func (s *subSocket) Context() any                         { return nil }
func (s *subSocket) SetContext(v any)                     {}
func (s *subSocket) Loop() *eventloop.Loop                { return s.loop }
