package http1

import "bytes"

// Request is an incrementally parsed request head (RFC 9112 §3, §5, §6).
// The zero value is ready to use with DefaultLimits; set Limits before the
// first Parse and Reset between requests on a connection.
type Request struct {
	// Limits bound the head; zero fields take DefaultLimits.
	Limits Limits
	// Names says which fields are dropped as they are read; NamesByHost, when set,
	// replaces it from the Host field on. Dropped fields are not in Headers.
	Names       NameRules
	NamesByHost NameRulesByHost
	// Headers holds the field lines, with lookups that do not allocate.
	Headers

	st requestState
}

// requestState is everything Reset clears; the field table is left as is
// because Headers.n bounds what is read, and clearing it would cost more than
// the parse of a small head.
type requestState struct {
	phase   headPhase
	lines   lineScanner
	facts   framingFacts
	headLen int

	methodEnd      int // the method starts at lines.headStart
	targetStart    int
	targetEnd      int
	target         target
	minor          int
	hostField      int // index of the Host field, -1 when absent
	expectContinue bool
	names          NameRules // the rules the next field is read with
}

// Reset readies r for the next request, keeping Limits, Names and NamesByHost.
func (r *Request) Reset() {
	r.st = requestState{}
	r.Headers.buf, r.Headers.n = nil, 0
}

// Parse parses the head at the start of buf, which holds every byte received
// so far for this request: call it again with the longer buffer (same bytes
// at the same offsets, possibly moved) after ErrNeedMore. It returns the
// length of the head; the body, if any, starts at buf[n:]. Any other error is
// a *ParseError carrying the status to answer, with n the head's length when
// the head was read whole and refused as a whole (no Host, ...), else 0.
func (r *Request) Parse(buf []byte) (n int, err error) {
	st := &r.st
	r.Headers.buf = buf
	if st.phase == phaseStart {
		st.lines.lim = r.Limits.normalized()
		st.facts.reset()
		st.hostField = -1
		st.names = r.Names
		st.phase = phaseEmptyLines
	}
	for st.phase != phaseDone {
		tooLong := errHeaderTooLarge
		if st.phase != phaseFields {
			tooLong = errRequestLineTooLong
		}
		start, end, k, ok, more := st.lines.nextLine(buf, tooLong)
		if more {
			return 0, ErrNeedMore
		}
		if !ok {
			return 0, requestError(k)
		}
		switch st.phase {
		case phaseEmptyLines:
			// RFC 9112 §2.2: a server SHOULD ignore at least one empty line
			// before the request line (clients add CRLF after a POST body).
			if start == end {
				if end+2 > st.lines.lim.MaxLineSize {
					return 0, requestError(errBadRequestLine)
				}
				st.lines.headStart = end + 2
				continue
			}
			st.phase = phaseStartLine
			fallthrough
		case phaseStartLine:
			if k, ok := r.parseRequestLine(buf, start, end); !ok {
				return 0, requestError(k)
			}
			if st.target.form == AbsoluteForm && r.NamesByHost != nil {
				st.names = r.NamesByHost.NameRulesFor(r.Host())
			}
			st.phase = phaseFields
		case phaseFields:
			if start == end {
				if k, ok := r.finishHead(); !ok {
					// Refused as a whole: its length still counts (the log's).
					return end + 2, requestError(k)
				}
				st.headLen = end + 2
				st.phase = phaseDone
				break
			}
			if k, ok := r.addField(buf, start, end); !ok {
				return 0, requestError(k)
			}
		}
	}
	return st.headLen, nil
}

// parseRequestLine checks method SP request-target SP HTTP-version
// (RFC 9112 §3), with exactly one SP between the parts.
func (r *Request) parseRequestLine(buf []byte, start, end int) (errorKind, bool) {
	st := &r.st
	line := buf[start:end]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 0 {
		return errBadRequestLine, false
	}
	method := line[:sp1]
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 {
		// "GET /path" is an HTTP/0.9 simple request.
		if isToken(method) && len(rest) > 0 && rest[0] == '/' {
			return errUnsupportedVersion, false
		}
		return errBadRequestLine, false
	}
	minor, k, ok := parseVersion(rest[sp2+1:])
	if !ok {
		return k, false
	}
	if !isToken(method) {
		return errBadMethod, false
	}
	t, ok := parseTarget(method, rest[:sp2])
	if !ok {
		return errBadTarget, false
	}
	st.methodEnd = start + sp1
	st.targetStart = start + sp1 + 1
	st.targetEnd = st.targetStart + sp2
	st.target = t
	st.minor = minor
	return 0, true
}

// parseVersion checks HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3)
// and accepts major version 1 only: 505 for others, as nginx answers.
func parseVersion(v []byte) (minor int, k errorKind, ok bool) {
	if len(v) < 6 || string(v[:5]) != "HTTP/" {
		return 0, errBadVersion, false
	}
	digits := v[5:]
	if len(digits) == 3 && isDigit(digits[0]) && digits[1] == '.' && isDigit(digits[2]) {
		if digits[0] != '1' {
			return 0, errUnsupportedVersion, false
		}
		return int(digits[2] - '0'), 0, true
	}
	// "HTTP/2", "HTTP/10.0": a well-formed but foreign version.
	dot := bytes.IndexByte(digits, '.')
	major := digits
	if dot >= 0 {
		major = digits[:dot]
		if _, ok := parseDecimal(digits[dot+1:]); !ok {
			return 0, errBadVersion, false
		}
	}
	if n, ok := parseDecimal(major); ok && n != 1 {
		return 0, errUnsupportedVersion, false
	}
	return 0, errBadVersion, false
}

// addField validates and stores one field line and notes what it says about
// framing and the connection.
func (r *Request) addField(buf []byte, start, end int) (errorKind, bool) {
	st := &r.st
	f, k, ok := parseFieldLine(buf, start, end)
	if !ok {
		return k, false
	}
	if st.names.Drops(buf[f.nameStart:f.nameEnd]) {
		return 0, true // nginx: "client sent invalid header line", and goes on
	}
	h := &r.Headers
	if h.n >= st.lines.lim.MaxHeaders {
		return errTooManyFields, false
	}
	index := h.n
	h.fields[index] = f
	h.n++
	value := buf[f.valueStart:f.valueEnd]
	switch kind := classifyField(buf[f.nameStart:f.nameEnd]); kind {
	case fieldOther:
	case fieldHost:
		// RFC 9112 §3.2: one Host, with a valid value.
		if st.hostField >= 0 {
			return errDuplicateHost, false
		}
		if !validHostPort(value, false) {
			return errBadHost, false
		}
		st.hostField = index
		if r.NamesByHost != nil && st.target.form != AbsoluteForm {
			st.names = r.NamesByHost.NameRulesFor(value)
		}
	case fieldExpect:
		// RFC 9110 §10.1.1: ignore 100-continue from an HTTP/1.0 client.
		if st.minor >= 1 && EqualFold(value, "100-continue") {
			st.expectContinue = true
		}
	default:
		return st.facts.note(kind, index, value)
	}
	return 0, true
}

// finishHead applies the checks that need the whole head, in nginx's order
// (ngx_http_process_request_header).
func (r *Request) finishHead() (errorKind, bool) {
	st := &r.st
	if st.hostField < 0 && st.minor >= 1 {
		return errMissingHost, false // RFC 9112 §3.2
	}
	if te := st.facts.transferEncoding; te >= 0 {
		if st.minor == 0 {
			return errTransferEncodingHTTP10, false // RFC 9112 §6.1
		}
		if st.facts.contentLength >= 0 {
			return errContentLengthAndChunked, false // RFC 9112 §6.1, §6.3
		}
		if k, ok := transferCoding(r.Value(te)); !ok {
			return k, false
		}
	}
	// nginx refuses CONNECT and TRACE once the head is read.
	if m := r.Method(); string(m) == "CONNECT" || string(m) == "TRACE" {
		return errMethodNotAllowed, false
	}
	return 0, true
}

// Method returns the request method, case preserved (methods are
// case-sensitive, RFC 9110 §9.1).
func (r *Request) Method() []byte {
	return r.Headers.buf[r.st.lines.headStart:r.st.methodEnd:r.st.methodEnd]
}

// Target returns the request-target as received.
func (r *Request) Target() []byte { return r.targetSlice(0, r.st.targetEnd-r.st.targetStart) }

// TargetForm returns the form of the request-target.
func (r *Request) TargetForm() TargetForm { return r.st.target.form }

// Path returns the path of an origin- or absolute-form target, still
// percent-encoded. It is empty for "http://host" (meaning "/") and for the
// authority and asterisk forms.
func (r *Request) Path() []byte {
	t := &r.st.target
	if t.form == AuthorityForm || t.form == AsteriskForm {
		return nil
	}
	return r.targetSlice(t.pathStart, t.pathEnd)
}

// Query returns the query after '?' and whether the target has a '?'.
func (r *Request) Query() ([]byte, bool) {
	t := &r.st.target
	if t.queryStart < 0 {
		return nil, false
	}
	return r.targetSlice(t.queryStart, t.queryEnd), true
}

// targetSlice returns target bytes [from,to), offsets relative to its start.
func (r *Request) targetSlice(from, to int) []byte {
	base := r.st.targetStart
	return r.Headers.buf[base+from : base+to : base+to]
}

// ProtoMinor returns the minor HTTP version (the major is always 1).
func (r *Request) ProtoMinor() int { return r.st.minor }

// Host returns the effective host[:port]: the authority of an absolute- or
// authority-form target, which overrides the Host field (RFC 9112 §3.2.2),
// else the Host field value; empty for an HTTP/1.0 request without either.
func (r *Request) Host() []byte {
	t := &r.st.target
	if t.form == AbsoluteForm || t.form == AuthorityForm {
		return r.targetSlice(t.hostStart, t.hostEnd)
	}
	if r.st.hostField >= 0 {
		return r.Value(r.st.hostField)
	}
	return nil
}

// ContentLength returns the Content-Length value, or -1 without one.
func (r *Request) ContentLength() int64 { return r.st.facts.contentLength }

// Chunked reports whether the body uses the chunked transfer coding.
func (r *Request) Chunked() bool { return r.st.facts.transferEncoding >= 0 }

// Framing says how the request body is delimited (RFC 9112 §6.3): a request
// without Content-Length or chunked coding has no body.
func (r *Request) Framing() BodyFraming {
	switch {
	case r.Chunked():
		return BodyChunked
	case r.st.facts.contentLength > 0:
		return BodyContentLength
	}
	return BodyNone
}

// KeepAlive reports whether the connection may carry another request
// (RFC 9112 §9.3).
func (r *Request) KeepAlive() bool { return r.st.facts.keepAlive(r.st.minor) }

// ConnectionClose reports whether a Connection field lists "close".
func (r *Request) ConnectionClose() bool { return r.st.facts.connClose }

// Upgrade reports an HTTP/1.1 upgrade request: an Upgrade field and
// "upgrade" among the Connection options (RFC 9110 §7.8).
func (r *Request) Upgrade() bool {
	f := &r.st.facts
	return r.st.minor >= 1 && f.upgrade && f.connUpgrade
}

// ExpectContinue reports "Expect: 100-continue" on an HTTP/1.1 request.
func (r *Request) ExpectContinue() bool { return r.st.expectContinue }

// Done reports whether Parse has seen the whole head.
func (r *Request) Done() bool { return r.st.phase == phaseDone }
