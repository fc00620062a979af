package http1

// Response is an incrementally parsed upstream response head (RFC 9112 §4,
// §5, §6). Every error it returns carries status 502. Set HeadRequest (and
// Limits) before the first Parse; Reset between responses.
type Response struct {
	// Limits bound the head; zero fields take DefaultLimits.
	Limits Limits
	// HeadRequest says the response answers a HEAD request, so it has no
	// body whatever its fields say (RFC 9112 §6.3 item 1).
	HeadRequest bool
	// Headers holds the field lines, with lookups that do not allocate.
	Headers

	st responseState
}

type responseState struct {
	phase       headPhase
	lines       lineScanner
	facts       framingFacts
	headLen     int
	minor       int
	status      int
	reasonStart int
	reasonEnd   int
	framing     BodyFraming
}

// Reset readies r for the next response, keeping Limits; HeadRequest is
// cleared.
func (r *Response) Reset() {
	r.st = responseState{}
	r.HeadRequest = false
	r.Headers.buf, r.Headers.n = nil, 0
}

// Parse parses the response head at the start of buf, incrementally like
// Request.Parse. After an interim (1xx other than 101) response, Reset and
// parse the next head from buf[n:].
func (r *Response) Parse(buf []byte) (n int, err error) {
	st := &r.st
	r.Headers.buf = buf
	if st.phase == phaseStart {
		st.lines.lim = r.Limits.normalized()
		st.facts.reset()
		st.phase = phaseStartLine
	}
	for st.phase != phaseDone {
		start, end, k, ok, more := st.lines.nextLine(buf, errHeaderTooLarge)
		if more {
			return 0, ErrNeedMore
		}
		if !ok {
			return 0, upstreamError(k)
		}
		if st.phase == phaseStartLine {
			if k, ok := r.parseStatusLine(buf, start, end); !ok {
				return 0, upstreamError(k)
			}
			st.phase = phaseFields
			continue
		}
		if start == end {
			if k, ok := r.finishHead(); !ok {
				return 0, upstreamError(k)
			}
			st.headLen = end + 2
			st.phase = phaseDone
			break
		}
		if k, ok := r.addField(buf, start, end); !ok {
			return 0, upstreamError(k)
		}
	}
	return st.headLen, nil
}

// parseStatusLine checks HTTP-version SP 3DIGIT SP [reason] (RFC 9112 §4).
// The SP before an empty reason may be missing, as net/http and nginx allow.
func (r *Response) parseStatusLine(buf []byte, start, end int) (errorKind, bool) {
	st := &r.st
	line := buf[start:end]
	if len(line) < 12 || line[8] != ' ' {
		return errBadStatusLine, false
	}
	minor, _, ok := parseVersion(line[:8])
	if !ok {
		return errBadStatusLine, false
	}
	code := line[9:12]
	if !isDigit(code[0]) || !isDigit(code[1]) || !isDigit(code[2]) {
		return errBadStatusLine, false
	}
	status := int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	if status < 100 || status > 599 {
		return errBadStatusLine, false
	}
	reason := line[12:]
	if len(reason) > 0 {
		if reason[0] != ' ' {
			return errBadStatusLine, false
		}
		reason = reason[1:]
		if !validFieldValue(reason) {
			return errBadStatusLine, false
		}
	}
	st.minor = minor
	st.status = status
	st.reasonStart = end - len(reason)
	st.reasonEnd = end
	return 0, true
}

func (r *Response) addField(buf []byte, start, end int) (errorKind, bool) {
	st := &r.st
	f, k, ok := parseFieldLine(buf, start, end)
	if !ok {
		return k, false
	}
	h := &r.Headers
	if h.n >= st.lines.lim.MaxHeaders {
		return errTooManyFields, false
	}
	index := h.n
	h.fields[index] = f
	h.n++
	kind := classifyField(buf[f.nameStart:f.nameEnd])
	if kind == fieldOther || kind == fieldHost || kind == fieldExpect {
		return 0, true
	}
	return st.facts.note(kind, index, buf[f.valueStart:f.valueEnd])
}

// finishHead decides the body framing (RFC 9112 §6.3). Like nginx's upstream
// module, it refuses a reply with both Content-Length and Transfer-Encoding
// or with a coding other than chunked, instead of reading until close.
func (r *Response) finishHead() (errorKind, bool) {
	st := &r.st
	f := &st.facts
	if te := f.transferEncoding; te >= 0 {
		if st.minor == 0 {
			// RFC 9112 §6.1: HTTP/1.0 with Transfer-Encoding is faulty framing.
			return errTransferEncodingHTTP10, false
		}
		if f.contentLength >= 0 {
			return errContentLengthAndChunked, false
		}
		if k, ok := transferCoding(r.Value(te)); !ok {
			return k, false
		}
	}
	switch {
	case r.HeadRequest || st.status < 200 || st.status == 204 || st.status == 304:
		st.framing = BodyNone
	case f.transferEncoding >= 0:
		st.framing = BodyChunked
	case f.contentLength == 0:
		st.framing = BodyNone
	case f.contentLength > 0:
		st.framing = BodyContentLength
	default:
		st.framing = BodyUntilClose
	}
	return 0, true
}

// StatusCode returns the three-digit status code (100-599).
func (r *Response) StatusCode() int { return r.st.status }

// Reason returns the reason phrase, possibly empty.
func (r *Response) Reason() []byte {
	return r.Headers.buf[r.st.reasonStart:r.st.reasonEnd:r.st.reasonEnd]
}

// ProtoMinor returns the minor HTTP version (the major is always 1).
func (r *Response) ProtoMinor() int { return r.st.minor }

// Interim reports a 1xx response other than 101: the final response follows
// on the same connection (RFC 9110 §15.2).
func (r *Response) Interim() bool { return r.st.status < 200 && r.st.status != 101 }

// SwitchingProtocols reports 101: after the head the connection carries the
// upgraded protocol in both directions.
func (r *Response) SwitchingProtocols() bool { return r.st.status == 101 }

// Framing says how the body after the head is delimited.
func (r *Response) Framing() BodyFraming { return r.st.framing }

// ContentLength returns the Content-Length value, or -1 without one. It does
// not imply a body: see Framing.
func (r *Response) ContentLength() int64 { return r.st.facts.contentLength }

// Chunked reports whether the body uses the chunked transfer coding.
func (r *Response) Chunked() bool { return r.st.framing == BodyChunked }

// KeepAlive reports whether the connection can carry another request after
// this response's body (RFC 9112 §9.3); never when the body runs until close.
func (r *Response) KeepAlive() bool {
	return r.st.framing != BodyUntilClose && r.st.facts.keepAlive(r.st.minor)
}

// Done reports whether Parse has seen the whole head.
func (r *Response) Done() bool { return r.st.phase == phaseDone }
