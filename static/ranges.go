package static

import (
	"math"
	"strconv"
)

// rangeResult is what nginx's ngx_http_range_parse decides.
type rangeResult int

const (
	rangesOK       rangeResult = iota
	rangesDeclined             // send the whole file
	rangesNotSatisfiable
)

// byteRange is [start, end).
type byteRange struct{ start, end int64 }

// parseRanges is nginx's ngx_http_range_parse over the value after "bytes=": spaces
// around numbers, suffix ranges, a limit of max ranges (-1: none), and the whole
// file when the ranges overlap to more than it or one of them starts at 0 past an
// empty file.
func parseRanges(v []byte, length int64, max int, out []byteRange) ([]byteRange, rangeResult) {
	const cutoff, cutlim = math.MaxInt64 / 10, math.MaxInt64 % 10
	at := func(i int) byte { // nginx's value is NUL-terminated
		if i < len(v) {
			return v[i]
		}
		return 0
	}
	p := 0
	var size int64
	left := max
	for {
		var start, end int64
		suffix := false
		for at(p) == ' ' {
			p++
		}
		if at(p) != '-' {
			if c := at(p); c < '0' || c > '9' {
				return out, rangesNotSatisfiable
			}
			for c := at(p); c >= '0' && c <= '9'; c = at(p) {
				if start >= cutoff && (start > cutoff || int64(c-'0') > cutlim) {
					return out, rangesNotSatisfiable
				}
				start = start*10 + int64(c-'0')
				p++
			}
			for at(p) == ' ' {
				p++
			}
			if at(p) != '-' {
				return out, rangesNotSatisfiable
			}
			p++
			for at(p) == ' ' {
				p++
			}
			if c := at(p); c == ',' || c == 0 {
				end = length
				goto found
			}
		} else {
			suffix = true
			p++
		}
		if c := at(p); c < '0' || c > '9' {
			return out, rangesNotSatisfiable
		}
		for c := at(p); c >= '0' && c <= '9'; c = at(p) {
			if end >= cutoff && (end > cutoff || int64(c-'0') > cutlim) {
				return out, rangesNotSatisfiable
			}
			end = end*10 + int64(c-'0')
			p++
		}
		for at(p) == ' ' {
			p++
		}
		if c := at(p); c != ',' && c != 0 {
			return out, rangesNotSatisfiable
		}
		if suffix {
			if end < length {
				start = length - end
			} else {
				start = 0
			}
			end = length - 1
		}
		if end >= length {
			end = length
		} else {
			end++
		}
	found:
		if start < end {
			out = append(out, byteRange{start, end})
			if size > math.MaxInt64-(end-start) {
				return out, rangesNotSatisfiable
			}
			size += end - start
			if left == 0 {
				return out, rangesDeclined
			}
			left--
		} else if start == 0 {
			return out, rangesDeclined
		}
		if at(p) != ',' {
			break
		}
		p++
	}
	if len(out) == 0 {
		return out, rangesNotSatisfiable
	}
	if size > length {
		return out, rangesDeclined
	}
	return out, rangesOK
}

// RangeFilter is nginx's range header filter for a 200 whose length is known: a
// Range that If-Range allows becomes a 206 (one range, or multipart/byteranges), a
// 416 when none of its ranges is in the file; otherwise Accept-Ranges: bytes.
func (h *Handler) RangeFilter(req *Request, lc *LocConf, r *Response) {
	if r.Status != 200 || r.ContentLength < 0 || lc.MaxRanges == 0 {
		return
	}
	rng := req.Range
	if rng == nil || len(rng) < 7 || !prefixFold(rng, "bytes=") || !ifRangeAllows(req.IfRange, r) {
		r.AcceptRanges = true
		return
	}
	ranges, res := parseRanges(rng[6:], r.ContentLength, lc.MaxRanges, h.ranges[:0])
	h.ranges = ranges
	switch res {
	case rangesDeclined:
		r.AcceptRanges = true
	case rangesNotSatisfiable:
		start := len(r.buf)
		r.buf = strconv.AppendInt(append(r.buf, "bytes */"...), r.ContentLength, 10)
		r.ContentRange = r.buf[start:len(r.buf):len(r.buf)]
		r.ContentLength = -1
		r.fail(416)
	default:
		r.Status = 206
		if len(ranges) == 1 {
			h.singlePart(r, ranges[0])
		} else {
			h.multipart(r, ranges)
		}
	}
}

// ifRangeAllows is the If-Range test: an entity tag (ending in '"') must equal the
// ETag byte for byte, a date must equal Last-Modified.
func ifRangeAllows(v []byte, r *Response) bool {
	if v == nil {
		return true
	}
	if len(v) >= 2 && v[len(v)-1] == '"' {
		return r.ETag != nil && string(v) == string(r.ETag)
	}
	return r.LastModified != -1 && ParseHTTPTime(v) == r.LastModified
}

func prefixFold(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

func (h *Handler) singlePart(r *Response, rg byteRange) {
	start := len(r.buf)
	r.buf = append(r.buf, "bytes "...)
	r.buf = strconv.AppendInt(r.buf, rg.start, 10)
	r.buf = append(r.buf, '-')
	r.buf = strconv.AppendInt(r.buf, rg.end-1, 10)
	r.buf = append(r.buf, '/')
	r.buf = strconv.AppendInt(r.buf, r.ContentLength, 10)
	r.ContentRange = r.buf[start:len(r.buf):len(r.buf)]
	r.ContentLength = rg.end - rg.start
	r.Body = append(r.Body[:0], Part{Off: rg.start, Len: rg.end - rg.start})
}

// multipart lays the ranges out as nginx does: each after "\r\n--BOUNDARY\r\n" and
// its Content-Type and Content-Range lines, the boundary a counter of 20 digits.
func (h *Handler) multipart(r *Response, ranges []byteRange) {
	h.boundary++
	total := r.ContentLength
	start := len(r.buf)
	r.buf = append(r.buf, "\r\n--"...)
	r.buf = appendBoundary(r.buf, h.boundary)
	r.buf = append(r.buf, "\r\n"...)
	if len(r.ContentType) > 0 {
		r.buf = append(append(r.buf, "Content-Type: "...), r.ContentType...)
		if len(r.Charset) > 0 {
			r.buf = append(append(r.buf, "; charset="...), r.Charset...)
		}
		r.buf = append(r.buf, "\r\n"...)
	}
	r.buf = append(r.buf, "Content-Range: bytes "...)
	partHead := r.buf[start:len(r.buf):len(r.buf)]

	start = len(r.buf)
	r.buf = append(r.buf, "multipart/byteranges; boundary="...)
	r.buf = appendBoundary(r.buf, h.boundary)
	r.ContentType, r.Charset = r.buf[start:len(r.buf):len(r.buf)], nil

	r.Body = r.Body[:0]
	length := int64(0)
	for _, rg := range ranges {
		start = len(r.buf)
		r.buf = strconv.AppendInt(r.buf, rg.start, 10)
		r.buf = append(r.buf, '-')
		r.buf = strconv.AppendInt(r.buf, rg.end-1, 10)
		r.buf = append(r.buf, '/')
		r.buf = strconv.AppendInt(r.buf, total, 10)
		r.buf = append(r.buf, "\r\n\r\n"...)
		line := r.buf[start:len(r.buf):len(r.buf)]
		r.Body = append(r.Body, Part{Data: partHead}, Part{Data: line}, Part{Off: rg.start, Len: rg.end - rg.start})
		length += int64(len(partHead)+len(line)) + rg.end - rg.start
	}
	start = len(r.buf)
	r.buf = append(r.buf, "\r\n--"...)
	r.buf = appendBoundary(r.buf, h.boundary)
	r.buf = append(r.buf, "--\r\n"...)
	tail := r.buf[start:len(r.buf):len(r.buf)]
	r.Body = append(r.Body, Part{Data: tail})
	r.ContentLength = length + int64(len(tail))
}

// appendBoundary writes n as nginx's %0muA: 20 digits, zero-padded.
func appendBoundary(dst []byte, n uint64) []byte {
	var d [20]byte
	for i := len(d) - 1; i >= 0; i-- {
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(dst, d[:]...)
}

// SingleRange is the range filter's reading of a Range value for a response of
// length bytes that another module sends (a proxy cache hit) and that serves one
// range: ok with [start, end) when it asks for one satisfiable range, unsatisfiable
// when none of its ranges is in the response; neither when the whole response goes
// (no "bytes=", ranges that cover more than the response, or several ranges).
func SingleRange(v []byte, length int64) (start, end int64, ok, unsatisfiable bool) {
	if len(v) < 7 || !prefixFold(v, "bytes=") {
		return 0, 0, false, false
	}
	var buf [2]byteRange
	ranges, res := parseRanges(v[6:], length, 2, buf[:0])
	switch {
	case res == rangesNotSatisfiable:
		return 0, 0, false, true
	case res != rangesOK || len(ranges) != 1:
		return 0, 0, false, false
	}
	return ranges[0].start, ranges[0].end, true, false
}
