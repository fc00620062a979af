package main

import (
	"bytes"
	"errors"
	"fmt"
)

// A strict, minimal HTTP/1.1 response reader for the load generators: CRLF line
// ends only, no obsolete line folding, a length from Content-Length or chunked
// encoding (never "read until close"), at most maxHead bytes of head. Anything
// else is an error, so a proxy that answers sloppily shows up in the errors column.

const maxHead = 16 << 10

var errIncomplete = errors.New("incomplete response")

// response is what a parsed response told us.
type response struct {
	status int
	close  bool // Connection: close, or HTTP/1.0 without keep-alive
	size   int  // bytes of the whole response (head+body) in the buffer
	body   []byte
}

// parseResponse parses the response at the start of b. It returns errIncomplete
// if b does not hold all of it yet. head says the request was HEAD (no body).
func parseResponse(b []byte, head bool) (response, error) {
	var r response
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > maxHead {
			return r, fmt.Errorf("response head over %d bytes", maxHead)
		}
		if i := bytes.IndexByte(b, '\n'); i >= 0 && (i == 0 || b[i-1] != '\r') {
			return r, fmt.Errorf("bare LF in response head")
		}
		return r, errIncomplete
	}
	hdr := b[:end+2]
	bodyStart := end + 4
	line, rest, _ := bytes.Cut(hdr, []byte("\r\n"))
	if len(line) < 12 || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return r, fmt.Errorf("malformed status line %q", trunc(line))
	}
	var http10 bool
	switch string(line[:8]) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		http10 = true
		r.close = true
	default:
		return r, fmt.Errorf("not HTTP/1.x: %q", trunc(line))
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return r, fmt.Errorf("malformed status code %q", trunc(line))
		}
		r.status = r.status*10 + int(c-'0')
	}
	if r.status < 200 {
		return r, fmt.Errorf("unexpected interim status %d", r.status)
	}
	clen := -1
	chunked := false
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if bytes.IndexByte(l, '\n') >= 0 || bytes.IndexByte(l, '\r') >= 0 {
			return r, fmt.Errorf("bare CR or LF in header line")
		}
		if len(l) > 0 && (l[0] == ' ' || l[0] == '\t') {
			return r, fmt.Errorf("obsolete line folding")
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || len(name) == 0 || !isToken(name) {
			return r, fmt.Errorf("malformed header line %q", trunc(l))
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := parseDecimal(value)
			if err != nil {
				return r, fmt.Errorf("content-length: %w", err)
			}
			if clen >= 0 && clen != n {
				return r, fmt.Errorf("conflicting content-length")
			}
			clen = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) {
				return r, fmt.Errorf("unsupported transfer-encoding %q", trunc(value))
			}
			chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			for _, tok := range bytes.Split(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				if bytes.EqualFold(tok, []byte("close")) {
					r.close = true
				} else if http10 && bytes.EqualFold(tok, []byte("keep-alive")) {
					r.close = false
				}
			}
		}
	}
	if chunked && clen >= 0 {
		return r, fmt.Errorf("both content-length and chunked")
	}
	noBody := head || r.status == 204 || r.status == 304
	switch {
	case noBody:
		r.size = bodyStart
	case chunked:
		n, err := chunkedLen(b[bodyStart:])
		if err != nil {
			return r, err
		}
		r.size = bodyStart + n
		r.body = b[bodyStart:r.size] // still chunk-framed; callers only need small bodies
	case clen >= 0:
		if len(b) < bodyStart+clen {
			return r, errIncomplete
		}
		r.size = bodyStart + clen
		r.body = b[bodyStart:r.size]
	default:
		return r, fmt.Errorf("response without content-length or chunked encoding")
	}
	return r, nil
}

// chunkedLen returns the length of a complete chunked body (with trailers) at the
// start of b, or errIncomplete.
func chunkedLen(b []byte) (int, error) {
	off := 0
	for {
		i := bytes.Index(b[off:], []byte("\r\n"))
		if i < 0 {
			if len(b)-off > 1024 {
				return 0, fmt.Errorf("chunk size line too long")
			}
			return 0, errIncomplete
		}
		sizeField := b[off : off+i]
		if j := bytes.IndexByte(sizeField, ';'); j >= 0 {
			sizeField = sizeField[:j]
		}
		size, err := parseHex(bytes.TrimRight(sizeField, " \t"))
		if err != nil {
			return 0, fmt.Errorf("chunk size: %w", err)
		}
		off += i + 2
		if size == 0 {
			// Trailer section: header lines until an empty line.
			for {
				k := bytes.Index(b[off:], []byte("\r\n"))
				if k < 0 {
					return 0, errIncomplete
				}
				off += k + 2
				if k == 0 {
					return off, nil
				}
			}
		}
		if len(b) < off+size+2 {
			return 0, errIncomplete
		}
		if b[off+size] != '\r' || b[off+size+1] != '\n' {
			return 0, fmt.Errorf("chunk not followed by CRLF")
		}
		off += size + 2
	}
}

func parseDecimal(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 12 {
		return 0, fmt.Errorf("invalid number %q", trunc(b))
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("invalid number %q", trunc(b))
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

func parseHex(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 8 {
		return 0, fmt.Errorf("invalid hex number %q", trunc(b))
	}
	n := 0
	for _, c := range b {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, fmt.Errorf("invalid hex number %q", trunc(b))
		}
		n = n<<4 | int(v)
	}
	return n, nil
}

func isToken(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte("\"(),/:;<=>?@[\\]{}"), c) >= 0 {
			return false
		}
	}
	return true
}

func trunc(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
