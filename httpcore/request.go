package httpcore

import (
	"bytes"
	"log/slog"
	"net/netip"
	"time"
	"unsafe"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// Request is the request a client connection is serving, as modules see it: its
// head, its place in the configuration, its body, and the way to answer it. It is
// valid from the moment a handler gets it until the request finishes (Finish, an
// answer, Fail, Abort); a module that answers later (SetPending) must not touch it
// after the core aborted its pending or after it finished the request itself.
//
// Request states are reused from request to request, also by other connections of
// the same loop; the contexts (Ctx) are not cleared, so a module may keep what it
// allocated there for the next request, and must reset it when it starts.
type Request struct {
	c        *conn
	req      http1.Request
	snap     *Snapshot
	srv      *conf.Server
	loc      *conf.Location
	prefix   string // the matched prefix location's path
	uriBuf   []byte // uriSmall or pooled (newURIBuf): the normalised path ($uri)
	started  time.Time
	status   int   // the status sent (0 before the head went out)
	bodySent int64 // body bytes passed to the connection, without chunk framing
	headSent int64 // the response head's length
	// For $bytes_sent and $body_bytes_sent as nginx counts them (c->sent and
	// r->header_size): every byte written for the response, framing included, and
	// the head's share of it.
	wireSent int64
	headSize int64
	bodyWire int64  // request body bytes read off the wire for a handler, framing included ($request_length)
	seq      uint64 // the worker's count of requests at this one's start (Seq)
	// met: the bits of the modules active at some levels only (Setup.ActiveWhere)
	// whose handlers or filters the request met; their log handlers run for it.
	met uint64
	// mods is what works where the response head went through its filters
	// (SendHeader): its body goes through the same body filters.
	mods      *levelModules
	pipelined bool     // the head was already read when the request before it ended ($pipe)
	id        [32]byte // $request_id, made on first use (hasID)
	hasID     bool
	redirects int // internal redirects taken
	phase     int // the next entry of the phase engine
	// errorPageDone: an error met error pages with recursive_error_pages off, so no
	// later error gets one (nginx's r->error_page).
	errorPageDone bool
	carried       []byte // fields an answer passes on to what replaces it (intercepted error, X-Accel-Redirect)
	carriedType   []byte // the Content-Type an X-Accel-Redirect response passes on
	args          []byte // $args after an internal redirect (uriChanged)
	uriChanged    bool   // an internal redirect replaced $uri (and the arguments)
	forceStatus   int    // the status an error_page imposes on the response; 0: none
	internalGET   bool   // after an error_page redirect the request goes on as GET
	// remote is the client address a module set for this request (realip), in
	// force when remoteSet; the connection's peer stays in conn.remote.
	remote     netip.AddrPort
	remoteSet  bool
	accessCode int16 // satisfy any: the 401 or 403 an access handler would answer (nginx's r->access_code)
	logged     bool  // the log phase ran
	done       bool  // finished: the connection went on (or is going) to the next request
	// complete: the response ended whole (Finish), nginx's r->request_complete
	// ($request_completion); not for a request closed, aborted or answered 444.
	complete   bool
	headerSent bool
	// clientClosed: the client's connection went while an answer was pending and
	// before its head went out: logged as 499, nginx's client closed request.
	clientClosed bool
	limitRate    int64 // SetLimitRate's, when limitRateSet
	limitRateSet bool

	body          BodyKind
	contentLength int64    // the body's length (Content-Length, or a body read whole)
	buffering     bool     // the body is read whole before the content handler goes on
	countOnly     bool     // a body read whole is counted, not kept
	bodyBuf       []byte   // pooled: the buffered body, or its part not yet in spool
	spool         BodyFile // the buffered body beyond client_body_buffer_size
	inFileOnly    uint8    // client_body_in_file_only of the location that read the body
	bodyDropped   bool     // CountBody: the body outgrew memory and was not kept
	bodyFileName  []byte   // the named body file's path ($request_body_file); empty: none
	bodyLen       http1.LengthBody
	chunks        http1.ChunkedDecoder
	bodyTotal     int64 // body bytes received, against client_max_body_size
	bodyFate      bodyFate
	pending       Pending

	// The response on its way out (header.go).
	out Header
	// expectTrailers: trailer fields will end the body (ExpectTrailers); trailers
	// is their section as it goes out, "0\r\n", the fields, "\r\n" (AddTrailer).
	expectTrailers bool
	trailers       []byte
	head           []byte // the head written, waiting in the worker's scratch for the first body bytes
	chunked        bool   // the body goes chunk-encoded
	headerOnly     bool   // no body goes to the client (HEAD, 1xx, 204, 304)
	o              Out
	iov            [6][]byte
	chunkHdr       [20]byte
	ctx            [maxKeys]any

	// Declared variables and regex captures (vars_declared.go).
	vslots   []varSlot
	varData  []byte
	caps     []int // the last match's offsets into capData; ncaps of them are set
	ncaps    int
	varDepth int    // declared variables being computed inside one another
	capData  []byte // the subject of the last match with captures
	hostBuf  []byte // Host as server names match it, for a server_name regex's captures
	// rewritten: a rewrite changed $uri in the rewrite phase: the post-rewrite phase
	// looks for the location again (nginx's r->uri_changed).
	rewritten bool

	// uriSmall holds $uri when it fits (newURIBuf).
	uriSmall [uriSmallSize]byte
}

// BodyKind is how a request body is framed.
type BodyKind uint8

const (
	BodyNone BodyKind = iota
	BodyLength
	BodyChunked
)

// Head is the parsed request head.
func (r *Request) Head() *http1.Request { return &r.req }

// RawHead is the request head as it arrived.
func (r *Request) RawHead() []byte {
	c := r.c
	if c.sub != nil {
		if c.sub.main == nil {
			return c.sub.head // a background request's copy
		}
		return c.sub.main.RawHead()
	}
	if c.headLen > 0 && int(c.headLen) <= len(c.in) {
		return c.in[:c.headLen]
	}
	return nil
}

// IsHEAD reports a HEAD request.
func (r *Request) IsHEAD() bool { return string(r.req.Method()) == "HEAD" && r.c.sub == nil }

// AsGET reports a request that goes on as GET without its body: after an error_page
// redirect or ForceGET.
func (r *Request) AsGET() bool { return r.internalGET }

// ForceGET makes the request go on as GET without its body (HEAD stays HEAD), as
// nginx does after X-Accel-Redirect.
func (r *Request) ForceGET() { r.internalGET = true }

// uriSmallSize is the longest $uri (plus one byte) a request holds itself.
const uriSmallSize = 256

// newURIBuf returns an empty buffer for $uri of at least n bytes: the request's
// own uriSmall when n fits, else a pool buffer. Most URIs fit, so most requests
// take no pool buffer for $uri (a Get and a Put per request).
func (r *Request) newURIBuf(n int) []byte {
	if n <= len(r.uriSmall) {
		return r.uriSmall[:0]
	}
	return r.c.conn.Loop().Pool().Get(n)[:0]
}

// freeURIBuf gives $uri's buffer back (to the pool if it came from there).
func (r *Request) freeURIBuf() {
	if r.uriBuf != nil && unsafe.SliceData(r.uriBuf) != &r.uriSmall[0] {
		r.c.conn.Loop().Pool().Put(r.uriBuf[:cap(r.uriBuf)])
	}
	r.uriBuf = nil
}

// URI is $uri: the normalised path, or what an internal redirect made it.
func (r *Request) URI() []byte { return r.uriBuf }

// Args is $args: the client's arguments, or after an internal redirect those of its
// target; ok reports a "?".
func (r *Request) Args() ([]byte, bool) {
	if r.uriChanged {
		return r.args, len(r.args) > 0
	}
	return r.req.Query()
}

// Internal reports a request that an internal redirect brought where it is (index,
// try_files, error_page, X-Accel-Redirect), nginx's r->internal.
func (r *Request) Internal() bool { return r.redirects > 0 }

// Redirects is the number of internal redirects the request has taken: a module
// that keeps state for the location it ran in (nginx clears r->ctx on an internal
// redirect) tells by it whether the request has moved on since.
func (r *Request) Redirects() int { return r.redirects }

// Conn is the client connection as the loop's layers hand it to the core (a TLS or
// PROXY protocol layer's connection, which a module may look through), for a content
// handler that sets its socket options or how it sends files
// (eventloop.Conn.SetSendfile).
func (r *Request) Conn() eventloop.Conn { return r.c.conn }

// ErrorStatus is the status an error_page imposes on the response being produced
// (0: none), nginx's r->err_status: a content handler's filters see it, not 200.
func (r *Request) ErrorStatus() int { return r.forceStatus }

// ClearErrorStatus tells SendHeader that the head carries the error_page's status
// already, as the handler's own filters may have changed it since (a 304 or 206 of
// "error_page 404 =200 /file").
func (r *Request) ClearErrorStatus() { r.forceStatus = 0 }

// SetResponseStatus makes code the $status of a response about to be built, unless
// an error_page set it: nginx's headers_out.status, which $status shows when
// err_status is 0 (return sets it before it evaluates its text).
func (r *Request) SetResponseStatus(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// URIChanged reports that an internal redirect replaced the client's URI.
func (r *Request) URIChanged() bool { return r.uriChanged }

// Server is the server that took the request (the address's default one until Host
// named one); nil when no server listens on the address any more.
func (r *Request) Server() *conf.Server { return r.srv }

// Location is the location the request is served from (nil before it is found).
func (r *Request) Location() *conf.Location { return r.loc }

// Prefix is the path of the prefix location that matched, "" for others.
func (r *Request) Prefix() string { return r.prefix }

// LocConf is module m's config for the request: its location's, else its server's
// (in the server rewrite phase), else nil.
func (r *Request) LocConf(m *conf.Module) any {
	switch {
	case r.loc != nil:
		return r.loc.Conf(m)
	case r.srv != nil:
		return r.srv.Conf(m)
	}
	return nil
}

// CoreConf is the core's config for the request.
func (r *Request) CoreConf() *LocConf { return r.c.lcf }

// LocalAddr is the address the client connected to.
func (r *Request) LocalAddr() netip.AddrPort { return r.c.localAddr() }

// HTTPS reports a connection on an address that speaks TLS (nginx's $https),
// unless the client spoke plain HTTP to it (the TLS layer's connection says so).
func (r *Request) HTTPS() bool {
	if p, ok := r.c.conn.(interface{ PlainHTTP() bool }); ok && p.PlainHTTP() {
		return false
	}
	_, a := r.c.w.addrServers(r.c.localAddr())
	return a != nil && a.SSL
}

// RemoteAddr is the client's address ($remote_addr, $remote_port): the
// connection's peer, or the address SetRemoteAddr gave the request.
func (r *Request) RemoteAddr() netip.AddrPort {
	if r.remoteSet {
		return r.remote
	}
	return r.c.remoteAddr()
}

// PeerAddr is the address of the connection's peer, whatever SetRemoteAddr said
// ($realip_remote_addr).
func (r *Request) PeerAddr() netip.AddrPort { return r.c.remoteAddr() }

// SetRemoteAddr makes a the client's address for the rest of this request (nginx's
// realip module changes c->sockaddr until the request ends): every later phase,
// variable and log sees it. A zero port leaves $remote_port empty, as in nginx. The
// next request on the connection starts from the peer's address again.
func (r *Request) SetRemoteAddr(a netip.AddrPort) { r.remote, r.remoteSet = a, true }

// RemoteAddrSet reports that SetRemoteAddr ran for this request.
func (r *Request) RemoteAddrSet() bool { return r.remoteSet }

// Worker is the loop's worker.
func (r *Request) Worker() *Worker { return r.c.w }

// Log is the error log.
func (r *Request) Log() *slog.Logger { return r.c.w.log }

// Snapshot is the configuration snapshot the request is served with.
func (r *Request) Snapshot() *Snapshot { return r.snap }

// Ctx is module key's context for the request (kept across reuse, see Request).
func (r *Request) Ctx(k Key) any { return r.ctx[k] }

// SetCtx sets module key's context.
func (r *Request) SetCtx(k Key, v any) { r.ctx[k] = v }

// Started is when the request's head was read.
func (r *Request) Started() time.Time { return r.started }

// BytesReceived is the request's head and the body bytes read so far (nginx's
// $request_length, without a chunked body's framing).
func (r *Request) BytesReceived() int64 { return int64(r.c.headLen) + r.bodyTotal }

// BytesSent is the response head and the body bytes sent so far (nginx's
// $bytes_sent, without chunked framing).
func (r *Request) BytesSent() int64 { return r.headSent + r.bodySent }

// ConnectionRequests is the number of requests the connection has started, this one
// included ($connection_requests).
func (r *Request) ConnectionRequests() int { return int(r.c.requests) }

// Status is the status sent to the client, 0 before the response head went out.
func (r *Request) Status() int { return r.status }

// BodyBytesSent is $body_bytes_sent: nginx's c->sent - r->header_size, so chunk
// framing counts as body.
func (r *Request) BodyBytesSent() int64 { return max(r.wireSent-r.headSize, 0) }

// Seq identifies the request among those its worker started: a module that keeps
// state for a request in a reused context (Ctx) tells its own from a previous
// request's by it.
func (r *Request) Seq() uint64 { return r.seq }

// HeaderSent reports that the response head went out (or is on its way).
func (r *Request) HeaderSent() bool { return r.headerSent }

// DisableKeepAlive makes the connection close after this request.
func (r *Request) DisableKeepAlive() { r.c.keepAlive = false }

// SetPending makes p the request's pending answer (nil: none): from now on the core
// tells it of the body, the client's backpressure and the client's end.
func (r *Request) SetPending(p Pending) { r.pending = p }

// Pending is the request's pending answer, or nil.
func (r *Request) Pending() Pending { return r.pending }

// abortPending detaches and aborts the pending answer, if any.
func (r *Request) abortPending() {
	if r == nil {
		return
	}
	if p := r.pending; p != nil {
		r.pending = nil
		p.Abort()
	}
}

// Carry adds a field that an answer replacing this one keeps (nginx keeps such
// fields of an upstream response in headers_out across an internal redirect).
func (r *Request) Carry(name, value []byte) {
	r.carried = append(append(append(append(r.carried, name...), ": "...), value...), "\r\n"...)
}

// Uncarry drops the carried fields called name (any case): a filter that sets the
// field itself replaces what an earlier answer passed on, as nginx's expires
// replaces an X-Accel-Redirect response's Expires and Cache-Control.
func (r *Request) Uncarry(name string) {
	b := r.carried
	out := b[:0]
	for len(b) > 0 {
		end := bytes.Index(b, crlf)
		if end < 0 {
			end = len(b)
		} else {
			end += len(crlf)
		}
		line := b[:end]
		if colon := bytes.IndexByte(line, ':'); colon < 0 || !http1.EqualFold(line[:colon], name) {
			out = append(out, line...) // in place: out never passes b
		}
		b = b[end:]
	}
	r.carried = out
}

// SetCarriedType sets the Content-Type the answer replacing this one takes when it
// has none of its own.
func (r *Request) SetCarriedType(v []byte) { r.carriedType = append(r.carriedType[:0], v...) }

// CarriedType is the Content-Type SetCarriedType passed on, or nil.
func (r *Request) CarriedType() []byte { return r.carriedType }

// SetWriteWatermarks gives the client connection its own output watermarks until
// the response ends (eventloop.Conn.SetWriteWatermarks).
func (r *Request) SetWriteWatermarks(high, low int) {
	r.c.conn.SetWriteWatermarks(high, low)
	r.c.ownWatermarks = true
}

// Tunnel turns the connection into a byte tunnel after a 101 response (the head is
// sent first): it returns what the client sent after the request head, for the
// pending to pass on now; every later byte goes to the pending's TunnelData.
func (r *Request) Tunnel() []byte {
	c := r.c
	r.Flush()
	c.state = csTunnel
	c.setUpgraded()
	var rest []byte
	if len(c.in) > int(c.headLen) {
		rest = c.in[c.headLen:]
		c.in = c.in[:c.headLen]
	}
	if c.paused {
		c.paused = false
		c.conn.ResumeRead()
	}
	c.conn.SetTimeout(0)
	return rest
}

// TunnelWrite sends bytes to the client after Tunnel, past the filters.
func (r *Request) TunnelWrite(p []byte) {
	r.wireSent += int64(len(p))
	r.c.conn.Write(p)
}

// PauseBody stops reading the client while what it sends (the body, or tunnel
// bytes) cannot be passed on.
func (r *Request) PauseBody() {
	if c := r.c; c.state == csBody || c.state == csTunnel {
		c.conn.PauseRead()
	}
}

// ResumeBody undoes PauseBody.
func (r *Request) ResumeBody() {
	if c := r.c; (c.state == csBody || c.state == csTunnel) && !c.paused {
		c.conn.ResumeRead()
	}
}

// Finish ends the request whose answer is complete: the connection goes on to the
// next request or closes.
func (r *Request) Finish() { r.c.finish() }

// Fail answers status if nothing of a response went out yet, else closes the
// connection (a truncated response must never look complete).
func (r *Request) Fail(status int) { r.c.failRequest(status) }

// Abort closes the connection: the response cannot be finished.
func (r *Request) Abort() { r.c.close() }

// failRequest answers an error for the current request if nothing of a response was
// sent yet, else closes the connection (a truncated response must never look
// complete).
func (c *conn) failRequest(status int) {
	if c.headerSent {
		c.close()
		return
	}
	c.respondStatus(status)
}
