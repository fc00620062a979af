package proxy

import (
	"bytes"
	"slices"
	"strconv"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// hiddenByDefault are the upstream response fields nginx does not pass unless
// proxy_pass_header names them; numaproxy sends its own Date and Server.
func hiddenByDefault(name []byte) bool {
	return equalFoldBytes(name, "date") || equalFoldBytes(name, "server") || equalFoldBytes(name, "x-pad") ||
		(len(name) > 8 && equalFoldBytes(name[:8], "x-accel-"))
}

// The client connection's write watermarks under proxy_buffering off: any byte left
// queued pauses reading the upstream until the queue is empty again.
const unbufferedHighWater, unbufferedLowWater = 1, 0

// appendResponseHead builds the client's response head from the upstream's status and
// fields, rewritten as nginx does, with the framing chosen for the client. It lives
// in the worker's scratch buffer until sent (toClient, flushHead).
func (ex *exchange) appendResponseHead() []byte {
	c := ex.c
	resp := &ex.resp
	lcf := c.lcf
	code := resp.StatusCode()
	if c.forceStatus != 0 {
		code = c.forceStatus
	}
	c.status = code
	h := c.w.scratch[:0]
	h = append(h, "HTTP/1.1 "...)
	h = strconv.AppendInt(h, int64(code), 10)
	h = append(h, ' ')
	if code == resp.StatusCode() && len(resp.Reason()) > 0 {
		h = append(h, resp.Reason()...)
	} else {
		h = append(h, reason(code)...)
	}
	h = append(h, "\r\n"...)
	if !lcf.passes("server") {
		h = append(h, "Server: "...)
		h = append(h, c.serverToken()...)
		h = append(h, "\r\n"...)
	}
	if !lcf.passes("date") {
		h = append(h, c.w.dateHeader(time.Now())...)
	}
	h = append(h, c.carried...)
	upgrade := code == 101
	buffering := lcf.Buffering
	rewriteCookies := lcf.CookieDomains != nil || lcf.CookiePaths != nil
	contentType := false
	for i := 0; i < resp.Headers.Len(); i++ {
		name, value := resp.Headers.Name(i), resp.Headers.Value(i)
		contentType = contentType || equalFoldBytes(name, "content-type")
		if lcf.IgnoreHeaders&IgnoreXAccelBuffering == 0 && equalFoldBytes(name, "x-accel-buffering") {
			// As nginx: "yes" or "no" (any case) overrides proxy_buffering.
			if equalFoldBytes(value, "yes") {
				buffering = true
			} else if equalFoldBytes(value, "no") {
				buffering = false
			}
		}
		switch {
		case upgrade && (equalFoldBytes(name, "upgrade") || equalFoldBytes(name, "connection")):
			// A 101 carries its own Upgrade and Connection through.
		case resp.Headers.IsHopByHop(i), equalFoldBytes(name, "content-length"):
			continue
		case lcf.hides(name):
			continue
		}
		h = append(h, name...)
		h = append(h, ": "...)
		if isLoc := equalFoldBytes(name, "location"); isLoc || equalFoldBytes(name, "refresh") {
			mark := len(h)
			var rewritten bool
			h, rewritten = c.appendRedirected(h, value)
			if end := len(h); isLoc && rewritten {
				// As nginx: a Location proxy_redirect rewrote to a path is made absolute.
				if h = c.appendAbsolute(h, h[mark:end]); len(h) > end {
					rotateRight(h[mark:], len(h)-end) // the prefix goes before the path
				}
			}
		} else if rewriteCookies && equalFoldBytes(name, "set-cookie") {
			mark := len(h)
			h = escapeControls(c.appendCookie(h, value), mark)
		} else {
			h = append(h, value...)
		}
		h = append(h, "\r\n"...)
	}
	if !contentType && len(c.carriedType) > 0 {
		// An X-Accel-Redirect response's type, which this response does not replace.
		h = append(append(append(h, "Content-Type: "...), c.carriedType...), "\r\n"...)
	}
	if !upgrade {
		h = ex.appendClientFraming(h)
		h = c.appendConnection(h)
		if !buffering {
			// proxy_buffering off: the upstream is read only once the client's
			// socket took everything read before.
			c.conn.SetWriteWatermarks(unbufferedHighWater, unbufferedLowWater)
			c.ownWatermarks = true
		}
	}
	h = c.appendAddHeaders(h, code)
	h = append(h, "\r\n"...)
	c.w.scratch = h[:0]
	return h
}

// appendClientFraming chooses how the body reaches the client: the same length, the
// upstream's chunks as they are (HTTP/1.1 client), the chunks' data until close
// (HTTP/1.0 client), or a close-delimited body re-encoded as chunked.
func (ex *exchange) appendClientFraming(h []byte) []byte {
	c, resp := ex.c, &ex.resp
	client11 := c.req.ProtoMinor() == 1
	ex.toChunked, ex.rawChunks = false, false
	switch resp.Framing() {
	case http1.BodyContentLength:
		h = append(h, "Content-Length: "...)
		h = strconv.AppendInt(h, resp.ContentLength(), 10)
		h = append(h, "\r\n"...)
	case http1.BodyNone:
		// A HEAD answer keeps the length of what GET would send; any other bodiless
		// answer but 1xx, 204 and 304 says it is empty (Content-Length: 0).
		if code := resp.StatusCode(); resp.ContentLength() >= 0 && (c.isHEAD() || code != 204 && code != 304 && code >= 200) {
			h = append(h, "Content-Length: "...)
			h = strconv.AppendInt(h, resp.ContentLength(), 10)
			h = append(h, "\r\n"...)
		}
	case http1.BodyChunked:
		if client11 {
			ex.rawChunks = true
			h = append(h, "Transfer-Encoding: chunked\r\n"...)
		} else {
			c.keepAlive = false
		}
	case http1.BodyUntilClose:
		if client11 {
			ex.toChunked = true
			h = append(h, "Transfer-Encoding: chunked\r\n"...)
		} else {
			c.keepAlive = false
		}
	}
	return h
}

// passes reports proxy_pass_header for a field hidden by default.
func (lc *LocConf) passes(name string) bool {
	for _, p := range lc.PassHeaders {
		if p == name {
			return true
		}
	}
	return false
}

// hides reports whether an upstream response field is kept from the client.
func (lc *LocConf) hides(name []byte) bool {
	for _, h := range lc.HideHeaders {
		if equalFoldBytes(name, h) {
			return true
		}
	}
	if !hiddenByDefault(name) {
		return false
	}
	for _, p := range lc.PassHeaders {
		if equalFoldBytes(name, p) {
			return false
		}
	}
	return true
}

// appendRedirected applies proxy_redirect to a Location or Refresh value: the first
// rule whose text starts the value replaces it. "default" maps the proxy_pass URL to
// the location: http://backend/x/ in location /a/ becomes /a/, and without a URI part
// http://backend/ becomes /.
func (c *client) appendRedirected(h, value []byte) ([]byte, bool) {
	lcf := c.lcf
	if lcf.Pass != nil && lcf.redirectDefault && c.loc != nil &&
		(c.loc.Kind == conf.LocPrefix || c.loc.Kind == conf.LocPrefixNoRegex || c.loc.Kind == conf.LocExact) {
		from, to := "http://"+lcf.Pass.Host+"/", "/"
		if lcf.Pass.HasURI {
			from, to = lcf.Pass.URL, c.loc.Path
		}
		if out, ok := replacePrefix(h, value, from, to); ok {
			return out, true
		}
	}
	for _, r := range lcf.Redirects {
		if out, ok := replacePrefix(h, value, r.From, r.To); ok {
			return out, true
		}
	}
	return append(h, value...), false
}

// rotateRight moves the last k bytes of s to its front.
func rotateRight(s []byte, k int) {
	slices.Reverse(s)
	slices.Reverse(s[:k])
	slices.Reverse(s[k:])
}

func replacePrefix(h, value []byte, from, to string) ([]byte, bool) {
	// Refresh is "5; url=..."; the URL may follow a prefix.
	at := bytes.Index(value, []byte(from))
	if at < 0 || (at > 0 && !bytes.Contains(bytes.ToLower(value[:at]), []byte("url="))) {
		return h, false
	}
	h = append(h, value[:at]...)
	h = append(h, to...)
	return append(h, value[at+len(from):]...), true
}
