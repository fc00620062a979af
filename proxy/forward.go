package proxy

import (
	"bytes"
	"github.com/numaproxy/numaproxy/httpcore"
	"strconv"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/httpcore/route"
)

// appendUpstreamHead builds the request head sent upstream, nginx's rules: the
// method (proxy_method), the URI per proxy_pass, proxy_set_header fields (nginx's
// defaults Host $proxy_host and Connection close included), then the client's fields
// (proxy_pass_request_headers) except the hop-by-hop ones, Content-Length, Expect and
// those proxy_set_header names, then the body framing. It reports false when
// proxy_method made something that is not a method.
func (ex *exchange) appendUpstreamHead(h []byte) ([]byte, bool) {
	c := ex.c
	r := &c.req
	lcf := c.lcf
	mark := len(h)
	if lcf.Method != nil {
		h = lcf.Method.Append(h, c)
		if m := h[mark:]; len(m) > 0 && !isTokenBytes(m) {
			ex.w.log.Error("proxy_method made an invalid method \""+string(escapeControls(m, 0))+"\"", "client", c.remote.String())
			return h, false
		}
	}
	if len(h) > mark {
		// proxy_method's, which stays after an error_page redirect, as in nginx
	} else if c.internalGET && !c.isHEAD() {
		h = append(h, "GET"...)
	} else {
		h = append(h, r.Method()...)
	}
	h = append(h, ' ')
	h = c.appendUpstreamURI(h)
	if lcf.HTTPMinor == 1 {
		h = append(h, " HTTP/1.1\r\n"...)
	} else {
		h = append(h, " HTTP/1.0\r\n"...)
	}
	ex.upgrade, ex.connClose = false, lcf.HTTPMinor == 0
	// A body that goes upstream has the framing numaproxy gives it; without one
	// (proxy_pass_request_body off) a proxy_set_header Content-Length takes the
	// place of nginx's default, the client's body length.
	bodyOut := !c.internalGET && c.body != bodyNone && lcf.PassRequestBody
	ex.bodyWithheld = !c.internalGET && c.body != bodyNone && !lcf.PassRequestBody
	for i := range lcf.SetHeaders {
		s := &lcf.SetHeaders[i]
		if bodyOut && (equalFold(s.Name, "content-length") || equalFold(s.Name, "transfer-encoding")) {
			continue
		}
		mark := len(h)
		h = append(h, s.Name...)
		h = append(h, ": "...)
		valueStart := len(h)
		h = escapeControls(s.Value.Append(h, c), valueStart)
		if len(h) == valueStart {
			h = h[:mark] // an empty value sends nothing (and hides the client's field)
			continue
		}
		value := h[valueStart:]
		switch {
		case equalFold(s.Name, "upgrade"):
			ex.upgrade = r.Upgrade()
		case equalFold(s.Name, "connection"):
			ex.connClose = containsToken(value, "close")
		}
		h = append(h, "\r\n"...)
	}
	for i := 0; lcf.PassRequestHeaders && i < r.Headers.Len(); i++ {
		name := r.Headers.Name(i)
		// Only the fixed hop-by-hop set: a field the client lists in Connection is passed
		// (as nginx), else "Connection: Authorization" would strip the client's own
		// credentials, or any field a proxy_set_header does not replace.
		if http1.IsHopByHopName(name) || equalFoldBytes(name, "content-length") || equalFoldBytes(name, "expect") || lcf.setsHeader(name) {
			continue
		}
		h = append(h, name...)
		h = append(h, ": "...)
		h = append(h, r.Headers.Value(i)...)
		h = append(h, "\r\n"...)
	}
	switch {
	case c.internalGET:
	case c.body == bodyChunked && bodyOut:
		h = append(h, "Transfer-Encoding: chunked\r\n"...)
	case c.body == bodyLength && (bodyOut || !lcf.setsHeader(contentLengthName)):
		// Under proxy_pass_request_body off too, as nginx, whose default is
		// Content-Length $proxy_internal_body_length: the length of a body not sent.
		h = append(h, "Content-Length: "...)
		h = strconv.AppendInt(h, c.contentLength, 10)
		h = append(h, "\r\n"...)
	case c.body == bodyNone && r.ContentLength() == 0 && !lcf.setsHeader(contentLengthName):
		h = append(h, "Content-Length: 0\r\n"...) // the client's, as nginx passes it
	}
	return append(h, "\r\n"...), true
}

var contentLengthName = []byte("content-length")

// isTokenBytes is isToken for bytes.
func isTokenBytes(b []byte) bool {
	for _, c := range b {
		if !isTokenChar(c) {
			return false
		}
	}
	return len(b) > 0
}

// appendUpstreamURI is the request-target sent upstream, nginx's rules. With a URI
// part in proxy_pass, the part of $uri that matched the location is replaced by it and
// the rest re-escaped if the client's path held escapes (upstreamPathOK has refused a
// rest that would climb out of it). Without one the client's URI goes as received, so
// the upstream decodes the same path the locations saw decoded; after an internal
// redirect, or for an absolute-form target without a path, $uri goes escaped.
func (c *client) appendUpstreamURI(h []byte) []byte {
	pass := c.lcf.Pass
	query, hasQuery := c.query()
	switch {
	case pass.HasURI && c.loc != nil && c.loc.Kind == conf.LocExact:
		h = append(h, pass.URI...) // location = /a: the whole URI is the matched part
	case pass.HasURI && c.prefix != "":
		h, _ = route.AppendReplaced(h, c.uriBuf, c.prefix, pass.URI, c.uriChanged || route.HasEscape(c.req.Path()))
	case c.uriChanged || len(c.req.Path()) == 0:
		h = route.AppendEscaped(h, c.uriBuf)
	default:
		h = append(h, c.req.Path()...)
	}
	if hasQuery {
		h = append(h, '?')
		h = append(h, query...)
	}
	return h
}

// query is the request's arguments ($args): the client's, or after an internal
// redirect those of its target (error_page /page?x=1, X-Accel-Redirect), if any.
func (c *client) query() ([]byte, bool) {
	if c.uriChanged {
		return c.args, len(c.args) > 0
	}
	return c.req.Query()
}

// upstreamPathOK reports whether the path proxy_pass would send upstream stays under
// its URI part (see route.AppendReplaced); a request that fails is answered 400.
func (c *client) upstreamPathOK() bool {
	pass := c.lcf.Pass
	if !pass.HasURI || c.prefix == "" || c.loc == nil || c.loc.Kind == conf.LocExact {
		return true
	}
	return !route.ClimbsOut(c.uriBuf, c.prefix, pass.URI)
}

// escapeControls percent-encodes the control characters but HTAB in h[from:], a
// header field value built from variables: $uri is decoded, so a client's %0D%0A would
// otherwise end the field and start one of the client's choosing (request or response
// splitting, which nginx lets through). It allocates only when it finds one and h has
// no room.
func escapeControls(h []byte, from int) []byte {
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

// NameRulesFor gives the http1 parser the field name rules of the server host
// selects on the connection's address (http1.NameRulesByHost); it is asked only where
// the servers of the address differ (LocConf.nameRulesVary).
func (c *client) NameRulesFor(host []byte) http1.NameRules {
	if a := c.w.snapshotFor(c.local).Routes.Addr(c.local); a != nil {
		return httpcore.ServerConf(a.Server(host)).NameRules()
	}
	return c.req.Names
}

// setsHeader reports whether proxy_set_header names the field (so the client's own
// field is not passed).
func (lc *LocConf) setsHeader(name []byte) bool {
	for i := range lc.SetHeaders {
		if equalFoldBytes(name, lc.SetHeaders[i].Name) {
			return true
		}
	}
	return false
}

func equalFold(a, b string) bool { return equalFoldBytes([]byte(a), b) }

// equalFoldBytes compares ASCII case-insensitively without allocating.
func equalFoldBytes(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// containsToken reports whether a comma-separated list holds token (any case).
func containsToken(list []byte, token string) bool {
	for len(list) > 0 {
		item := list
		if i := bytes.IndexByte(list, ','); i >= 0 {
			item, list = list[:i], list[i+1:]
		} else {
			list = nil
		}
		if equalFoldBytes(bytes.TrimSpace(item), token) {
			return true
		}
	}
	return false
}
