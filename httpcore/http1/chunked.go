package http1

// DefaultMaxTrailerSize bounds a chunked body's trailer section when
// ChunkedDecoder.MaxTrailerSize is zero.
const DefaultMaxTrailerSize = 8 << 10

// maxChunkLine bounds a chunk-size line with its extensions; net/http uses
// the same 4096 bytes.
const maxChunkLine = 4096

// maxChunkSizeDigits matches fasthttp, which refuses a 16th hex digit
// (net/http a 17th), leading zeros included.
const maxChunkSizeDigits = 15

type chunkState uint8

const (
	chunkSizeFirst     chunkState = iota // the first HEXDIG of a chunk-size
	chunkSize                            // more HEXDIG, ';' or CR
	chunkExtNameBWS                      // after ';': BWS then ext-name
	chunkExtName                         // in ext-name
	chunkExtNameBWS2                     // BWS after ext-name: '=' or ';' follows
	chunkExtValueBWS                     // after '=': BWS then token or quoted-string
	chunkExtToken                        // in a token ext-val
	chunkExtQuoted                       // in a quoted-string ext-val
	chunkExtQuotedPair                   // after '\' in a quoted-string
	chunkExtAfterQuote                   // after the closing DQUOTE
	chunkExtValueBWS2                    // BWS after an ext-val: only ';' may follow
	chunkSizeLF                          // CR seen at the end of the size line
	chunkData                            // chunk-data
	chunkDataCR                          // CRLF after chunk-data
	chunkDataLF
	trailerLineStart // a trailer field line or the final CRLF
	trailerName
	trailerValue
	trailerLF
	trailerEndLF // CR of the final empty line seen
	chunkDone
)

// ChunkedDecoder decodes the chunked transfer coding (RFC 9112 §7.1)
// incrementally: framing is consumed a byte at a time, so a chunk-size line
// or trailer may be split anywhere, and chunk data is handed back as spans of
// the input without copying. Extensions are validated and skipped; trailer
// fields are validated and dropped. The zero value is ready to use.
type ChunkedDecoder struct {
	// MaxTrailerSize bounds the trailer section; zero means
	// DefaultMaxTrailerSize.
	MaxTrailerSize int
	// MaxOverhead bounds the bytes of chunk extensions and of the trailer
	// section over the whole body, framing that carries no data: without it
	// a body under a data limit can be any size. Zero means no such bound
	// (each line stays bounded).
	MaxOverhead int
	// Upstream makes errors carry 502 instead of 400.
	Upstream bool

	state      chunkState
	digits     int
	size       int64 // the chunk-size being read, then data left in the chunk
	lineLen    int   // bytes of the current chunk-size line
	trailerLen int
	extLen     int // extension bytes of the chunk-size lines so far
	// The start of the current trailer field name, lower-cased, to refuse
	// the fields a trailer must not carry.
	nameLen int
	name    [maxForbiddenTrailerName]byte
}

// Reset readies d for the next body, keeping its settings.
func (d *ChunkedDecoder) Reset() {
	*d = ChunkedDecoder{MaxTrailerSize: d.MaxTrailerSize, MaxOverhead: d.MaxOverhead, Upstream: d.Upstream}
}

// Done reports whether the last chunk and trailer section have been consumed.
func (d *ChunkedDecoder) Done() bool { return d.state == chunkDone }

// Decode consumes framing from the start of p until it reaches chunk data,
// the end of the body or the end of p. It returns the number of bytes
// consumed and the chunk data among them (a subslice of p, possibly empty).
// Call it again with p[n:] while n < len(p) and !Done(); once Done, p[n:]
// belongs to the next message.
func (d *ChunkedDecoder) Decode(p []byte) (n int, data []byte, err error) {
	for n < len(p) {
		if d.state == chunkData {
			take := len(p) - n
			if int64(take) > d.size {
				take = int(d.size)
			}
			data = p[n : n+take : n+take]
			n += take
			d.size -= int64(take)
			if d.size == 0 {
				d.state = chunkDataCR
			}
			return n, data, nil
		}
		if d.state == chunkDone {
			return n, nil, nil
		}
		if k, ok := d.step(p[n]); !ok {
			return n, nil, d.error(k)
		}
		n++
	}
	return n, nil, nil
}

func (d *ChunkedDecoder) error(k errorKind) error {
	if d.Upstream {
		return upstreamError(k)
	}
	return requestError(k)
}

// step advances the framing state machine by one byte.
func (d *ChunkedDecoder) step(c byte) (errorKind, bool) {
	if d.state <= chunkSizeLF {
		d.lineLen++
		if d.lineLen > maxChunkLine {
			return errChunkLineTooLong, false
		}
	}
	switch d.state {
	case chunkSizeFirst, chunkSize:
		if v, ok := hexValue(c); ok {
			d.digits++
			if d.digits > maxChunkSizeDigits || d.size > (1<<63-1)>>4 {
				return errChunkSizeOverflow, false
			}
			d.size = d.size<<4 | int64(v)
			d.state = chunkSize
			return 0, true
		}
		if d.state == chunkSizeFirst {
			return errBadChunkSize, false
		}
		switch {
		case c == '\r':
			d.state = chunkSizeLF
		case c == ';':
			// The grammar allows BWS before ';' (RFC 9112 §7.1.1), but
			// net/http and fasthttp refuse it, and net/http also refuses
			// whitespace before the CRLF: no whitespace after the size.
			d.state = chunkExtNameBWS
		default:
			return errBadChunkSize, false
		}
	case chunkExtValueBWS2:
		switch {
		case isOWS(c):
		case c == ';':
			d.state = chunkExtNameBWS
		default:
			return errBadChunkExtension, false
		}
	case chunkExtNameBWS:
		switch {
		case isOWS(c):
		case byteClass[c]&classToken != 0:
			d.state = chunkExtName
		default:
			return errBadChunkExtension, false
		}
	case chunkExtName:
		switch {
		case byteClass[c]&classToken != 0:
		case c == '=':
			d.state = chunkExtValueBWS
		case c == ';':
			d.state = chunkExtNameBWS
		case c == '\r':
			d.state = chunkSizeLF
		case isOWS(c):
			d.state = chunkExtNameBWS2
		default:
			return errBadChunkExtension, false
		}
	case chunkExtNameBWS2:
		switch {
		case isOWS(c):
		case c == '=':
			d.state = chunkExtValueBWS
		case c == ';':
			d.state = chunkExtNameBWS
		default:
			return errBadChunkExtension, false
		}
	case chunkExtValueBWS:
		switch {
		case isOWS(c):
		case c == '"':
			d.state = chunkExtQuoted
		case byteClass[c]&classToken != 0:
			d.state = chunkExtToken
		default:
			return errBadChunkExtension, false
		}
	case chunkExtToken:
		switch {
		case byteClass[c]&classToken != 0:
		case c == ';':
			d.state = chunkExtNameBWS
		case c == '\r':
			d.state = chunkSizeLF
		case isOWS(c):
			d.state = chunkExtValueBWS2
		default:
			return errBadChunkExtension, false
		}
	case chunkExtQuoted:
		// qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
		switch {
		case c == '"':
			d.state = chunkExtAfterQuote
		case c == '\\':
			d.state = chunkExtQuotedPair
		case byteClass[c]&classFieldValue == 0:
			return errBadChunkExtension, false
		}
	case chunkExtQuotedPair:
		if byteClass[c]&classFieldValue == 0 {
			return errBadChunkExtension, false
		}
		d.state = chunkExtQuoted
	case chunkExtAfterQuote:
		switch {
		case c == ';':
			d.state = chunkExtNameBWS
		case c == '\r':
			d.state = chunkSizeLF
		case isOWS(c):
			d.state = chunkExtValueBWS2
		default:
			return errBadChunkExtension, false
		}
	case chunkSizeLF:
		if c != '\n' {
			return errBadLineEnd, false
		}
		// What the line holds besides the size and its CRLF is extensions.
		d.extLen += d.lineLen - d.digits - 2
		if d.MaxOverhead > 0 && d.extLen > d.MaxOverhead {
			return errChunkOverhead, false
		}
		d.lineLen, d.digits = 0, 0
		if d.size == 0 {
			d.state = trailerLineStart // last-chunk (RFC 9112 §7.1)
		} else {
			d.state = chunkData
		}
	case chunkDataCR:
		if c != '\r' {
			return errBadChunkEnd, false
		}
		d.state = chunkDataLF
	case chunkDataLF:
		if c != '\n' {
			return errBadChunkEnd, false
		}
		d.state = chunkSizeFirst
	default:
		return d.stepTrailer(c)
	}
	return 0, true
}

// stepTrailer advances through the trailer section (RFC 9112 §7.1.2), which
// follows the field-line rules of the head: no obs-fold, no whitespace
// before the colon, no bare CR or LF.
func (d *ChunkedDecoder) stepTrailer(c byte) (errorKind, bool) {
	d.trailerLen++
	max := d.MaxTrailerSize
	if max <= 0 {
		max = DefaultMaxTrailerSize
	}
	if d.trailerLen > max {
		return errTrailerTooLarge, false
	}
	switch d.state {
	case trailerLineStart:
		switch {
		case c == '\r':
			d.state = trailerEndLF
		case byteClass[c]&classToken != 0:
			d.state = trailerName
			d.name[0], d.nameLen = lower(c), 1
		default:
			return errBadTrailer, false
		}
	case trailerName:
		switch {
		case byteClass[c]&classToken != 0:
			if d.nameLen < len(d.name) {
				d.name[d.nameLen] = lower(c)
			}
			d.nameLen++
		case c == ':':
			if forbiddenTrailer(d.name[:min(d.nameLen, len(d.name))], d.nameLen) {
				return errForbiddenTrailer, false
			}
			d.state = trailerValue
		default:
			return errBadTrailer, false
		}
	case trailerValue:
		switch {
		case c == '\r':
			d.state = trailerLF
		case byteClass[c]&classFieldValue == 0:
			return errBadTrailer, false
		}
	case trailerLF:
		if c != '\n' {
			return errBadTrailer, false
		}
		d.state = trailerLineStart
	case trailerEndLF:
		if c != '\n' {
			return errBadTrailer, false
		}
		d.state = chunkDone
	}
	// The CRLF that ends the body is not part of the trailer section.
	if d.MaxOverhead > 0 && d.state != trailerEndLF && d.state != chunkDone && d.extLen+d.trailerLen > d.MaxOverhead {
		return errChunkOverhead, false
	}
	return 0, true
}

func hexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// maxForbiddenTrailerName is the longest name forbiddenTrailer knows.
const maxForbiddenTrailerName = len("proxy-authorization")

// forbiddenTrailer reports a field that must not be sent in a trailer
// (RFC 9110 §6.5.1: framing, routing, authentication, request modifiers,
// response control, content processing), given the first bytes of its
// lower-cased name and the name's full length. The list is fasthttp's, which
// refuses a message carrying any of them.
func forbiddenTrailer(prefix []byte, fullLen int) bool {
	if hasPrefix(prefix, "x-forwarded") || hasPrefix(prefix, "x-real-ip") {
		return true
	}
	if fullLen != len(prefix) {
		return false
	}
	switch string(prefix) {
	case "authorization", "content-encoding", "content-length", "content-type",
		"content-range", "connection", "cookie", "expect", "host", "keep-alive",
		"location", "max-forwards", "proxy-connection", "proxy-authenticate",
		"proxy-authorization", "range", "set-cookie", "te", "trailer",
		"transfer-encoding", "www-authenticate":
		return true
	}
	return false
}

func hasPrefix(s []byte, prefix string) bool {
	return len(s) >= len(prefix) && string(s[:len(prefix)]) == prefix
}
