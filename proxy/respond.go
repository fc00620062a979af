package proxy

import (
	"github.com/numaproxy/numaproxy/httpcore"
	"strconv"
	"strings"
	"time"
)

// statusText is nginx's reason phrases.
var statusText = map[int]string{
	100: "Continue", 101: "Switching Protocols",
	200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 206: "Partial Content",
	301: "Moved Permanently", 302: "Moved Temporarily", 303: "See Other", 304: "Not Modified",
	307: "Temporary Redirect", 308: "Permanent Redirect",
	400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
	405: "Not Allowed", 406: "Not Acceptable", 408: "Request Time-out", 409: "Conflict", 410: "Gone",
	411: "Length Required", 412: "Precondition Failed", 413: "Request Entity Too Large",
	414: "Request-URI Too Large", 415: "Unsupported Media Type", 416: "Requested Range Not Satisfiable",
	421: "Misdirected Request", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
	494: "Request Header Or Cookie Too Large",
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
	if s, ok := statusText[code]; ok {
		return s
	}
	return ""
}

// statusHeaderTooLarge is nginx's internal 494: answered as 400 with the page
// "400 Request Header Or Cookie Too Large"; error_page can name it.
const statusHeaderTooLarge = 494

// wireStatus is the status sent for an internal one.
func wireStatus(code int) int {
	if code == statusHeaderTooLarge {
		return 400
	}
	return code
}

// isRedirect is the codes return treats as "code URL".
func isRedirect(code int) bool {
	return code == 301 || code == 302 || code == 303 || code == 307 || code == 308
}

// addHeaderApplies is nginx's list of statuses add_header acts on without "always".
func addHeaderApplies(code int) bool {
	switch code {
	case 200, 201, 204, 206, 301, 302, 303, 304, 307, 308:
		return true
	}
	return false
}

// respondStatus answers with the proxy's own page for code, or the error_page the
// location maps it to.
func (c *client) respondStatus(code int) {
	if statusCloses(code) {
		c.keepAlive = false
	}
	if c.errorPage(code) {
		return
	}
	c.respond(code, "text/html", c.appendErrorPage(nil, code), nil)
}

// statusCloses is nginx's list of errors after which a connection does not carry
// another request (ngx_http_special_response_handler), error_page or not.
func statusCloses(code int) bool {
	switch code {
	case 400, 413, 414, 500, 501:
		return true
	}
	return false
}

// appendErrorPage is nginx's built-in page for a status.
func (c *client) appendErrorPage(dst []byte, code int) []byte {
	if code < 300 {
		return dst
	}
	title := strconv.Itoa(wireStatus(code)) + " " + pageTitle(code)
	dst = append(dst, "<html>\r\n<head><title>"...)
	dst = append(dst, title...)
	dst = append(dst, "</title></head>\r\n<body>\r\n<center><h1>"...)
	dst = append(dst, title...)
	dst = append(dst, "</h1></center>\r\n<hr><center>"...)
	dst = append(dst, c.serverToken()...)
	return append(dst, "</center>\r\n</body>\r\n</html>\r\n"...)
}

func (c *client) serverToken() string {
	if c.ccf.ServerTokens {
		return "numaproxy/" + Version
	}
	return "numaproxy"
}

// respondReturn carries out a return directive.
func (c *client) respondReturn(r *Return) {
	code := r.Code
	if code < 400 || r.Text != nil {
		// nginx's return answers through ngx_http_send_response, which first tells a
		// client waiting for 100 Continue to send the body, then starts dropping it:
		// a chunked body already here that is invalid makes the answer a 400.
		if c.redirects == 0 && c.bodyFate == bodyOnWire && c.req.ExpectContinue() {
			c.conn.Write(continue100)
		}
		if c.bodyUnread() && !c.bufferedChunksValid() {
			c.respondStatus(400)
			return
		}
	}
	if r.Text == nil {
		if code >= 400 {
			c.respondStatus(code) // nginx's special response, as for its own errors
			return
		}
		if code >= 300 && c.errorPage(code) {
			return
		}
		c.respond(code, "text/html", c.appendErrorPage(nil, code), nil)
		return
	}
	text := r.Text.Append(c.w.body[:0], c)
	c.w.body = text[:0] // keep a grown buffer; respond copies text before it returns
	if isRedirect(code) {
		if c.errorPage(code) {
			return
		}
		c.respond(code, "text/html", c.appendErrorPage(nil, code), text)
		return
	}
	// A status with a text is sent as it is: error_page does not apply (nginx sends
	// it with ngx_http_send_response, not as a special response). Its type is
	// text/plain unless an X-Accel-Redirect response passed one on.
	contentType := "text/plain"
	if len(c.carriedType) > 0 {
		contentType = string(c.carriedType)
	}
	c.respond(code, contentType, text, nil)
}

// respondAutoRedirect is nginx's 301 from "/dir" to "/dir/" for a proxied prefix
// location.
func (c *client) respondAutoRedirect() {
	loc := append([]byte(nil), c.uriBuf...)
	loc = append(loc, '/')
	if q, ok := c.req.Query(); ok {
		loc = append(append(loc, '?'), q...)
	}
	c.respond(301, "text/html", c.appendErrorPage(nil, 301), loc)
}

// maxURIChanges is nginx's NGX_HTTP_MAX_URI_CHANGES: the internal redirects one
// request may take; the one after them answers 500.
const maxURIChanges = 10

// errorPage applies the location's error_page for code: an internal redirect, a
// named location or a redirect to a URL. It reports whether it took the request.
// As nginx (ngx_http_special_response_handler): once an error met a location with
// error pages and recursive_error_pages off, no later error gets one; and none does
// once the internal redirects are used up.
func (c *client) errorPage(code int) bool {
	if c.errorPageDone || c.srv == nil || c.state == csClosed || c.redirects > maxURIChanges || len(c.ccf.ErrorPages) == 0 {
		return false
	}
	if !c.ccf.RecursiveErrorPages {
		c.errorPageDone = true
	}
	for _, ep := range c.ccf.ErrorPages {
		if ep.Code != code {
			continue
		}
		if strings.HasPrefix(ep.Target, "http://") || strings.HasPrefix(ep.Target, "https://") {
			status := 302
			if isRedirect(ep.Status) {
				status = ep.Status
			}
			c.respond(status, "text/html", c.appendErrorPage(nil, status), []byte(ep.Target))
			return true
		}
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
		c.internalRedirect(ep.Target)
		return true
	}
	return false
}

// internalRedirect serves the request again from target, a URI (its arguments are
// dropped) or an @named location, as nginx's ngx_http_internal_redirect and
// ngx_http_named_location: past maxURIChanges of them it answers 500.
func (c *client) internalRedirect(target string) {
	c.redirects++
	if c.redirects > maxURIChanges {
		c.w.log.Error("rewrite or internal redirection cycle while internally redirecting to \""+target+"\"", "client", c.remote.String())
		c.serverError()
		return
	}
	if strings.HasPrefix(target, "@") {
		loc := c.snap.Routes.Locations(c.srv).Named(target)
		if loc == nil {
			c.w.log.Error("could not find named location \""+target+"\"", "client", c.remote.String())
			c.serverError()
			return
		}
		c.loc, c.prefix, c.lcf, c.ccf = loc, "", locationConf(loc), httpcore.LocationConf(loc)
		c.serveLocation()
		return
	}
	path, args, _ := strings.Cut(target, "?")
	setURI(c, path, args)
	c.route()
}

// setURI makes path $uri and args $args for an internal redirect.
func setURI[T string | []byte](c *client, path, args T) {
	if cap(c.uriBuf) < len(path) {
		// Pool buffers only: a grown slice must not go back to the pool.
		pool := c.conn.Loop().Pool()
		if c.uriBuf != nil {
			pool.Put(c.uriBuf[:cap(c.uriBuf)])
		}
		c.uriBuf = pool.Get(len(path))[:0]
	}
	c.uriBuf = append(c.uriBuf[:0], path...)
	c.args = append(c.args[:0], args...)
	c.uriChanged = true
}

// serverError answers 500 with the built-in page, whatever status an error_page
// imposed before: nginx's finalize with NGX_HTTP_INTERNAL_SERVER_ERROR.
func (c *client) serverError() {
	c.forceStatus = 0
	c.keepAlive = false // as nginx after a 500
	c.respond(500, "text/html", c.appendErrorPage(nil, 500), nil)
}

// respond sends a complete local response: status, headers, body; location is the
// Location header for redirects (nil for none).
func (c *client) respond(code int, contentType string, body, location []byte) {
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
	c.status = wireStatus(code)
	now := time.Now()
	head := c.w.scratch[:0]
	head = append(head, "HTTP/1.1 "...)
	head = strconv.AppendInt(head, int64(c.status), 10)
	head = append(head, ' ')
	head = append(head, reason(c.status)...)
	head = append(head, "\r\nServer: "...)
	head = append(head, c.serverToken()...)
	head = append(head, "\r\n"...)
	head = append(head, c.w.dateHeader(now)...)
	noBody := code == 204 || code == 304 || (code >= 100 && code < 200)
	if !noBody {
		head = append(head, "Content-Type: "...)
		head = append(head, contentType...)
		head = append(head, "\r\nContent-Length: "...)
		head = strconv.AppendInt(head, int64(len(body)), 10)
		head = append(head, "\r\n"...)
	}
	if location != nil {
		head = append(head, "Location: "...)
		head = c.appendAbsolute(head, location)
		mark := len(head)
		head = escapeControls(append(head, location...), mark)
		head = append(head, "\r\n"...)
	}
	head = c.appendConnection(head)
	head = append(head, c.carried...)
	head = c.appendAddHeaders(head, code)
	head = append(head, "\r\n"...)
	sendBody := !noBody && !c.isHEAD()
	if sendBody {
		head = append(head, body...)
		c.bodySent = int64(len(body))
	}
	c.w.scratch = head[:0]
	c.conn.SetWriteTimeout(c.ccf.SendTimeout)
	c.conn.Write(head)
	if c.state == csDiscard {
		return // the request finishes once the body is dropped
	}
	c.finish()
}

func (c *client) isHEAD() bool { return string(c.req.Method()) == "HEAD" }

// appendConnection adds the Connection header (and Keep-Alive: timeout=N when
// keepalive_timeout has a second value). As in nginx, keepalive_timeout and
// keepalive_requests are the location's.
func (c *client) appendConnection(head []byte) []byte {
	if !c.keepAlive || c.ccf.KeepaliveTimeout <= 0 || c.requests >= c.ccf.KeepaliveRequests || c.w.loop.Draining() {
		c.keepAlive = false
		return append(head, "Connection: close\r\n"...)
	}
	head = append(head, "Connection: keep-alive\r\n"...)
	if kh := c.ccf.KeepaliveHeader; kh > 0 {
		head = append(head, "Keep-Alive: timeout="...)
		head = strconv.AppendInt(head, int64(kh/time.Second), 10)
		head = append(head, "\r\n"...)
	}
	return head
}

// appendAddHeaders adds the location's add_header fields that apply to code.
func (c *client) appendAddHeaders(head []byte, code int) []byte {
	for i := range c.lcf.AddHeaders {
		h := &c.lcf.AddHeaders[i]
		if !h.Always && !addHeaderApplies(code) {
			continue
		}
		mark := len(head)
		head = append(head, h.Name...)
		head = append(head, ": "...)
		valueStart := len(head)
		head = escapeControls(h.Value.Append(head, c), valueStart)
		if len(head) == valueStart {
			head = head[:mark] // an empty value adds nothing, as in nginx
			continue
		}
		head = append(head, "\r\n"...)
	}
	return head
}

// appendAbsolute writes, before a Location value that starts with "/", the scheme,
// host and port that make it absolute, as nginx's absolute_redirect (on by default)
// does: the request's host without its port (else the local address), then the
// local port unless it is 80.
func (c *client) appendAbsolute(h, location []byte) []byte {
	if len(location) == 0 || location[0] != '/' || (len(location) > 1 && location[1] == '/') {
		return h
	}
	h = append(h, "http://"...)
	if host := c.req.Host(); len(host) > 0 {
		h = appendLowerHost(h, host)
	} else if a := c.local.Addr(); a.Is6() && !a.Is4In6() {
		h = append(h, '[')
		h = a.AppendTo(h)
		h = append(h, ']')
	} else {
		h = a.Unmap().AppendTo(h)
	}
	if p := c.local.Port(); p != 80 {
		h = append(h, ':')
		h = strconv.AppendUint(h, uint64(p), 10)
	}
	return h
}
