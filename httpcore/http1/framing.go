package http1

// BodyFraming says how the body after a head is delimited (RFC 9112 §6.3).
type BodyFraming uint8

const (
	// BodyNone: no body follows; the next message starts right after the head.
	BodyNone BodyFraming = iota
	// BodyContentLength: exactly ContentLength bytes follow.
	BodyContentLength
	// BodyChunked: the chunked transfer coding follows (see ChunkedDecoder).
	BodyChunked
	// BodyUntilClose: the body runs until the upstream closes the connection.
	BodyUntilClose
)

func (f BodyFraming) String() string {
	switch f {
	case BodyNone:
		return "none"
	case BodyContentLength:
		return "content-length"
	case BodyChunked:
		return "chunked"
	case BodyUntilClose:
		return "until-close"
	}
	return "unknown"
}

// LengthBody counts down a Content-Length body (RFC 9112 §6.2).
type LengthBody struct {
	remaining int64
}

// NewLengthBody starts counting a body of n bytes.
func NewLengthBody(n int64) LengthBody { return LengthBody{remaining: n} }

// Take returns the prefix of p that belongs to the body and counts it; the
// rest of p, if any, belongs to the next message.
func (b *LengthBody) Take(p []byte) []byte {
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	b.remaining -= int64(len(p))
	return p
}

// Remaining returns the number of body bytes still expected.
func (b *LengthBody) Remaining() int64 { return b.remaining }

// Done reports whether the whole body has been taken.
func (b *LengthBody) Done() bool { return b.remaining == 0 }
