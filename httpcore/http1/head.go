package http1

import "bytes"

// headPhase is where a head parser stands between calls.
type headPhase uint8

const (
	phaseStart      headPhase = iota // nothing parsed yet; limits not applied
	phaseEmptyLines                  // skipping empty lines before a request line
	phaseStartLine                   // waiting for the start line
	phaseFields                      // waiting for field lines or the empty line
	phaseDone                        // head complete
)

// lineScanner cuts a head into CRLF-terminated lines across calls without
// copying: it remembers where the current line starts and how far it has
// looked for its LF, so each byte is searched once (RFC 9112 §2.2).
type lineScanner struct {
	lim       Limits
	headStart int // first byte of the start line; leading empty lines excluded
	lineStart int
	scanFrom  int
}

// nextLine returns the next complete line [start,end) without its CRLF.
// tooLong is the error kind for a line over MaxLineSize (414 for a request
// line, 400 otherwise). The size checks come first so that a head fed whole
// and one fed byte by byte fail the same way.
func (s *lineScanner) nextLine(buf []byte, tooLong errorKind) (start, end int, k errorKind, ok bool, more bool) {
	i := bytes.IndexByte(buf[s.scanFrom:], '\n')
	if i < 0 {
		if len(buf)-s.lineStart >= s.lim.MaxLineSize {
			return 0, 0, tooLong, false, false
		}
		if len(buf)-s.headStart > s.lim.MaxHeadSize {
			return 0, 0, errHeaderTooLarge, false, false
		}
		s.scanFrom = len(buf)
		return 0, 0, 0, false, true
	}
	lf := s.scanFrom + i
	if lf+1-s.lineStart > s.lim.MaxLineSize {
		return 0, 0, tooLong, false, false
	}
	if lf+1-s.headStart > s.lim.MaxHeadSize {
		return 0, 0, errHeaderTooLarge, false, false
	}
	// A bare LF is a line end for nginx and net/http but not for fasthttp;
	// accepting it where one peer does not is how requests get smuggled.
	if lf == s.lineStart || buf[lf-1] != '\r' {
		return 0, 0, errBareLF, false, false
	}
	start, end = s.lineStart, lf-1
	s.lineStart, s.scanFrom = lf+1, lf+1
	return start, end, 0, true, false
}

// parseFieldLine checks one field line (RFC 9112 §5, RFC 9110 §5.5) and
// returns its offsets with the value's surrounding whitespace trimmed.
func parseFieldLine(buf []byte, start, end int) (field, errorKind, bool) {
	line := buf[start:end]
	if isOWS(line[0]) {
		// obs-fold, or whitespace between the start line and the first
		// field (RFC 9112 §5.2, §2.2): rejected either way.
		return field{}, errObsFold, false
	}
	colon := 0
	for colon < len(line) && byteClass[line[colon]]&classToken != 0 {
		colon++
	}
	if colon == len(line) || line[colon] != ':' {
		if colon < len(line) && isOWS(line[colon]) {
			return field{}, errSpaceBeforeColon, false // RFC 9112 §5.1
		}
		return field{}, errBadFieldName, false
	}
	if colon == 0 {
		return field{}, errEmptyFieldName, false
	}
	vs, ve := colon+1, len(line)
	for vs < ve && isOWS(line[vs]) {
		vs++
	}
	for ve > vs && isOWS(line[ve-1]) {
		ve--
	}
	if !validFieldValue(line[vs:ve]) {
		return field{}, errBadFieldValue, false
	}
	return field{
		nameStart: uint32(start), nameEnd: uint32(start + colon),
		valueStart: uint32(start + vs), valueEnd: uint32(start + ve),
	}, 0, true
}

// knownField names the fields that decide framing and connection handling.
type knownField uint8

const (
	fieldOther knownField = iota
	fieldHost
	fieldContentLength
	fieldTransferEncoding
	fieldConnection
	fieldUpgrade
	fieldExpect
)

func classifyField(name []byte) knownField {
	switch len(name) {
	case 4:
		if IsField(name, "Host") {
			return fieldHost
		}
	case 6:
		if IsField(name, "Expect") {
			return fieldExpect
		}
	case 7:
		if IsField(name, "Upgrade") {
			return fieldUpgrade
		}
	case 10:
		if IsField(name, "Connection") {
			return fieldConnection
		}
	case 14:
		if IsField(name, "Content-Length") {
			return fieldContentLength
		}
	case 17:
		if IsField(name, "Transfer-Encoding") {
			return fieldTransferEncoding
		}
	}
	return fieldOther
}

// framingFacts gathers what the fields say about body and connection.
type framingFacts struct {
	contentLength    int64 // -1 when absent
	transferEncoding int   // field index, -1 when absent
	connClose        bool
	connKeepAlive    bool
	connUpgrade      bool
	upgrade          bool
}

func (f *framingFacts) reset() {
	*f = framingFacts{contentLength: -1, transferEncoding: -1}
}

// note records a framing field. Repeated Content-Length or
// Transfer-Encoding is refused outright: nginx and fasthttp refuse both, and
// merging lists is where parsers disagree (RFC 9112 §6.3 items 3-5).
func (f *framingFacts) note(kind knownField, index int, value []byte) (errorKind, bool) {
	switch kind {
	case fieldContentLength:
		if f.contentLength >= 0 {
			return errDuplicateContentLength, false
		}
		n, ok := parseDecimal(value)
		if !ok {
			return errBadContentLength, false
		}
		f.contentLength = n
	case fieldTransferEncoding:
		if f.transferEncoding >= 0 {
			return errDuplicateTransferEncoding, false
		}
		f.transferEncoding = index
	case fieldConnection:
		for l := (listIter{rest: value}); ; {
			opt, ok := l.next()
			if !ok {
				break
			}
			switch {
			case EqualFold(opt, "close"):
				f.connClose = true
			case EqualFold(opt, "keep-alive"):
				f.connKeepAlive = true
			case EqualFold(opt, "upgrade"):
				f.connUpgrade = true
			}
		}
	case fieldUpgrade:
		f.upgrade = true
	}
	return 0, true
}

// keepAlive applies RFC 9112 §9.3: HTTP/1.1 persists unless "close";
// HTTP/1.0 persists only with "keep-alive".
func (f *framingFacts) keepAlive(minor int) bool {
	if f.connClose {
		return false
	}
	return minor >= 1 || f.connKeepAlive
}

// transferCoding classifies a Transfer-Encoding value: exactly "chunked" is
// the only coding accepted (as nginx); chunked anywhere but last is a framing
// error (RFC 9112 §6.3 item 4); anything else is a coding we do not implement.
func transferCoding(value []byte) (errorKind, bool) {
	if EqualFold(value, "chunked") {
		return 0, true
	}
	for l := (listIter{rest: value}); ; {
		coding, ok := l.next()
		if !ok {
			return errUnknownTransferEncoding, false
		}
		if EqualFold(coding, "chunked") && !l.done {
			return errChunkedNotFinal, false
		}
	}
}
