package compress

import (
	"bytes"
	"time"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/static"
)

// Types is a *_types list: text/html and the names given, or any type.
type Types struct {
	Any   bool
	names map[string]bool
}

var htmlOnly = Types{names: map[string]bool{"text/html": true}}

// match is nginx's ngx_http_test_content_type over a Content-Type value: the type
// is what comes before a ";" that a charset parameter follows (with another
// parameter the whole value), compared without regard to case. Any matches a
// response without a type too.
func (t *Types) match(ct []byte) bool {
	if t.Any {
		return true
	}
	if len(ct) == 0 {
		return false
	}
	var lower [128]byte
	n := contentTypeLen(ct)
	if n > len(lower) {
		return false
	}
	for i, c := range ct[:n] {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return t.names[string(lower[:n])]
}

// contentTypeLen is nginx's content_type_len for a Content-Type it passes on
// (ngx_http_upstream_copy_content_type): the value up to a ";" only when a
// "charset=" parameter follows it (after spaces), else the whole value.
func contentTypeLen(ct []byte) int {
	for i := 0; i < len(ct); i++ {
		if ct[i] != ';' {
			continue
		}
		j := i + 1
		for j < len(ct) && ct[j] == ' ' {
			j++
		}
		if j == len(ct) {
			return len(ct)
		}
		if len(ct)-j >= 8 && http1.EqualFold(ct[j:j+8], "charset=") {
			return i
		}
	}
	return len(ct)
}

// gzipAccepted is nginx's test of Accept-Encoding for gzip (ngx_http_gzip_ok's start
// and ngx_http_gzip_accept_encoding): "gzip," first, or a "gzip" token whose q is
// not 0. nginx parses q loosely; so does this.
func gzipAccepted(ae []byte) bool {
	if len(ae) < 4 {
		return false
	}
	if bytes.HasPrefix(ae, []byte("gzip,")) {
		return true
	}
	start := 0
	p := -1
	for {
		i := indexFold(ae[start:], "gzip")
		if i < 0 {
			return false
		}
		i += start
		// As nginx: "gzip" right where the search started counts, so in
		// "xgzipgzip" the second one does.
		if i == start || ae[i-1] == ',' || ae[i-1] == ' ' {
			p = i
			break
		}
		start = i + 4
	}
	p += 4
	for p < len(ae) {
		c := ae[p]
		p++
		switch c {
		case ',':
			return true
		case ';':
			return gzipQuantity(ae, p)
		case ' ':
			continue
		default:
			return false
		}
	}
	return true
}

// gzipQuantity is the part of ngx_http_gzip_accept_encoding after "gzip;".
func gzipQuantity(ae []byte, p int) bool {
	for p < len(ae) {
		c := ae[p]
		p++
		switch c {
		case 'q', 'Q':
			if p+2 > len(ae) || ae[p] != '=' {
				return false
			}
			return nginxQuantity(ae[p+1:]) != 0
		case ' ':
			continue
		default:
			return false
		}
	}
	return true
}

// nginxQuantity is ngx_http_gzip_quantity: 0 for q=0 or a malformed q, else > 0.
func nginxQuantity(v []byte) int {
	if len(v) == 0 {
		return 0
	}
	c := v[0]
	if c != '0' && c != '1' {
		return 0
	}
	q := int(c-'0') * 100
	if len(v) == 1 {
		return q
	}
	c = v[1]
	if c == ',' || c == ' ' {
		return q
	}
	if c != '.' {
		return 0
	}
	n := 0
	for _, c := range v[2:] {
		if c == ',' || c == ' ' {
			break
		}
		if c < '0' || c > '9' {
			return 0
		}
		q += int(c - '0') // sic: nginx adds the digits without weighting them
		n++
	}
	if q > 100 || n > 3 {
		return 0
	}
	return q
}

// indexFold is the index of the lower-case ASCII word in s, any case, or -1.
func indexFold(s []byte, word string) int {
	for i := 0; i+len(word) <= len(s); i++ {
		if http1.EqualFold(s[i:i+len(word)], word) {
			return i
		}
	}
	return -1
}

// quality is the q-value (0 to 1000) Accept-Encoding gives coding, RFC 9110's
// reading; -1 when it does not name it ("*" is not taken as naming it).
func quality(ae []byte, coding string) int {
	for len(ae) > 0 {
		var elem []byte
		if i := bytes.IndexByte(ae, ','); i >= 0 {
			elem, ae = ae[:i], ae[i+1:]
		} else {
			elem, ae = ae, nil
		}
		name, params, _ := bytes.Cut(elem, []byte(";"))
		if !http1.EqualFold(bytes.TrimSpace(name), coding) {
			continue
		}
		q := 1000
		for len(params) > 0 {
			var p []byte
			p, params, _ = bytes.Cut(params, []byte(";"))
			p = bytes.TrimSpace(p)
			if len(p) > 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=' {
				q = parseQ(bytes.TrimSpace(p[2:]))
			}
		}
		return q
	}
	return -1
}

// parseQ reads a qvalue ("0", "0.5", "1.000") as thousandths; malformed is 0.
func parseQ(v []byte) int {
	if len(v) == 0 || (v[0] != '0' && v[0] != '1') {
		return 0
	}
	q := int(v[0]-'0') * 1000
	if len(v) == 1 {
		return q
	}
	if v[1] != '.' || len(v) > 5 {
		return 0
	}
	w := 100
	for _, c := range v[2:] {
		if c < '0' || c > '9' {
			return 0
		}
		q += int(c-'0') * w
		w /= 10
	}
	if q > 1000 {
		return 0
	}
	return q
}

// allowed is the rest of nginx's ngx_http_gzip_ok once Accept-Encoding accepts the
// coding: msie6, gzip_http_version, gzip_proxied for a request with Via, and
// gzip_disable.
// withHead false: before the response exists (gzip_static), as nginx's checks
// then find none of its fields.
func allowed(r *httpcore.Request, lc *LocConf, withHead bool) bool {
	req := r.Head()
	ua, hasUA := req.Headers.Get("User-Agent")
	if hasUA && lc.DisableMSIE6 && isMSIE6(ua) {
		return false
	}
	if req.ProtoMinor() < lc.HTTPMinor {
		return false
	}
	if _, via := req.Headers.Get("Via"); via {
		if withHead && !proxiedAllows(r, lc.Proxied) || !withHead && lc.Proxied&ProxiedOff != 0 {
			return false
		}
	}
	if hasUA {
		for _, re := range lc.Disable {
			if re.Match(ua) {
				return false
			}
		}
	}
	return true
}

// proxiedAllows is gzip_proxied for a request that came through a proxy (Via), in
// nginx's order: the request's Authorization, the response's Expires (expired: an
// Expires before Date or now), Cache-Control (no-cache, no-store, private), and
// then Last-Modified and ETag (a response with none of these headers is compressed
// whatever the flags, as in nginx).
func proxiedAllows(r *httpcore.Request, p Proxied) bool {
	if p&ProxiedOff != 0 {
		return false
	}
	if p&ProxiedAny != 0 {
		return true
	}
	if _, auth := r.Head().Headers.Get("Authorization"); auth && p&ProxiedAuth != 0 {
		return true
	}
	h := r.Header()
	if e, ok := lastValue(h, "Expires"); ok {
		if p&ProxiedExpired == 0 {
			return false
		}
		expires := static.ParseHTTPTime(e)
		if expires < 0 {
			return false
		}
		date := time.Now().Unix()
		if d, ok := lastValue(h, "Date"); ok && h.HasDate {
			if date = static.ParseHTTPTime(d); date < 0 {
				return false
			}
		}
		return expires < date
	}
	if _, ok := h.Get("Cache-Control"); ok {
		return p&ProxiedNoCache != 0 && cacheControlHas(h, "no-cache") ||
			p&ProxiedNoStore != 0 && cacheControlHas(h, "no-store") ||
			p&ProxiedPrivate != 0 && cacheControlHas(h, "private")
	}
	if _, ok := h.Get("Last-Modified"); ok && p&ProxiedNoLastModified != 0 {
		return false
	}
	if _, ok := h.Get("ETag"); ok && p&ProxiedNoETag != 0 {
		return false
	}
	return true
}

// lastValue is the last field called name: nginx keeps the last of a single-valued
// upstream header.
func lastValue(h *httpcore.Header, name string) ([]byte, bool) {
	var v []byte
	found := false
	for i := h.Next(name, 0); i >= 0; i = h.Next(name, i+1) {
		v, found = h.Value(i), true
	}
	return v, found
}

// cacheControlHas is nginx's ngx_http_parse_multi_header_lines over every
// Cache-Control field for a directive without a value: an element (after a "," or a
// ";") that starts with name (any case) and ends there, but for spaces.
func cacheControlHas(h *httpcore.Header, name string) bool {
	for i := h.Next("Cache-Control", 0); i >= 0; i = h.Next("Cache-Control", i+1) {
		v := h.Value(i)
		start := 0
		for start < len(v) {
			if len(v)-start >= len(name) && http1.EqualFold(v[start:start+len(name)], name) {
				end := start + len(name)
				for end < len(v) && v[end] == ' ' {
					end++
				}
				if end == len(v) || v[end] == ',' {
					return true
				}
			}
			// On past the next "," or ";", and the spaces after it.
			for start < len(v) {
				c := v[start]
				start++
				if c == ',' || c == ';' {
					break
				}
			}
			for start < len(v) && v[start] == ' ' {
				start++
			}
		}
	}
	return false
}

// isMSIE6 is nginx's r->headers_in.msie6 (ngx_http_process_user_agent): "MSIE 4.",
// "MSIE 5.", or "MSIE 6." without "SV1" after it, and not Opera.
func isMSIE6(ua []byte) bool {
	i := bytes.Index(ua, []byte("MSIE "))
	if i < 0 || i+7 >= len(ua) || bytes.Contains(ua, []byte("Opera")) {
		return false
	}
	m := ua[i:]
	if m[6] != '.' {
		return false
	}
	switch m[5] {
	case '4', '5':
		return true
	case '6':
		return !bytes.Contains(m[8:], []byte("SV1"))
	}
	return false
}
