package proxy

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
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
	r := ex.r
	req := r.Head()
	lcf := ex.lc
	mark := len(h)
	if lcf.Method != nil {
		h = lcf.Method.Append(h, r)
		if m := h[mark:]; len(m) > 0 && !http1.IsToken(m) {
			ex.st.log.Error("proxy_method made an invalid method \""+string(httpcore.EscapeControls(m, 0))+"\"", "client", r.RemoteAddr().String())
			return h, false
		}
	}
	if len(h) > mark {
		// proxy_method's, which stays after an error_page redirect, as in nginx
	} else if r.AsGET() && !r.IsHEAD() || ex.convertHead() {
		h = append(h, "GET"...)
	} else {
		h = append(h, req.Method()...)
	}
	h = append(h, ' ')
	if lcf.Pass.Value != nil && len(ex.vt.uri) > 0 {
		h = append(h, ex.vt.uri...) // a URI made of variables is the whole URI, as nginx
	} else {
		h = appendUpstreamURI(h, r, lcf.Pass)
	}
	if lcf.HTTPMinor == 1 {
		h = append(h, " HTTP/1.1\r\n"...)
	} else {
		h = append(h, " HTTP/1.0\r\n"...)
	}
	ex.upgrade, ex.connClose = false, lcf.HTTPMinor == 0
	// A body that goes upstream has the framing numaproxy gives it; without one
	// (proxy_pass_request_body off) a proxy_set_header Content-Length takes the
	// place of nginx's default, the client's body length.
	body := r.Body()
	bodyOut := body != httpcore.BodyNone && lcf.PassRequestBody
	ex.bodyWithheld = body != httpcore.BodyNone && !lcf.PassRequestBody
	for i := range lcf.SetHeaders {
		s := &lcf.SetHeaders[i]
		if bodyOut && (nameIs(s.Name, "content-length") || nameIs(s.Name, "transfer-encoding")) {
			continue
		}
		mark := len(h)
		h = append(h, s.Name...)
		h = append(h, ": "...)
		valueStart := len(h)
		h = httpcore.EscapeControls(s.Value.Append(h, r), valueStart)
		if len(h) == valueStart {
			h = h[:mark] // an empty value sends nothing (and hides the client's field)
			continue
		}
		value := h[valueStart:]
		switch {
		case nameIs(s.Name, "upgrade"):
			ex.upgrade = req.Upgrade()
		case nameIs(s.Name, "connection"):
			ex.connClose = containsToken(value, "close")
		}
		h = append(h, "\r\n"...)
	}
	for i := 0; lcf.PassRequestHeaders && i < req.Headers.Len(); i++ {
		name := req.Headers.Name(i)
		// Only the fixed hop-by-hop set: a field the client lists in Connection is passed
		// (as nginx), else "Connection: Authorization" would strip the client's own
		// credentials, or any field a proxy_set_header does not replace.
		if http1.IsHopByHopName(name) || http1.EqualFold(name, "content-length") || http1.EqualFold(name, "expect") || lcf.setsHeader(name) {
			continue
		}
		if lcf.Cache.Zone != nil && cacheClears(name) {
			continue // as nginx's proxy_set_header defaults of a location that caches
		}
		h = append(h, name...)
		h = append(h, ": "...)
		h = append(h, req.Headers.Value(i)...)
		h = append(h, "\r\n"...)
	}
	if lcf.Cache.Zone != nil {
		h = ex.appendValidators(h)
	}
	switch {
	case r.AsGET():
	case body == httpcore.BodyChunked && bodyOut:
		h = append(h, "Transfer-Encoding: chunked\r\n"...)
	case body == httpcore.BodyLength && (bodyOut || !lcf.setsHeader(contentLengthName)):
		// Under proxy_pass_request_body off too, as nginx, whose default is
		// Content-Length $proxy_internal_body_length: the length of a body not sent.
		h = append(h, "Content-Length: "...)
		h = strconv.AppendInt(h, r.BodyLength(), 10)
		h = append(h, "\r\n"...)
	case body == httpcore.BodyNone && req.ContentLength() == 0 && !lcf.setsHeader(contentLengthName):
		h = append(h, "Content-Length: 0\r\n"...) // the client's, as nginx passes it
	}
	return append(h, "\r\n"...), true
}

var contentLengthName = []byte("content-length")

// appendUpstreamURI is the request-target sent upstream, nginx's rules. With a URI
// part in proxy_pass, the part of $uri that matched the location is replaced by it and
// the rest re-escaped if the client's path held escapes (upstreamPathOK has refused a
// rest that would climb out of it). Without one the client's URI goes as received, so
// the upstream decodes the same path the locations saw decoded; after an internal
// redirect, or for an absolute-form target without a path, $uri goes escaped.
func appendUpstreamURI(h []byte, r *httpcore.Request, pass *PassTarget) []byte {
	query, hasQuery := r.Args()
	loc, prefix, uri := r.Location().Owner(), r.Prefix(), r.URI()
	switch {
	case pass.HasURI && loc != nil && loc.Kind == conf.LocExact:
		h = append(h, pass.URI...) // location = /a: the whole URI is the matched part
	case pass.HasURI && prefix != "":
		h, _ = route.AppendReplaced(h, uri, prefix, pass.URI, r.URIChanged() || route.HasEscape(r.Head().Path()))
	case r.URIChanged() || len(r.Head().Path()) == 0:
		h = route.AppendEscaped(h, uri)
	default:
		h = append(h, r.Head().Path()...)
	}
	if hasQuery {
		h = append(h, '?')
		h = append(h, query...)
	}
	return h
}

// upstreamPathOK reports whether the path proxy_pass would send upstream stays under
// its URI part (see route.AppendReplaced); a request that fails is answered 400.
func upstreamPathOK(r *httpcore.Request, pass *PassTarget) bool {
	loc, prefix := r.Location().Owner(), r.Prefix()
	if !pass.HasURI || prefix == "" || loc == nil || loc.Kind == conf.LocExact {
		return true
	}
	return !route.ClimbsOut(r.URI(), prefix, pass.URI)
}

// setsHeader reports whether proxy_set_header names the field (so the client's own
// field is not passed).
func (lc *LocConf) setsHeader(name []byte) bool {
	for i := range lc.SetHeaders {
		if http1.EqualFold(name, lc.SetHeaders[i].Name) {
			return true
		}
	}
	return false
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
		if http1.EqualFold(bytes.TrimSpace(item), token) {
			return true
		}
	}
	return false
}

// nameIs reports whether a configured field name is lower (any case): the length
// first, as strings.EqualFold walks the bytes before it looks at the lengths.
func nameIs(name, lower string) bool {
	return len(name) == len(lower) && strings.EqualFold(name, lower)
}
