// Package http1 parses and frames HTTP/1.1 messages for the proxy's data path
// (RFC 9112).
//
// The parsers are strict, incremental and allocation-free. The caller owns the
// buffer: it appends bytes as they arrive and hands the whole buffer to Parse
// again; the parser resumes where it stopped and records offsets into the
// buffer instead of copying. Accessors return subslices of the buffer last
// given to Parse, so they stay valid as long as the caller keeps those bytes.
//
// Errors carry the status nginx would answer (see ParseError). Request heads
// get 400, 414, 501, 505 or 405; a bad upstream reply gets 502.
//
// Where the rules are a choice, the parser is stricter than nginx, net/http and
// fasthttp, never more lenient: anything it accepts, net/http and fasthttp
// accept too, and they agree on where the body starts and how it is framed.
// The fuzz targets check this differentially.
package http1
