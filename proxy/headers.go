package proxy

import (
	"bytes"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// hiddenByDefault are the upstream response fields nginx does not pass unless
// proxy_pass_header names them; numaproxy sends its own Date and Server.
func hiddenByDefault(name []byte) bool {
	return http1.EqualFold(name, "date") || http1.EqualFold(name, "server") || http1.EqualFold(name, "x-pad") ||
		(len(name) > 8 && http1.EqualFold(name[:8], "x-accel-"))
}

// The client connection's write watermarks under proxy_buffering off: any byte left
// queued pauses reading the upstream until the queue is empty again.
const unbufferedHighWater, unbufferedLowWater = 1, 0

// responseHeader fills the client's response head from the upstream's status and
// fields, rewritten as nginx does; the core frames the body for the client.
func (ex *exchange) responseHeader() {
	r := ex.r
	resp := &ex.resp
	lcf := ex.lc
	code := resp.StatusCode()
	h := r.NewHeader()
	h.Status, h.Reason = code, resp.Reason()
	h.HasServer, h.HasDate = lcf.passes("server"), lcf.passes("date")
	upgrade := code == 101
	buffering := lcf.Buffering
	rewriteCookies := lcf.CookieDomains != nil || lcf.CookiePaths != nil
	contentType := false
	for i := 0; i < resp.Headers.Len(); i++ {
		name, value := resp.Headers.Name(i), resp.Headers.Value(i)
		contentType = contentType || http1.EqualFold(name, "content-type")
		if lcf.IgnoreHeaders&IgnoreXAccelBuffering == 0 && http1.EqualFold(name, "x-accel-buffering") {
			// As nginx: "yes" or "no" (any case) overrides proxy_buffering.
			if http1.EqualFold(value, "yes") {
				buffering = true
			} else if http1.EqualFold(value, "no") {
				buffering = false
			}
		}
		if lcf.IgnoreHeaders&IgnoreXAccelLimitRate == 0 && http1.EqualFold(name, "x-accel-limit-rate") {
			// As nginx: a number of bytes per second for this response, 0 for none.
			if n, ok := parseDecimal(value); ok {
				r.SetLimitRate(n)
			}
		}
		switch {
		case upgrade && (http1.EqualFold(name, "upgrade") || http1.EqualFold(name, "connection")):
			// A 101 carries its own Upgrade and Connection through.
		case resp.Headers.IsHopByHop(i), http1.IsField(name, "Content-Length"):
			continue
		case lcf.hides(name):
			continue
		}
		// Copied, name and value, into the head's own buffer: the upstream head lies
		// in a buffer reused once the response started (the loop's read buffer,
		// headInPlace), and the fields are read until the request ends ($sent_http_*
		// in the access log).
		isLoc := http1.EqualFold(name, "location")
		b := h.Buf()
		from := len(b)
		b = append(b, name...)
		mid := len(b)
		name = b[from:mid:mid]
		switch {
		case isLoc || http1.EqualFold(name, "refresh"):
			b, rewritten := ex.appendRedirected(b, value, !isLoc)
			i := h.AddBuilt(name, b, mid)
			if isLoc && rewritten {
				// As nginx: a Location proxy_redirect rewrote to a path is made absolute.
				h.SetLocation(i)
			}
		case rewriteCookies && http1.EqualFold(name, "set-cookie"):
			h.AddBuilt(name, httpcore.EscapeControls(ex.appendCookie(b, value), mid), mid)
		default:
			h.AddBuilt(name, append(b, value...), mid)
		}
	}
	ex.addStickyCookie(h)
	if ct := r.CarriedType(); !contentType && len(ct) > 0 {
		// An X-Accel-Redirect response's type, which this response does not replace.
		h.Add(contentTypeName, ct)
	}
	if !upgrade {
		switch resp.Framing() {
		case http1.BodyContentLength, http1.BodyNone:
			h.ContentLength = resp.ContentLength()
		}
		ex.respBuffered = buffering
		switch {
		case !buffering:
			// proxy_buffering off: the upstream is read only once the client's
			// socket took everything read before.
			r.SetWriteWatermarks(unbufferedHighWater, unbufferedLowWater)
		case lcf.MaxTempFileSize > 0:
			// What may wait in memory for a slow client before the response goes
			// on to a temporary file: proxy_buffers.
			mem := lcf.ResponseMemory()
			r.SetWriteWatermarks(mem, mem/2)
		}
	}
}

var contentTypeName = []byte("Content-Type")

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
		if http1.EqualFold(name, h) {
			return true
		}
	}
	if !hiddenByDefault(name) {
		return false
	}
	for _, p := range lc.PassHeaders {
		if http1.EqualFold(name, p) {
			return false
		}
	}
	return true
}

// appendRedirected applies proxy_redirect to a Location or Refresh value: the first
// rule whose text starts the value replaces it. "default" maps the proxy_pass URL to
// the location: http://backend/x/ in location /a/ becomes /a/, and without a URI part
// http://backend/ becomes /.
func (ex *exchange) appendRedirected(h, value []byte, refresh bool) ([]byte, bool) {
	lcf := ex.lc
	// A proxy_pass made of variables has no default rule (nginx has no URL to map).
	if loc := ex.r.Location().Owner(); lcf.Pass != nil && lcf.Pass.Value == nil && lcf.redirectDefault && loc != nil &&
		(loc.Kind == conf.LocPrefix || loc.Kind == conf.LocPrefixNoRegex || loc.Kind == conf.LocExact) {
		from, to := "http://"+lcf.Pass.Host+"/", "/"
		if lcf.Pass.HasURI {
			from, to = lcf.Pass.URL, loc.Path
		}
		if out, ok := replacePrefix(h, value, from, to); ok {
			return out, true
		}
	}
	start := 0
	if refresh {
		if start = refreshURL(value); start < 0 {
			return append(h, value...), false
		}
	}
	for i := range lcf.Redirects {
		if out, ok := ex.redirect(h, value, start, &lcf.Redirects[i]); ok {
			return out, true
		}
	}
	return append(h, value...), false
}

// redirect applies one proxy_redirect to the value from start on (the URL of a
// Refresh), as nginx's ngx_http_proxy_rewrite_*_handler: a prefix there replaced by
// the replacement, or, for a regex that matches, the whole URL.
func (ex *exchange) redirect(h, value []byte, start int, rd *Redirect) ([]byte, bool) {
	r := ex.r
	url := value[start:]
	if rd.re != nil {
		if !r.Regex(rd.re, url) {
			return h, false
		}
		h = append(h, value[:start]...)
		return rd.to.Append(h, r), true
	}
	from := rd.fromBytes
	if !rd.from.Static() {
		from = rd.from.Append(ex.st.scratch[:0], r)
		ex.st.scratch = from[:0]
	}
	if !bytes.HasPrefix(url, from) {
		return h, false
	}
	h = append(h, value[:start]...)
	h = rd.to.Append(h, r)
	return append(h, url[len(from):]...), true
}

// refreshURL is where the URL of a Refresh value ("5; url=...") starts, -1 if it
// has none.
func refreshURL(value []byte) int {
	for i := 0; i+4 <= len(value); i++ {
		if http1.EqualFold(value[i:i+4], "url=") {
			return i + 4
		}
	}
	return -1
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

// parseDecimal reads a non-negative decimal number as nginx's ngx_atoi.
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
