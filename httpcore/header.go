package httpcore

import (
	"bytes"
	"strconv"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// Constant output, hoisted so that passing it to Conn methods does not allocate.
var (
	continue100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")
	crlf        = []byte("\r\n")
	lastChunk   = []byte("0\r\n\r\n")

	contentTypeName = []byte("Content-Type")
	locationName    = []byte("Location")
)

// Header is a response head on its way to the client: the content handler fills it
// (Request.NewHeader), the header filters change it (Request.Header), the core's writer sends it.
// Framing (Content-Length or chunked), Connection, Keep-Alive, Server and Date are
// the writer's: fields must not carry them (but Server and Date with HasServer,
// HasDate).
type Header struct {
	Status int
	// Reason is the reason phrase (nil: nginx's for Status); valid until SendHeader
	// returns.
	Reason []byte
	// ContentLength is the body's length, -1 when unknown (then the body goes
	// chunked to an HTTP/1.1 client, and to an HTTP/1.0 one until the connection
	// closes).
	ContentLength int64
	// HasServer, HasDate: the fields carry Server, Date (proxy_pass_header), so the
	// writer adds none.
	HasServer, HasDate bool

	fields   []field
	buf      []byte // values built in place (Buf, AddBuilt)
	location int    // 1 + the index of the field that is the Location to make absolute; 0: none
}

// field is one header field; name and value point into Header.buf or into memory
// the caller keeps valid until SendHeader returns.
type field struct {
	name, value []byte
	deleted     bool
}

// Header is the response head: what the handler filled (NewHeader), for the
// header filters.
func (r *Request) Header() *Header { return &r.out }

// NewHeader resets the response head and returns it for the handler to fill.
func (r *Request) NewHeader() *Header {
	h := &r.out
	h.Status, h.Reason, h.ContentLength, h.HasServer, h.HasDate = 0, nil, -1, false, false
	h.fields, h.buf, h.location = h.fields[:0], h.buf[:0], 0
	return h
}

// Add adds a field. name and value are not copied: they must stay valid until
// SendHeader returns.
func (h *Header) Add(name, value []byte) {
	h.fields = append(h.fields, field{name: name, value: value})
}

// Buf is the head's own buffer, to build a value in: append the value to it and
// pass the grown buffer and where the value starts to AddBuilt. Bytes appended to
// it stay in place until the next Request.NewHeader.
func (h *Header) Buf() []byte { return h.buf }

// AddBuilt adds a field whose value is b[from:], b being what Buf returned with the
// value appended.
func (h *Header) AddBuilt(name, b []byte, from int) int {
	h.buf = b
	h.fields = append(h.fields, field{name: name, value: b[from:len(b):len(b)]})
	return len(h.fields) - 1
}

// SetLocation marks field i as the Location the writer makes absolute when it is a
// path, as nginx does with r->headers_out.location (absolute_redirect).
func (h *Header) SetLocation(i int) { h.location = i + 1 }

// AddLocation adds a Location field made absolute by the writer when it is a path;
// control characters in it are escaped (the value may come from variables).
func (h *Header) AddLocation(value []byte) {
	b := h.buf
	from := len(b)
	b = EscapeControls(append(b, value...), from)
	h.SetLocation(h.AddBuilt(locationName, b, from))
}

// Get is the first field called name (any case).
func (h *Header) Get(name string) ([]byte, bool) {
	for i := range h.fields {
		if f := &h.fields[i]; !f.deleted && http1.EqualFold(f.name, name) {
			return f.value, true
		}
	}
	return nil, false
}

// Next is the index of the first field called name (any case) from index from on,
// or -1: a filter walks every field of a name with it (Value reads one).
func (h *Header) Next(name string, from int) int {
	for i := max(from, 0); i < len(h.fields); i++ {
		if f := &h.fields[i]; !f.deleted && http1.EqualFold(f.name, name) {
			return i
		}
	}
	return -1
}

// Value is the value of field i (from Next).
func (h *Header) Value(i int) []byte { return h.fields[i].value }

// Field is the first field called name (any case), with its name as written.
func (h *Header) Field(name string) (fieldName, value []byte, ok bool) {
	for i := range h.fields {
		if f := &h.fields[i]; !f.deleted && http1.EqualFold(f.name, name) {
			return f.name, f.value, true
		}
	}
	return nil, nil, false
}

// Del removes every field called name (any case).
func (h *Header) Del(name string) {
	for i := range h.fields {
		if f := &h.fields[i]; http1.EqualFold(f.name, name) {
			f.deleted = true
		}
	}
}

// SendHeader passes the response head through the header filters to the core's
// writer, which writes it out with the first body bytes (SendBody) or at Flush. An
// error_page's status replaces the handler's first, as in nginx's
// ngx_http_send_header.
func (r *Request) SendHeader() {
	h := &r.out
	if r.forceStatus != 0 {
		h.Status, h.Reason = r.forceStatus, nil
	}
	r.status = h.Status
	r.headerSent = true
	m := r.c.modules(r.snap)
	r.met, r.mods = r.met|m.active, m
	m.header(r)
	if s := r.c.sub; s != nil && s.hooks.Header != nil {
		s.hooks.Header(r)
	}
}

// writeHeader is the last header filter: the status line, Server, Date, the carried
// fields, the handler's fields, the body's framing, Connection and Keep-Alive. The
// head waits in the worker's scratch buffer for the first body bytes, so a small
// response goes out in one system call.
func (r *Request) writeHeader() {
	c, h := r.c, &r.out
	status := h.Status
	b := c.w.scratch[:0]
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	if len(h.Reason) > 0 {
		b = append(b, h.Reason...)
	} else {
		b = append(b, reason(status)...)
	}
	b = append(b, "\r\n"...)
	if !h.HasServer {
		b = c.appendServerToken(append(b, "Server: "...))
		b = append(b, "\r\n"...)
	}
	if !h.HasDate {
		b = append(b, c.w.dateHeader(c.w.loop.Now())...)
	}
	b = append(b, r.carried...)
	for i := range h.fields {
		f := &h.fields[i]
		if f.deleted {
			continue
		}
		if i+1 == h.location && r.c.sub == nil {
			// Made absolute in the head's own buffer, so that $sent_http_location
			// is the URL sent, as nginx's header filter leaves it for the log (and
			// as it, not for a subrequest, whose head goes nowhere).
			from := len(h.buf)
			if h.buf = r.appendAbsolute(h.buf, f.value); len(h.buf) > from {
				h.buf = append(h.buf, f.value...)
				f.value = h.buf[from:len(h.buf):len(h.buf)]
			}
		}
		b = append(b, f.name...)
		b = append(b, ": "...)
		b = append(b, f.value...)
		b = append(b, "\r\n"...)
	}
	bodiless := status < 200 || status == 204 || status == 304
	r.headerOnly = bodiless || r.IsHEAD()
	r.chunked = false
	if r.expectTrailers && !r.headerOnly && r.req.ProtoMinor() == 1 && c.lcf.ChunkedEncoding {
		// As nginx's chunked filter: trailers need chunks, so the length goes.
		h.ContentLength = -1
		h.Del("content-length")
	}
	if status != 101 { // an upgrade's own Connection and Upgrade are in its fields
		switch {
		case h.ContentLength >= 0 && (r.IsHEAD() || !bodiless):
			// A HEAD answer keeps the length of what GET would send.
			b = append(b, "Content-Length: "...)
			b = strconv.AppendInt(b, h.ContentLength, 10)
			b = append(b, "\r\n"...)
		case h.ContentLength < 0 && !r.headerOnly && r.req.ProtoMinor() == 1 && c.lcf.ChunkedEncoding:
			r.chunked = true
			b = append(b, "Transfer-Encoding: chunked\r\n"...)
		case h.ContentLength < 0 && !r.headerOnly:
			c.keepAlive = false // an HTTP/1.0 client reads the body until the close
		}
		b = c.appendConnection(b)
	}
	b = append(b, "\r\n"...)
	c.w.scratch = b[:0]
	r.head = b
	r.headSent = int64(len(b))
	r.headSize = int64(len(b))
	if r.limitRateSet || c.lcf.LimitRate != nil || c.rateLimited {
		r.applyLimitRate()
	}
}

// applyLimitRate sets (or lifts) the connection's rate limit for this response:
// SetLimitRate's value, else limit_rate's, evaluated when the head goes out as
// nginx evaluates it at the first write.
func (r *Request) applyLimitRate() {
	c := r.c
	if !r.limitRateSet {
		r.limitRate, r.limitRateSet = r.evalSize(c.lcf.LimitRate), true
	}
	if r.limitRate <= 0 && !c.rateLimited {
		return
	}
	c.rateLimited = r.limitRate > 0
	c.conn.SetRateLimit(r.limitRate, r.evalSize(c.lcf.LimitRateAfter))
}

// SetLimitRate sets the response's rate limit (bytes per second, 0 for none) in
// place of limit_rate, before its head is sent: an upstream's X-Accel-Limit-Rate.
func (r *Request) SetLimitRate(n int64) { r.limitRate, r.limitRateSet = max(n, 0), true }

// evalSize is a size template's value, 0 for none or one that is no size.
func (r *Request) evalSize(t *Template) int64 {
	if t == nil {
		return 0
	}
	b := t.Append(r.c.w.sizeBuf[:0], r)
	r.c.w.sizeBuf = b[:0]
	return parseSize(b)
}

// parseSize reads a size as nginx's ngx_parse_size (digits and k, m or g); -1 for
// anything else.
func parseSize(b []byte) int64 {
	mult := int64(1)
	if n := len(b); n > 0 {
		switch b[n-1] | 0x20 {
		case 'k':
			mult, b = 1<<10, b[:n-1]
		case 'm':
			mult, b = 1<<20, b[:n-1]
		case 'g':
			mult, b = 1<<30, b[:n-1]
		}
	}
	if len(b) == 0 || len(b) > 15 {
		return -1
	}
	var v int64
	for _, d := range b {
		if d < '0' || d > '9' {
			return -1
		}
		v = v*10 + int64(d-'0')
	}
	return v * mult
}

// appendConnection adds the Connection header (and Keep-Alive: timeout=N when
// keepalive_timeout has a second value). As in nginx, keepalive_timeout and
// keepalive_requests are the location's.
func (c *conn) appendConnection(head []byte) []byte {
	if !c.keepAlive || c.lcf.KeepaliveTimeout <= 0 || int(c.requests) >= c.lcf.KeepaliveRequests || c.w.loop.Draining() ||
		c.lcf.KeepaliveDisable != 0 && c.keepaliveDisabled() {
		c.keepAlive = false
		return append(head, "Connection: close\r\n"...)
	}
	head = append(head, "Connection: keep-alive\r\n"...)
	if kh := c.lcf.KeepaliveHeader; kh > 0 {
		head = append(head, "Keep-Alive: timeout="...)
		head = strconv.AppendInt(head, int64(kh/time.Second), 10)
		head = append(head, "\r\n"...)
	}
	return head
}

// keepaliveDisabled: keepalive_disable names the client's browser, told from its
// User-Agent as nginx's ngx_http_process_user_agent tells it.
func (c *conn) keepaliveDisabled() bool {
	kd := c.lcf.KeepaliveDisable
	post := string(c.req.Method()) == "POST"
	if kd&KeepaliveDisableSafari == 0 && !post {
		return false // msie6 applies to POST requests only
	}
	if c.Request == nil {
		return false
	}
	ua := c.Request.headerValue("user-agent")
	if len(ua) == 0 {
		return false
	}
	msie, msie6 := false, false
	if i := bytes.Index(ua, []byte("MSIE ")); i >= 0 && i+7 < len(ua) {
		msie = true
		if ua[i+6] == '.' {
			switch ua[i+5] {
			case '4', '5':
				msie6 = true
			case '6':
				msie6 = !bytes.Contains(ua[i+8:], []byte("SV1"))
			}
		}
	}
	if bytes.Contains(ua, []byte("Opera")) {
		msie, msie6 = false, false
	}
	if msie6 && post && kd&KeepaliveDisableMSIE6 != 0 {
		return true
	}
	if msie || kd&KeepaliveDisableSafari == 0 || bytes.Contains(ua, []byte("Opera")) ||
		bytes.Contains(ua, []byte("Gecko/")) || bytes.Contains(ua, []byte("Chrome/")) {
		return false
	}
	return bytes.Contains(ua, []byte("Safari/")) && bytes.Contains(ua, []byte("Mac OS X"))
}

// appendAbsolute writes, before a Location value that starts with "/", the scheme,
// host and port that make it absolute, as nginx's header filter with
// absolute_redirect on (the default): the server's first name with
// server_name_in_redirect, else the request's host without its port, else the local
// address; then the local port unless it is the scheme's (80, 443) or
// port_in_redirect is off.
func (r *Request) appendAbsolute(h, location []byte) []byte {
	lcf := r.c.lcf
	if !lcf.AbsoluteRedirect || len(location) == 0 || location[0] != '/' || (len(location) > 1 && location[1] == '/') {
		return h
	}
	https := r.HTTPS()
	if https {
		h = append(h, "https://"...)
	} else {
		h = append(h, "http://"...)
	}
	local := r.c.localAddr()
	if lcf.ServerNameInRedirect {
		h = append(h, r.serverName()...)
	} else if host := r.req.Host(); len(host) > 0 {
		h = AppendLowerHost(h, host)
	} else if a := local.Addr(); a.Is6() && !a.Is4In6() {
		h = append(h, '[')
		h = a.AppendTo(h)
		h = append(h, ']')
	} else {
		h = a.Unmap().AppendTo(h)
	}
	if p := local.Port(); lcf.PortInRedirect && (https && p != 443 || !https && p != 80) {
		h = append(h, ':')
		h = strconv.AppendUint(h, uint64(p), 10)
	}
	return h
}

// SendBody passes body bytes through the body filters to the client; last marks the
// end of the body. p need stay valid only during the call.
func (r *Request) SendBody(p []byte, last bool) {
	o := &r.o
	*o = Out{Data: p, Last: last}
	r.mods.body(r, o)
}

// SendFile passes n bytes of the regular file fd from off through the body filters
// (fd need stay open only during the call); last marks the end of the body.
func (r *Request) SendFile(fd int, off, n int64, last bool) {
	r.SendFileSized(fd, off, n, 0, last)
}

// SendFileSized is SendFile for a caller that has just fstat'ed fd and found a
// regular file of size bytes (the static module, the cache): the connection
// then checks the range against size instead of calling fstat again.
func (r *Request) SendFileSized(fd int, off, n, size int64, last bool) {
	o := &r.o
	*o = Out{FileFd: fd, FileOff: off, FileN: n, FileSize: size, Last: last}
	r.mods.body(r, o)
}

// Flush sends what the filters and the writer hold (the head, when no body bytes
// came with it) now.
func (r *Request) Flush() {
	if r.head == nil && !r.mods.bodyFilters {
		return // nothing held: spare the chain
	}
	o := &r.o
	*o = Out{Flush: true}
	r.mods.body(r, o)
}

// writeBody is the last body filter: it writes to the connection, the head first if
// it still waits, chunk-encoding the body when the writer chose that.
func (r *Request) writeBody(o *Out) {
	c := r.c
	iov := r.iov[:0]
	if r.head != nil {
		iov = append(iov, r.head)
		r.head = nil
	}
	if !r.headerOnly {
		if n := len(o.Data); n > 0 {
			if r.chunked {
				iov = append(iov, http1.AppendChunkHeader(r.chunkHdr[:0], n))
			}
			iov = append(iov, o.Data)
			if r.chunked {
				iov = append(iov, crlf)
			}
			r.bodySent += int64(n)
		}
		if o.FileN > 0 {
			if r.chunked {
				iov = append(iov, http1.AppendChunkHeader(r.chunkHdr[:0], int(o.FileN)))
			}
			var err error
			if fw, ok := c.conn.(fileWriter); ok && (len(iov) > 0 || o.FileSize > 0) {
				for _, p := range iov {
					r.wireSent += int64(len(p))
				}
				size := o.FileSize
				if size <= 0 {
					size = -1 // not known: the connection's fstat
				}
				err = fw.WritevFileSized(iov, o.FileFd, o.FileOff, o.FileN, size)
				clear(iov)
			} else {
				r.write(iov, true)
				err = c.conn.WriteFile(o.FileFd, o.FileOff, o.FileN)
			}
			iov = r.iov[:0]
			if err != nil {
				c.w.log.Error("sending a file to the client failed: "+err.Error(), "client", c.RemoteAddr().String())
				c.keepAlive = false
				c.closeAfterFlush()
				return
			}
			r.wireSent += o.FileN
			if r.chunked {
				iov = append(iov, crlf)
			}
			r.bodySent += o.FileN
		}
		if o.Last && r.chunked {
			if len(r.trailers) > 0 {
				iov = append(iov, r.trailers)
			} else {
				iov = append(iov, lastChunk)
			}
		}
	}
	if c.closesAfter() && !o.Flush && (o.Last || r.bodyAllSent()) {
		r.writeCorked(iov)
		return
	}
	r.write(iov, !o.Last && !o.Flush)
}

// ExpectTrailers tells the writer, from a header filter, that trailer fields
// (AddTrailer) will end the body: as nginx's r->expect_trailers, a response with a
// body to an HTTP/1.1 client goes chunked (without its Content-Length) so that they
// can. A subrequest's response sends none.
func (r *Request) ExpectTrailers() {
	if r.c.sub == nil {
		r.expectTrailers = true
	}
}

// TrailersExpected reports that ExpectTrailers was called for the response.
func (r *Request) TrailersExpected() bool { return r.expectTrailers }

// AddTrailer adds the trailer field name with the value of t, from a body filter
// before the last body bytes go on; an empty value adds nothing, control characters
// are escaped. None for a response without body (HEAD, 204, 304); a response that
// is not chunked (HTTP/1.0) sends none, but $sent_trailer_NAME has them, as
// nginx's headers_out.trailers.
func (r *Request) AddTrailer(name []byte, t *Template) {
	if r.headerOnly {
		return // nginx's trailer filter skips a response without body (header_only)
	}
	b := r.trailers
	if len(b) == 0 {
		b = append(b, "0\r\n"...)
	} else {
		b = b[:len(b)-len(crlf)] // the section's end, put back below
	}
	mark := len(b)
	b = append(append(b, name...), ": "...)
	from := len(b)
	b = EscapeControls(t.Append(b, r), from)
	if len(b) == from {
		b = b[:mark]
	} else {
		b = append(b, crlf...)
	}
	if len(b) == len("0\r\n") {
		r.trailers = b[:0]
		return
	}
	r.trailers = append(b, crlf...)
}

// fileWriter is a connection that sends bytes and then a file with the file's
// first bytes in the same system call as the bytes (eventloop's connections), so
// that a response head does not go out on its own before the file; and that
// takes the file's size from a caller that has just fstat'ed it (size >= 0)
// instead of calling fstat again.
type fileWriter interface {
	WritevFileSized(bufs [][]byte, fd int, off, n, size int64) error
}

// bodyAllSent reports that the response's body (of a known length, or none) is
// all written once this write is: the response's end, and the close, follow
// (proxied bodies end with a Last of no bytes, after their last part).
func (r *Request) bodyAllSent() bool {
	return r.headerOnly || !r.chunked && r.out.ContentLength >= 0 && r.bodySent >= r.out.ContentLength
}

// writeCorked writes the end of a response to a connection that closes after it
// at the client's request: the loop's own connections hold the bytes in the
// socket so that they go out with the FIN, one packet fewer (eventloop.Corker).
func (r *Request) writeCorked(iov [][]byte) {
	cw, ok := r.c.conn.(eventloop.Corker)
	if !ok || len(iov) == 0 {
		r.write(iov, false)
		return
	}
	for _, p := range iov {
		r.wireSent += int64(len(p))
	}
	cw.WritevCorked(iov)
	clear(iov)
}

// moreWriter is a connection that may hold back the end of a write that more
// bytes follow (TLS fills its records with them): what it holds goes out with
// the next write, at FlushHeld, or by the end of the loop's batch.
type moreWriter interface {
	WritevMore(bufs [][]byte) (int, error)
	FlushHeld() error
}

// write sends iov with one system call; more says that more of the response
// follows.
func (r *Request) write(iov [][]byte, more bool) {
	for _, p := range iov {
		r.wireSent += int64(len(p))
	}
	if r.c.holds {
		mw := r.c.conn.(moreWriter)
		switch {
		case more && len(iov) > 0:
			mw.WritevMore(iov)
		case more:
		case len(iov) == 0:
			mw.FlushHeld()
		default:
			r.c.conn.Writev(iov)
		}
		clear(iov)
		return
	}
	switch len(iov) {
	case 0:
	case 1:
		r.c.conn.Write(iov[0])
	default:
		r.c.conn.Writev(iov)
	}
	clear(iov)
}

// EscapeControls percent-encodes the control characters but HTAB in h[from:], a
// header field value built from variables: $uri is decoded, so a client's %0D%0A would
// otherwise end the field and start one of the client's choosing (request or response
// splitting, which nginx lets through). It allocates only when it finds one and h has
// no room.
func EscapeControls(h []byte, from int) []byte {
	n := 0
	for _, c := range h[from:] {
		if isControl(c) {
			n++
		}
	}
	if n == 0 {
		return h
	}
	const hex = "0123456789ABCDEF"
	end := len(h)
	h = append(h, make([]byte, 2*n)...)
	for i, j := end-1, len(h)-1; i >= from; i-- {
		if c := h[i]; isControl(c) {
			h[j-2], h[j-1], h[j] = '%', hex[c>>4], hex[c&15]
			j -= 3
		} else {
			h[j] = c
			j--
		}
	}
	return h
}

func isControl(c byte) bool { return c < 0x20 && c != '\t' || c == 0x7f }
