// Package http1 parses and frames HTTP/1.1 messages (RFC 9112): the HTTP core's
// client requests and the proxy's upstream responses.
//
// The parsers are strict, incremental and allocation-free. The caller owns the
// buffer: it appends bytes as they arrive and hands the whole buffer to Parse
// again; the parser resumes where it stopped (each byte is searched once) and
// records offsets instead of copying. Accessors return subslices of the buffer
// last given to Parse, valid as long as the caller keeps those bytes.
//
//	var req http1.Request
//	n, err := req.Parse(buf) // ErrNeedMore: read more, append, call again
//	// err is a *ParseError: answer err.Status (400, 414, 501, 505, 405)
//	// else the body starts at buf[n:], framed as req.Framing() says
//
// Response parses upstream replies (errors carry 502), ChunkedDecoder and
// LengthBody delimit bodies, and AppendChunk and friends encode chunks.
//
// Where the rules leave a choice, the parser is stricter than nginx, net/http
// and fasthttp, never more lenient: whatever it accepts, net/http and
// fasthttp accept too, agreeing on where the head ends and how the body is
// framed (the fuzz targets check this). The deliberate differences:
//   - A bare LF never ends a line (nginx and net/http accept it, fasthttp
//     does not); a CR must be followed by LF.
//   - Repeated Content-Length is refused even with identical values (as
//     nginx and fasthttp; net/http merges identical ones), and so is a
//     repeated Transfer-Encoding field.
//   - Transfer-Encoding must be exactly "chunked": other codings get 501 (as
//     nginx), chunked not last gets 400 (RFC 9112 §6.3), and with
//     Content-Length or in HTTP/1.0 it is 400; an upstream reply doing any of
//     this gets 502 where net/http would fall back to reading until close.
//   - obs-fold, whitespace before the colon, control characters, more than
//     one SP between request-line parts, a fragment in the target, and a Host
//     that is not a valid uri-host[:port] are all 400.
//   - Empty lines before a request line are skipped (RFC 9112 §2.2, as nginx
//     and fasthttp; net/http refuses them).
//   - CONNECT and TRACE are answered 405 after the head, as nginx does.
//   - Chunk sizes take at most 15 hex digits and no whitespace after them;
//     extensions are checked against the RFC 9112 §7.1.1 grammar; trailer
//     fields that RFC 9110 §6.5.1 keeps out of trailers are refused, as
//     fasthttp refuses them.
package http1
