package httpcore

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
)

// statusText is nginx's reason phrases, by code: every response's status line
// reads it, and indexing costs less than a map lookup.
var statusText = [600]string{
	100: "Continue", 101: "Switching Protocols",
	200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 206: "Partial Content",
	301: "Moved Permanently", 302: "Moved Temporarily", 303: "See Other", 304: "Not Modified",
	307: "Temporary Redirect", 308: "Permanent Redirect",
	400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
	405: "Not Allowed", 406: "Not Acceptable", 408: "Request Time-out", 409: "Conflict", 410: "Gone",
	411: "Length Required", 412: "Precondition Failed", 413: "Request Entity Too Large",
	414: "Request-URI Too Large", 415: "Unsupported Media Type", 416: "Requested Range Not Satisfiable",
	421: "Misdirected Request", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
	494: "Request Header Or Cookie Too Large", 495: "The SSL certificate error",
	496: "No required SSL certificate was sent", 497: "The plain HTTP request was sent to HTTPS port",
	500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Temporarily Unavailable",
	504: "Gateway Time-out", 505: "HTTP Version Not Supported", 507: "Insufficient Storage",
}

// pageTitle is the text of nginx's built-in page for code, which for two codes is
// not the reason phrase of its status line.
func pageTitle(code int) string {
	switch code {
	case 302:
		return "Found"
	case 401:
		return "Authorization Required"
	}
	return reason(code)
}

func reason(code int) string {
	if uint(code) < uint(len(statusText)) {
		return statusText[code]
	}
	return ""
}

// statusHeaderTooLarge is nginx's internal 494: answered as 400 with the page
// "400 Request Header Or Cookie Too Large"; error_page can name it.
const statusHeaderTooLarge = 494

// wireStatus is the status sent for an internal one: nginx's 494 to 497 go out
// as 400.
func wireStatus(code int) int {
	if code >= statusHeaderTooLarge && code <= 497 {
		return 400
	}
	return code
}

// isRedirect reports a redirect status (one a Location goes with).
func isRedirect(code int) bool {
	return code == 301 || code == 302 || code == 303 || code == 307 || code == 308
}

// respondStatus answers with the built-in page for code, or the error_page the
// location maps it to.
func (c *conn) respondStatus(code int) {
	if code == StatusClose {
		c.closeUnanswered()
		return
	}
	if statusCloses(code) {
		c.keepAlive = false
	}
	if c.errorPage(code) {
		return
	}
	c.respond(code, textHTML, c.errorPageText(code), nil)
}

// StatusClose is nginx's non-standard 444 (NGX_HTTP_CLOSE): the connection is
// closed without an answer (reset with reset_timedout_connection), and the request
// logged with that status.
const StatusClose = 444

// closeUnanswered ends the request and the connection without a response.
func (c *conn) closeUnanswered() {
	if r := c.Request; r != nil {
		r.status = StatusClose
	}
	c.abortPending()
	c.keepAlive = false
	if c.lcf.ResetTimedout {
		c.resetNow()
		return
	}
	c.closeAfterFlush()
}

// statusCloses is nginx's list of errors after which a connection does not carry
// another request (ngx_http_special_response_handler), error_page or not.
func statusCloses(code int) bool {
	switch code {
	case 400, 413, 414, 495, 496, 497, 500, 501:
		return true
	}
	return false
}

// appendErrorPage is nginx's built-in page for a status.
func (c *conn) appendErrorPage(dst []byte, code int) []byte {
	if code < 300 {
		return dst
	}
	title := func(dst []byte) []byte {
		dst = strconv.AppendInt(dst, int64(wireStatus(code)), 10)
		return append(append(dst, ' '), pageTitle(code)...)
	}
	dst = append(dst, "<html>\r\n<head><title>"...)
	dst = title(dst)
	dst = append(dst, "</title></head>\r\n<body>\r\n<center><h1>"...)
	if code >= 495 && code <= 497 {
		// nginx's pages of its TLS statuses: 400 Bad Request, then what went wrong.
		dst = append(dst, "400 Bad Request</h1></center>\r\n<center>"...)
		dst = append(dst, reason(code)...)
		dst = append(dst, "</center>\r\n<hr><center>"...)
	} else {
		dst = title(dst)
		dst = append(dst, "</h1></center>\r\n<hr><center>"...)
	}
	dst = append(dst, "numaproxy"...)
	if c.lcf.ServerTokens {
		dst = append(append(dst, '/'), Version...)
	}
	return append(dst, "</center>\r\n</body>\r\n</html>\r\n"...)
}

// errorPageText is the built-in page for code in the worker's page buffer.
func (c *conn) errorPageText(code int) []byte { return c.keepPage(c.appendErrorPage(c.page(), code)) }

// page is the worker's buffer for a built-in page: respond sends it before it
// returns (what the socket does not take is copied), so one buffer serves all.
func (c *conn) page() []byte { return c.w.page[:0] }

// keepPage keeps the grown page buffer for the next page.
func (c *conn) keepPage(b []byte) []byte {
	if cap(b) > cap(c.w.page) {
		c.w.page = b[:0]
	}
	return b
}

func (c *conn) appendServerToken(b []byte) []byte {
	b = append(b, "numaproxy"...)
	if c.lcf.ServerTokens {
		b = append(append(b, '/'), Version...) // appended: a concatenation per response cost a copy
	}
	return b
}

// maxURIChanges is nginx's NGX_HTTP_MAX_URI_CHANGES: the internal redirects one
// request may take; the one after them answers 500.
const maxURIChanges = 10

// errorPage applies the location's error_page for code: an internal redirect, a
// named location or a redirect to a URL. It reports whether it took the request.
// As nginx (ngx_http_special_response_handler): once an error met a location with
// error pages and recursive_error_pages off, no later error gets one; and none does
// once the internal redirects are used up.
func (c *conn) errorPage(code int) bool {
	if c.errorPageDone || c.srv == nil || c.state == csClosed || c.redirects > maxURIChanges || len(c.lcf.ErrorPages) == 0 {
		return false
	}
	if !c.lcf.RecursiveErrorPages {
		c.errorPageDone = true
	}
	for i := range c.lcf.ErrorPages {
		ep := &c.lcf.ErrorPages[i]
		if ep.Code != code {
			continue
		}
		if ep.URI != nil {
			c.variableErrorPage(ep, code)
			return true
		}
		if !strings.HasPrefix(ep.Target, "/") && !strings.HasPrefix(ep.Target, "@") {
			// As nginx: what is neither a URI nor a named location is a URL.
			c.errorPageRedirect(ep, []byte(ep.Target))
			return true
		}
		c.errorPageRedirectInternal(ep, code)
		c.Request.status = errStatus(ep, code)
		c.internalRedirect(ep.Target)
		return true
	}
	return false
}

// errorPageRedirect answers an error_page's URL: 302, or the "=code" given if it
// is a redirect's.
func (c *conn) errorPageRedirect(ep *ErrorPage, location []byte) {
	status := 302
	if isRedirect(ep.Status) {
		status = ep.Status
	}
	c.respond(status, textHTML, c.errorPageText(status), location)
}

// errorPageRedirectInternal sets the status and method an error_page's URI or
// named location is served with.
func (c *conn) errorPageRedirectInternal(ep *ErrorPage, code int) {
	switch ep.Status {
	case 0:
		c.forceStatus = code
	case -1:
		c.forceStatus = 0 // the target's own status
	default:
		c.forceStatus = ep.Status
	}
	c.internalGET = true
	if c.state == csBody {
		// The body was cut short: the connection cannot carry another request.
		c.keepAlive = false
	}
}

// errStatus is nginx's err_status once an error_page took the error: $status from
// there on until the response's head is sent.
func errStatus(ep *ErrorPage, code int) int {
	switch ep.Status {
	case 0:
		return code
	case -1:
		return 0
	}
	return ep.Status
}

// variableErrorPage evaluates an error_page target with variables and, as nginx's
// ngx_http_send_error_page, takes what it gives: a URI (its arguments after "?")
// for an internal redirect, an @name, else a URL to redirect to. $status is the
// error's status, or the "=code" one ("=" alone: 000), as nginx sets err_status
// before it evaluates the target.
func (c *conn) variableErrorPage(ep *ErrorPage, code int) {
	r := c.Request
	r.status = errStatus(ep, code)
	pool := c.conn.Loop().Pool()
	buf := pool.Get(512)
	defer pool.Put(buf)
	target := ep.URI.Append(buf[:0], r)
	switch {
	case len(target) > 0 && target[0] == '/':
		c.errorPageRedirectInternal(ep, code)
		path, args, _ := bytes.Cut(target, []byte("?"))
		setURI(r, path, args)
		c.rerun()
	case len(target) > 0 && target[0] == '@':
		c.errorPageRedirectInternal(ep, code)
		c.internalRedirect(string(target))
	default:
		c.errorPageRedirect(ep, target)
	}
}

// internalRedirect serves the request again from target, a URI (its arguments are
// dropped) or an @named location, as nginx's ngx_http_internal_redirect and
// ngx_http_named_location: past maxURIChanges of them it answers 500.
func (c *conn) internalRedirect(target string) {
	if strings.HasPrefix(target, "@") {
		c.redirects++
		if c.redirectCycle(target) {
			return
		}
		loc := c.snap.Routes.Locations(c.srv).Named(target)
		if loc == nil {
			c.w.log.Error("could not find named location \""+target+"\"", "client", c.RemoteAddr().String())
			c.serverError()
			return
		}
		// nginx goes on with the named location's rewrite phase.
		c.loc, c.prefix, c.lcf = loc, "", LocationConf(loc)
		c.limitExcept()
		c.phase = c.snap.rewriteIndex
		c.Request.RunPhases()
		return
	}
	path, args, _ := strings.Cut(target, "?")
	setURI(c.Request, path, args)
	c.rerun()
}

// rerun serves the request again from its current $uri, as the second half of
// nginx's ngx_http_internal_redirect: from the server rewrite phase on.
func (c *conn) rerun() {
	c.redirects++
	if c.redirectCycle(string(c.uriBuf)) {
		return
	}
	c.loc, c.prefix, c.lcf = nil, "", c.srvConf
	c.phase = c.snap.serverIndex
	c.Request.RunPhases()
}

// redirectCycle answers 500 once the internal redirects are used up.
func (c *conn) redirectCycle(target string) bool {
	if c.redirects <= maxURIChanges {
		return false
	}
	c.w.log.Error("rewrite or internal redirection cycle while internally redirecting to \""+target+"\"", "client", c.RemoteAddr().String())
	c.serverError()
	return true
}

// setURI makes path $uri and args $args for an internal redirect.
func setURI[T string | []byte](r *Request, path, args T) {
	if cap(r.uriBuf) < len(path) {
		// Its own buffers only: a grown slice must not go back to the pool.
		r.freeURIBuf()
		r.uriBuf = r.newURIBuf(len(path))
	}
	r.uriBuf = append(r.uriBuf[:0], path...)
	r.args = append(r.args[:0], args...)
	r.uriChanged = true
}

// serverError answers 500 with the built-in page, whatever status an error_page
// imposed before: nginx's finalize with NGX_HTTP_INTERNAL_SERVER_ERROR.
func (c *conn) serverError() {
	c.forceStatus = 0
	c.keepAlive = false // as nginx after a 500
	c.respond(500, textHTML, c.errorPageText(500), nil)
}

var (
	textHTML  = []byte("text/html")
	textPlain = []byte("text/plain")
)

// respond sends a complete local response: status, headers, body; location is the
// Location header for redirects (nil for none).
func (c *conn) respond(code int, contentType, body, location []byte) {
	if c.forceStatus != 0 {
		code = c.forceStatus
	}
	// A body not read yet is dropped after the answer; one cut short while it was
	// read ends the connection (nginx's reading_body).
	switch {
	case c.state == csBody:
		c.keepAlive = false
	case c.bodyUnread():
		if !c.discardBody() {
			c.keepAlive = false // invalid chunked framing: the rest is not dropped
		}
	}
	r := c.Request
	c.armSendTimeout()
	h := r.NewHeader()
	h.Status = wireStatus(code)
	h.ContentLength = -1
	noBody := code == 204 || code == 304 || (code >= 100 && code < 200)
	if !noBody {
		h.Add(contentTypeName, contentType)
		h.ContentLength = int64(len(body))
	}
	if location != nil {
		h.AddLocation(location)
	}
	r.SendHeader()
	if noBody || r.IsHEAD() {
		body = nil
	}
	r.SendBody(body, true)
	if c.state == csDiscard {
		return // the request finishes once the body is dropped
	}
	c.finish()
}

// respondAutoRedirect is nginx's 301 from "/dir" to "/dir/" for a location that
// asked for it (SetContentHandler).
func (c *conn) respondAutoRedirect() {
	loc := append([]byte(nil), c.uriBuf...)
	loc = append(loc, '/')
	if q, ok := c.req.Query(); ok {
		loc = append(append(loc, '?'), q...)
	}
	c.respond(301, textHTML, c.errorPageText(301), loc)
}

// The answers a handler gives itself. Each finishes the request (or, when a request
// body is still to be dropped, once it is).

// SendStatus answers code as nginx's special responses: the location's error_page
// for it, else the built-in page (a handler may as well return the status).
func (r *Request) SendStatus(code int) { r.c.respondStatus(code) }

// SendPage answers code with the built-in page and, for a redirect, location as its
// Location (a path is made absolute); from 300 on the location's error_page for
// code takes precedence. It is nginx's return of a code with no text, or with a URL.
func (r *Request) SendPage(code int, location []byte) {
	c := r.c
	if code >= 300 && c.errorPage(code) {
		return
	}
	c.respond(code, textHTML, c.errorPageText(code), location)
}

// SendText answers code with text as the body, of contentType (empty: text/plain),
// error_page or not: nginx's ngx_http_send_response with a text.
func (r *Request) SendText(code int, contentType, text []byte) {
	if len(contentType) == 0 {
		contentType = textPlain
	}
	r.c.respond(code, contentType, text, nil)
}

// InternalRedirect serves the request again from target: "/uri?args" or "@name",
// as nginx's error_page redirect (up to 10 per request, then 500).
func (r *Request) InternalRedirect(target string) { r.c.internalRedirect(target) }

// SetURI makes path $uri and args $args, copied, for Rerun or a rewrite.
func (r *Request) SetURI(path, args []byte) { setURI(r, path, args) }

// SetRewritten says whether a rewrite in the location's rewrite phase changed $uri:
// then the location is looked for again after the phase (nginx's r->uri_changed;
// "rewrite ... break" and break clear it).
func (r *Request) SetRewritten(on bool) { r.rewritten = on }

// EnterIf makes loc, the implicit location of an "if" block (conf.LocIf) of the
// request's location, the request's location from now on, as nginx's if code sets
// r->loc_conf: its configs serve the rest of the request, and its content handler,
// or the enclosing location's when it has none.
func (r *Request) EnterIf(loc *conf.Location) {
	r.loc, r.c.lcf = loc, LocationConf(loc)
	r.c.limitExcept()
}

// Rerun serves the request again from the $uri SetURI set, as nginx's
// ngx_http_internal_redirect: from the server rewrite phase, counting against the
// internal redirects a request may take.
func (r *Request) Rerun() { r.c.rerun() }

// DiscardRequestBody prepares answering without reading the request body, as the
// start of nginx's ngx_http_send_response: a client waiting for 100 Continue is told
// to send the body (which is then dropped after the answer), and the part of a
// chunked body already here must be valid framing; false: it is not (answer 400).
func (r *Request) DiscardRequestBody() bool {
	c := r.c
	if c.redirects == 0 && c.bodyFate == bodyOnWire && c.req.ExpectContinue() {
		c.conn.Write(continue100)
	}
	return !c.bodyUnread() || c.bufferedChunksValid()
}
