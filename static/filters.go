package static

import (
	"bytes"
	"strconv"
	"time"
)

// The header filters of nginx that shape a static response, each a function the
// core's filter chain can call for any response, in nginx's order: not modified
// (304, 412), headers (expires), charset, range (206, 416); then the header filter's
// own rules (Last-Modified only with 200, 206 and 304; an absolute Location).

// Filter runs the header filters over a Send response of Content, as nginx runs them
// when the static handler sends its header; the special responses it turns into
// (412, 416) and those Content returned (301, 403, 404 ...) get the pass nginx's
// ngx_http_special_response_handler gives them.
func (h *Handler) Filter(req *Request, lc *LocConf, r *Response) {
	if r.Action != Send {
		return
	}
	if !r.ErrorPage {
		switch NotModified(req, lc, r) {
		case 412:
			r.cleanHeader()
			r.fail(412)
		case 304:
			r.Status = 304
			r.ContentType, r.Charset, r.ContentLength, r.AcceptRanges = nil, nil, -1, false
			r.ContentEncoding = nil // nginx's not modified filter drops it too
			r.Body = r.Body[:0]
		}
	}
	if !r.ErrorPage {
		ExpiresFilter(lc, r, req.Now)
		h.CharsetFilter(lc, r)
		if r.Status == 200 && r.allowRanges && lc.MaxRanges != 0 &&
			!(req.Range != nil && req.Encodes != nil && req.Encodes(r)) {
			h.RangeFilter(req, lc, r)
		}
	}
	if r.ErrorPage {
		h.specialResponse(lc, r, req.Now)
	}
	FinalHeader(req, r)
}

// specialResponse is the header pass of nginx's error page: text/html, no
// Accept-Ranges, Last-Modified or ETag, then expires and charset again.
func (h *Handler) specialResponse(lc *LocConf, r *Response, now int64) {
	r.ContentType, r.ContentLength = textHTML, -1
	r.AcceptRanges, r.LastModified, r.ETag, r.ContentEncoding = false, -1, nil, nil
	r.Body = r.Body[:0]
	ExpiresFilter(lc, r, now)
	h.CharsetFilter(lc, r)
}

var textHTML = []byte("text/html")

// cleanHeader is nginx's ngx_http_clean_header: a 412 keeps nothing of the 200.
func (r *Response) cleanHeader() {
	r.ContentType, r.Charset, r.ContentLength, r.LastModified = nil, nil, -1, -1
	r.ETag, r.Location, r.ContentRange, r.AcceptRanges = nil, nil, nil, false
	r.Expires, r.CacheControl, r.allowRanges, r.ContentEncoding = nil, nil, false, nil
	r.Body = r.Body[:0]
}

// FinalHeader applies the rules of nginx's header filter: Last-Modified goes only
// with 200, 206 and 304, and a Location starting with "/" is made absolute when
// req.Redirect says how.
func FinalHeader(req *Request, r *Response) {
	if r.Status != 200 && r.Status != 206 && r.Status != 304 {
		r.LastModified = -1
	}
	if req.Redirect != nil && len(r.Location) > 0 && r.Location[0] == '/' {
		start := len(r.buf)
		r.buf = AppendAbsoluteLocation(r.buf, r.Location, req.Redirect)
		r.Location = r.buf[start:len(r.buf):len(r.buf)]
	}
}

// AppendAbsoluteLocation appends location (starting with "/") after the scheme, host
// and port of b, as nginx's header filter: the port is left out when it is 0 or the
// scheme's default.
func AppendAbsoluteLocation(dst, location []byte, b *RedirectBase) []byte {
	if b.HTTPS {
		dst = append(dst, "https://"...)
	} else {
		dst = append(dst, "http://"...)
	}
	dst = append(dst, b.Host...)
	if b.Port != 0 && !(b.HTTPS && b.Port == 443) && !(!b.HTTPS && b.Port == 80) {
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, int64(b.Port), 10)
	}
	return append(dst, location...)
}

// NotModified is nginx's not-modified filter for a 200: 412 when If-Unmodified-Since
// or If-Match fails, 304 when If-Modified-Since (as if_modified_since says) and
// If-None-Match (weak comparison) both allow it, else 0.
func NotModified(req *Request, lc *LocConf, r *Response) int {
	if r.Status != 200 {
		return 0
	}
	if req.IfUnmodifiedSince != nil && (r.LastModified == -1 || ParseHTTPTime(req.IfUnmodifiedSince) < r.LastModified) {
		return 412
	}
	if req.IfMatch != nil && !etagMatches(req.IfMatch, r.ETag, false) {
		return 412
	}
	if req.IfModifiedSince == nil && req.IfNoneMatch == nil {
		return 0
	}
	if req.IfModifiedSince != nil && modifiedSince(req.IfModifiedSince, lc.IfModifiedSince, r.LastModified) {
		return 0
	}
	if req.IfNoneMatch != nil && !etagMatches(req.IfNoneMatch, r.ETag, true) {
		return 0
	}
	return 304
}

// modifiedSince is nginx's ngx_http_test_if_modified: true means send the body.
func modifiedSince(v []byte, mode IMSMode, lm int64) bool {
	if lm == -1 || mode == IMSOff {
		return true
	}
	ims := ParseHTTPTime(v)
	if ims == lm {
		return false
	}
	return mode == IMSExact || ims < lm
}

// etagMatches is nginx's ngx_http_test_if_match: "*" matches anything; otherwise one
// of the comma-separated list must equal etag (weak: ignoring "W/" on both sides).
func etagMatches(list, etag []byte, weak bool) bool {
	if len(list) == 1 && list[0] == '*' {
		return true
	}
	if etag == nil {
		return false
	}
	if weak && len(etag) > 2 && etag[0] == 'W' && etag[1] == '/' {
		etag = etag[2:]
	}
	p := 0
	for p < len(list) {
		if weak && len(list)-p > 2 && list[p] == 'W' && list[p+1] == '/' {
			p += 2
		}
		if len(etag) > len(list)-p {
			return false
		}
		if bytes.Equal(list[p:p+len(etag)], etag) {
			q := p + len(etag)
			for q < len(list) && (list[q] == ' ' || list[q] == '\t') {
				q++
			}
			if q == len(list) || list[q] == ',' {
				return true
			}
		}
		for p < len(list) && list[p] != ',' {
			p++
		}
		for p < len(list) && (list[p] == ' ' || list[p] == '\t' || list[p] == ',') {
			p++
		}
	}
	return false
}

// AppendETag appends nginx's ETag of a file: "mtime-size", both in lower-case hex.
func AppendETag(dst []byte, mtime, size int64) []byte {
	dst = append(dst, '"')
	dst = strconv.AppendUint(dst, uint64(mtime), 16)
	dst = append(dst, '-')
	dst = strconv.AppendUint(dst, uint64(size), 16)
	return append(dst, '"')
}

// safeForHeaders reports the statuses nginx's headers filter adds expires (and
// add_header without always) to.
func safeForHeaders(status int) bool {
	switch status {
	case 200, 201, 204, 206, 301, 302, 303, 304, 307, 308:
		return true
	}
	return false
}

var (
	epochExpires = []byte("Thu, 01 Jan 1970 00:00:01 GMT")
	maxExpires   = []byte("Thu, 31 Dec 2037 23:55:55 GMT")
	noCache      = []byte("no-cache")
	maxAgeMax    = []byte("max-age=315360000")
	maxAgeZero   = []byte("max-age=0")
)

// ExpiresFilter is the expires part of nginx's headers filter: Expires and
// Cache-Control for the statuses add_header also uses.
func ExpiresFilter(lc *LocConf, r *Response, now int64) {
	e := lc.Expires
	if e.Mode == ExpiresOff || !safeForHeaders(r.Status) {
		return
	}
	switch e.Mode {
	case ExpiresEpoch:
		r.Expires, r.CacheControl = epochExpires, noCache
		return
	case ExpiresMax:
		r.Expires, r.CacheControl = maxExpires, maxAgeMax
		return
	}
	t := int64(e.Time / time.Second)
	start := len(r.buf)
	if t == 0 && e.Mode != ExpiresDaily {
		r.buf = AppendHTTPTime(r.buf, now)
		r.Expires, r.CacheControl = r.buf[start:len(r.buf):len(r.buf)], maxAgeZero
		return
	}
	var at, maxAge int64
	switch {
	case e.Mode == ExpiresDaily:
		at = nextTime(now, t)
		maxAge = at - now
	case e.Mode == ExpiresAccess || r.LastModified == -1:
		at, maxAge = now+t, t
	default:
		at = r.LastModified + t
		maxAge = at - now
	}
	r.buf = AppendHTTPTime(r.buf, at)
	r.Expires = r.buf[start:len(r.buf):len(r.buf)]
	if t < 0 || maxAge < 0 {
		r.CacheControl = noCache
		return
	}
	start = len(r.buf)
	r.buf = strconv.AppendInt(append(r.buf, "max-age="...), maxAge, 10)
	r.CacheControl = r.buf[start:len(r.buf):len(r.buf)]
}

// nextTime is nginx's ngx_next_time: the next moment after now (local time) at
// seconds since midnight.
func nextTime(now, when int64) int64 {
	t := time.Unix(now, 0)
	y, m, d := t.Date()
	h, mi, s := int(when/3600), int(when%3600/60), int(when%60)
	next := time.Date(y, m, d, h, mi, s, 0, time.Local).Unix()
	if next-now > 0 {
		return next
	}
	return time.Date(y, m, d+1, h, mi, s, 0, time.Local).Unix()
}

// CharsetFilter is the header part of nginx's charset filter: the location's charset
// goes on responses whose type charset_types lists and that have none yet, except
// on 301 and 302. (A source_charset other than charset, which would recode, is
// refused at load time, as nginx does without a charset_map.)
func (h *Handler) CharsetFilter(lc *LocConf, r *Response) {
	if len(r.ContentType) == 0 || lc.Charset == "" || len(r.Charset) > 0 || r.Status == 301 || r.Status == 302 {
		return
	}
	if !lc.CharsetTypes.Has(r.ContentType, h.scratch[:0]) {
		return
	}
	start := len(r.buf)
	r.buf = append(r.buf, lc.Charset...)
	r.Charset = r.buf[start:len(r.buf):len(r.buf)]
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if y >= 'A' && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
