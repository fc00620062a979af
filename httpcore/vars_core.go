package httpcore

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// coreVariables are the core's variables: nginx's ngx_http_core_variables that
// numaproxy has, and its own $numa_node, $worker_cpu and $incoming_cpu.
var coreVariables = []Variable{
	{Name: "host", Get: func(dst []byte, r *Request, _ string) []byte {
		// nginx: the Host header without port, lower-cased, else the server name.
		if h := r.req.Host(); len(h) > 0 {
			return AppendLowerHost(dst, h)
		}
		return append(dst, r.serverName()...)
	}},
	{Name: "http_", Prefix: true, Param: func(rest string) string {
		// $http_user_agent names User-Agent: underscores stand for dashes.
		return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
	}, Get: func(dst []byte, r *Request, name string) []byte { return r.appendHTTPVar(dst, name) },
		Found: func(r *Request, name string) bool { return r.httpVarFound(name) }},
	{Name: "cookie_", Prefix: true, Get: func(dst []byte, r *Request, name string) []byte {
		v, _ := CookieValue(&r.req.Headers, name)
		return append(dst, v...)
	}, Found: func(r *Request, name string) bool {
		_, found := CookieValue(&r.req.Headers, name)
		return found
	}},
	{Name: "arg_", Prefix: true, Get: func(dst []byte, r *Request, name string) []byte {
		q, _ := r.Args()
		v, _ := ArgValue(q, name)
		return append(dst, v...)
	}, Found: func(r *Request, name string) bool {
		q, _ := r.Args()
		_, found := ArgValue(q, name)
		return found
	}},
	{Name: "remote_addr", Get: func(dst []byte, r *Request, _ string) []byte { return AppendAddr(dst, r.RemoteAddr()) }},
	{Name: "binary_remote_addr", Get: func(dst []byte, r *Request, _ string) []byte {
		// nginx: the address in network order, 4 bytes for IPv4, 16 for IPv6.
		a := r.RemoteAddr().Addr().Unmap()
		if a.Is4() {
			b := a.As4()
			return append(dst, b[:]...)
		}
		if a.Is6() {
			b := a.As16()
			return append(dst, b[:]...)
		}
		return dst
	}},
	{Name: "limit_rate", Get: func(dst []byte, r *Request, _ string) []byte {
		// nginx: the response's rate once set, else limit_rate's value.
		n := r.limitRate
		if !r.limitRateSet {
			n = max(r.evalSize(r.c.lcf.LimitRate), 0)
		}
		return strconv.AppendInt(dst, n, 10)
	}, Set: func(r *Request, v []byte) {
		// nginx's "set $limit_rate": the response's rate, as SetLimitRate.
		if n := parseSize(v); n >= 0 {
			r.SetLimitRate(n)
		} else {
			r.c.w.log.Error("invalid size \""+string(v)+"\"", "client", r.RemoteAddr().String())
		}
	}},
	{Name: "remote_port", Get: func(dst []byte, r *Request, _ string) []byte { return AppendPort(dst, r.RemoteAddr()) }},
	{Name: "server_addr", Get: func(dst []byte, r *Request, _ string) []byte { return r.c.localAddr().Addr().AppendTo(dst) }},
	{Name: "server_port", Get: func(dst []byte, r *Request, _ string) []byte {
		return strconv.AppendUint(dst, uint64(r.c.localAddr().Port()), 10)
	}},
	{Name: "server_name", EmptyFound: true, Get: func(dst []byte, r *Request, _ string) []byte { return append(dst, r.serverName()...) }},
	{Name: "server_protocol", Get: func(dst []byte, r *Request, _ string) []byte {
		if r.req.ProtoMinor() == 1 {
			return append(dst, "HTTP/1.1"...)
		}
		return append(dst, "HTTP/1.0"...)
	}},
	{Name: "scheme", Get: func(dst []byte, r *Request, _ string) []byte {
		if r.HTTPS() {
			return append(dst, "https"...)
		}
		return append(dst, "http"...)
	}},
	{Name: "https", EmptyFound: true, Get: func(dst []byte, r *Request, _ string) []byte {
		if r.HTTPS() {
			return append(dst, "on"...)
		}
		return dst
	}},
	{Name: "request", Get: func(dst []byte, r *Request, _ string) []byte {
		line := r.RawHead()
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = bytes.TrimRight(line[:i], "\r")
		}
		return append(dst, line...)
	}},
	{Name: "request_method", Get: func(dst []byte, r *Request, _ string) []byte { return append(dst, r.req.Method()...) }},
	{Name: "request_uri", Get: appendRequestURI},
	{Name: "uri", Get: appendURI},
	{Name: "document_uri", Get: appendURI},
	{Name: "args", Get: appendArgs, Set: setArgs},
	{Name: "query_string", Get: appendArgs},
	{Name: "is_args", EmptyFound: true, Get: func(dst []byte, r *Request, _ string) []byte {
		if _, ok := r.Args(); ok {
			return append(dst, '?')
		}
		return dst
	}},
	// nginx's: the body read whole when all of it is in memory (proxy_pass with
	// proxy_request_buffering on, before it goes upstream).
	{Name: "request_body", Get: func(dst []byte, r *Request, _ string) []byte { return append(dst, r.requestBodyInMemory()...) }},
	// The named file of client_body_in_file_only (nginx also names the unlinked
	// file of a body that outgrew client_body_buffer_size; here that has no name).
	{Name: "request_body_file", Get: func(dst []byte, r *Request, _ string) []byte { return append(dst, r.bodyFileName...) }},
	{Name: "content_length", Get: func(dst []byte, r *Request, _ string) []byte {
		if v, ok := r.req.Headers.Get("content-length"); ok {
			return append(dst, v...)
		}
		if r.body == BodyLength && !r.buffering {
			// nginx: a chunked body read whole has its length (content_length_n).
			return strconv.AppendInt(dst, r.contentLength, 10)
		}
		return dst
	}},
	{Name: "content_type", Get: func(dst []byte, r *Request, _ string) []byte {
		return append(dst, r.headerValue("content-type")...)
	}},
	{Name: "status", Get: func(dst []byte, r *Request, _ string) []byte {
		// nginx's "%03ui": 000 before a status is set.
		st := r.status
		return append(dst, byte('0'+st/100%10), byte('0'+st/10%10), byte('0'+st%10))
	}},
	{Name: "body_bytes_sent", Get: func(dst []byte, r *Request, _ string) []byte {
		return strconv.AppendInt(dst, r.BodyBytesSent(), 10)
	}},
	{Name: "bytes_sent", Get: func(dst []byte, r *Request, _ string) []byte { return strconv.AppendInt(dst, r.wireSent, 10) }},
	{Name: "request_length", Get: func(dst []byte, r *Request, _ string) []byte {
		// nginx's r->request_length: the head as read (request line to the empty
		// line) and the bytes of a body read (not of one dropped), framing included.
		return strconv.AppendInt(dst, int64(r.c.headLen)+r.bodyWire, 10)
	}},
	{Name: "pipe", Get: func(dst []byte, r *Request, _ string) []byte {
		if r.pipelined {
			return append(dst, 'p')
		}
		return append(dst, '.')
	}},
	{Name: "request_id", Get: func(dst []byte, r *Request, _ string) []byte {
		// nginx's: 16 random bytes in hex, the same for the whole request.
		if !r.hasID {
			var b [16]byte
			r.c.w.ids.Read(b[:])
			hex.Encode(r.id[:], b[:])
			r.hasID = true
		}
		return append(dst, r.id[:]...)
	}},
	{Name: "sent_http_", Prefix: true, Param: func(rest string) string {
		return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
	}, Get: func(dst []byte, r *Request, name string) []byte { return r.appendSentHTTP(dst, name) },
		Found: func(r *Request, name string) bool { return r.sentHTTPFound(name) }},
	// A trailer field of the response (add_trailer's; nginx's grpc_pass also
	// gives some, numaproxy has none, and an upstream's trailer is not passed on).
	{Name: "sent_trailer_", Prefix: true, Param: func(rest string) string {
		return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
	}, Get: func(dst []byte, r *Request, name string) []byte { return r.appendSentTrailer(dst, name) }},
	{Name: "remote_user", Get: func(dst []byte, r *Request, _ string) []byte {
		return AppendBasicUser(dst, r.headerValue("authorization"))
	}},
	// nginx's: "OK", else an empty value that is found (logged "", not "-").
	{Name: "request_completion", EmptyFound: true, Get: func(dst []byte, r *Request, _ string) []byte {
		if r.complete {
			return append(dst, "OK"...)
		}
		return dst
	}},
	{Name: "request_time", Get: func(dst []byte, r *Request, _ string) []byte { return AppendSeconds(dst, time.Since(r.started)) }},
	// As nginx's, the loop's cached time (read once per event batch): a clock read
	// per access log line was a tenth of the log's cost.
	{Name: "time_local", Get: func(dst []byte, r *Request, _ string) []byte {
		return append(dst, r.c.w.timeLocal(r.c.w.loop.Now())...)
	}},
	{Name: "time_iso8601", Get: func(dst []byte, r *Request, _ string) []byte {
		return append(dst, r.c.w.timeISO8601(r.c.w.loop.Now())...)
	}},
	{Name: "msec", Get: func(dst []byte, _ *Request, _ string) []byte {
		now := time.Now()
		dst = strconv.AppendInt(dst, now.Unix(), 10)
		dst = append(dst, '.')
		ms := now.Nanosecond() / 1e6
		return append(dst, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	}},
	{Name: "connection", Get: func(dst []byte, r *Request, _ string) []byte { return strconv.AppendUint(dst, r.c.id, 10) }},
	{Name: "connection_requests", Get: func(dst []byte, r *Request, _ string) []byte {
		return strconv.AppendInt(dst, int64(r.c.requests), 10)
	}},
	{Name: "connection_time", Get: func(dst []byte, r *Request, _ string) []byte {
		// nginx's: since the accept, in seconds with milliseconds, by the loop's
		// cached clock.
		ms := r.c.w.msecNow() - r.c.opened
		return AppendSeconds(dst, time.Duration(ms)*time.Millisecond)
	}},
	{Name: "hostname", Get: func(dst []byte, r *Request, _ string) []byte { return append(dst, r.c.w.hostname...) }},
	{Name: "numa_node", Get: func(dst []byte, r *Request, _ string) []byte {
		return strconv.AppendInt(dst, int64(r.c.w.numaNode), 10)
	}},
	{Name: "worker_cpu", Get: func(dst []byte, r *Request, _ string) []byte {
		return strconv.AppendInt(dst, int64(r.c.w.loop.CPU()), 10)
	}},
	{Name: "incoming_cpu", Get: func(dst []byte, r *Request, _ string) []byte {
		cpu, err := r.IncomingCPU()
		if err != nil {
			return append(dst, '-')
		}
		return strconv.AppendInt(dst, int64(cpu), 10)
	}},
}

// setArgs is "set $args": new arguments, and the request's URI is no longer the
// client's (nginx's ngx_http_variable_set_args clears valid_unparsed_uri).
func setArgs(r *Request, v []byte) { setURI(r, r.uriBuf, v) }

// IncomingCPU is the CPU whose softirq last processed the connection's packets
// (SO_INCOMING_CPU): one getsockopt.
func (r *Request) IncomingCPU() (int, error) {
	return unix.GetsockoptInt(r.c.conn.Fd(), unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
}

// appendRequestURI is $request_uri: the target as received, but of an
// absolute-form one only what follows the host, as nginx's unparsed_uri ("/" for
// none, the query alone after an empty path).
func appendRequestURI(dst []byte, r *Request, _ string) []byte {
	if r.req.TargetForm() != http1.AbsoluteForm {
		return append(dst, r.req.Target()...)
	}
	path := r.req.Path()
	q, ok := r.req.Query()
	if len(path) == 0 && !ok {
		return append(dst, '/')
	}
	dst = append(dst, path...)
	if ok {
		dst = append(append(dst, '?'), q...)
	}
	return dst
}

func appendURI(dst []byte, r *Request, _ string) []byte { return append(dst, r.uriBuf...) }

func appendArgs(dst []byte, r *Request, _ string) []byte {
	q, _ := r.Args()
	return append(dst, q...)
}

// appendSentHTTP is $sent_http_NAME (name lower-case, with dashes): a field of the
// response head, and as nginx the fields the writer adds itself: Content-Length,
// Transfer-Encoding, Connection. Nothing before the head was written.
func (r *Request) appendSentHTTP(dst []byte, name string) []byte {
	if !r.headerSent {
		if name == "connection" {
			// nginx's is always found, from r->keepalive: a request that ends
			// without an answer (client gone, 444) logs whether the connection
			// would have been kept.
			if r.c.keepAlive {
				return append(dst, "keep-alive"...)
			}
			return append(dst, "close"...)
		}
		return dst
	}
	h := &r.out
	switch name {
	case "content-length":
		if v, ok := h.Get(name); ok {
			return append(dst, v...)
		}
		if h.ContentLength >= 0 {
			return strconv.AppendInt(dst, h.ContentLength, 10)
		}
		return dst
	case "transfer-encoding":
		if r.chunked {
			return append(dst, "chunked"...)
		}
		return dst
	case "connection":
		switch {
		case h.Status == 101:
			return append(dst, "upgrade"...)
		case r.c.keepAlive && !r.logged:
			// nginx clears r->keepalive before it logs a kept-alive request: its
			// access log always shows "close".
			return append(dst, "keep-alive"...)
		}
		return append(dst, "close"...)
	}
	// The fields an earlier answer passed on (Carry) go out first.
	if v, ok := fieldInLines(r.carried, name); ok {
		return append(dst, v...)
	}
	for i := range h.fields {
		if f := &h.fields[i]; !f.deleted && equalFoldDash(f.name, name) {
			return append(dst, f.value...)
		}
	}
	return dst
}

// sentHTTPFound reports whether the response has a field called name (an empty
// $sent_http_NAME is then found). The fields appendSentHTTP makes up are never
// empty.
func (r *Request) sentHTTPFound(name string) bool {
	if !r.headerSent {
		return false
	}
	if _, ok := fieldInLines(r.carried, name); ok {
		return true
	}
	for i := range r.out.fields {
		if f := &r.out.fields[i]; !f.deleted && equalFoldDash(f.name, name) {
			return true
		}
	}
	return false
}

// appendSentTrailer is $sent_trailer_NAME (name lower-case, with dashes): the first
// trailer field AddTrailer added called name.
func (r *Request) appendSentTrailer(dst []byte, name string) []byte {
	if len(r.trailers) == 0 {
		return dst
	}
	v, _ := fieldInLines(r.trailers[len("0\r\n"):], name)
	return append(dst, v...)
}

// fieldInLines finds the value of the first field called name (lower-case, with
// dashes) in "Name: value\r\n" lines, as Carry and AddTrailer write them.
func fieldInLines(b []byte, name string) ([]byte, bool) {
	for len(b) > 0 {
		line := b
		if end := bytes.Index(b, crlf); end >= 0 {
			line, b = b[:end], b[end+len(crlf):]
		} else {
			b = nil
		}
		if colon := bytes.IndexByte(line, ':'); colon >= 0 && equalFoldDash(line[:colon], name) {
			return bytes.TrimLeft(line[colon+1:], " "), true
		}
	}
	return nil, false
}

// serverName is $server_name: the first name of the server that took the request.
func (r *Request) serverName() string {
	if r.srv == nil || len(r.srv.Names) == 0 {
		return ""
	}
	return r.srv.Names[0].Name
}

// appendHTTPVar is $http_NAME (name lower-case, with dashes), as nginx 1.22 finds
// it: repeated X-Forwarded-For and Cookie fields joined with ", " and "; "; Host,
// User-Agent, Referer and Via by their exact names; any other name matches a field
// whose name has "_" where name has "-" (underscores_in_headers on lets those in).
func (r *Request) appendHTTPVar(dst []byte, name string) []byte {
	h := &r.req.Headers
	sep := ", "
	switch name {
	case "cookie":
		sep = "; "
		fallthrough
	case "x-forwarded-for":
		first := true
		for i := h.Index(name, 0); i >= 0; i = h.Index(name, i+1) {
			if !first {
				dst = append(dst, sep...)
			}
			first = false
			dst = append(dst, h.Value(i)...)
		}
		return dst
	case "host", "user-agent", "referer", "via":
		return append(dst, r.headerValue(name)...)
	}
	for i := 0; i < h.Len(); i++ {
		if equalFoldDash(h.Name(i), name) {
			return append(dst, h.Value(i)...)
		}
	}
	return dst
}

// httpVarFound reports whether the request has a field appendHTTPVar takes for
// name (an empty $http_NAME is then found).
func (r *Request) httpVarFound(name string) bool {
	h := &r.req.Headers
	switch name {
	case "cookie", "x-forwarded-for", "host", "user-agent", "referer", "via":
		return h.Index(name, 0) >= 0
	}
	for i := 0; i < h.Len(); i++ {
		if equalFoldDash(h.Name(i), name) {
			return true
		}
	}
	return false
}

// equalFoldDash compares a field name with a lower-case name with dashes, ASCII
// case-insensitively, "_" in the field name matching "-".
func equalFoldDash(field []byte, name string) bool {
	if len(field) != len(name) {
		return false
	}
	for i, c := range field {
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == '_':
			c = '-'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// headerValue is the first request field called name (lower-case, dashes).
func (r *Request) headerValue(name string) []byte {
	v, _ := r.req.Headers.Get(name)
	return v
}

// AppendLowerHost appends host as nginx's $host has it (ngx_http_validate_host):
// without its port and its trailing dot, lower-cased.
func AppendLowerHost(dst, host []byte) []byte {
	end := len(host)
	if len(host) > 0 && host[0] == '[' {
		if i := bytes.IndexByte(host, ']'); i >= 0 {
			end = i + 1
		}
	} else if i := bytes.LastIndexByte(host, ':'); i >= 0 {
		end = i
	}
	if end > 0 && host[end-1] == '.' {
		end--
	}
	for _, ch := range host[:end] {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		dst = append(dst, ch)
	}
	return dst
}

// ArgValue is nginx's ngx_http_arg, $arg_NAME: the value of the first argument
// called name (any case) followed by "=" in args, and whether there is one.
func ArgValue(args []byte, name string) ([]byte, bool) {
	for p := 0; p+len(name) < len(args); p++ {
		// The name ends before the last byte, which leaves room for "=".
		i := indexFold(args[p:len(args)-1], name)
		if i < 0 {
			return nil, false
		}
		p += i
		if (p == 0 || args[p-1] == '&') && args[p+len(name)] == '=' {
			v := args[p+len(name)+1:]
			if j := bytes.IndexByte(v, '&'); j >= 0 {
				v = v[:j]
			}
			return v, true
		}
	}
	return nil, false
}

func indexFold(s []byte, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if http1.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// CookieValue is nginx 1.22's $cookie_NAME (ngx_http_parse_multi_header_lines):
// the value of the first cookie called name (any case) in the Cookie fields, in
// order, and whether there is one. Cookies are separated by ";" or ","; spaces may
// surround the "="; the value runs to the next ";", spaces and commas included.
func CookieValue(h *http1.Headers, name string) ([]byte, bool) {
	for i := h.Index("cookie", 0); i >= 0; i = h.Index("cookie", i+1) {
		v := h.Value(i)
		for len(v) > 0 {
			if len(v) >= len(name) && http1.EqualFold(v[:len(name)], name) {
				rest := bytes.TrimLeft(v[len(name):], " ")
				if len(rest) > 0 && rest[0] == '=' {
					val := bytes.TrimLeft(rest[1:], " ")
					if end := bytes.IndexByte(val, ';'); end >= 0 {
						val = val[:end]
					}
					return val, true
				}
				v = rest
			}
			// Not this one: on after the next ";" or ",".
			if end := bytes.IndexAny(v, ";,"); end >= 0 {
				v = bytes.TrimLeft(v[end+1:], " ")
			} else {
				v = nil
			}
		}
	}
	return nil, false
}

// AppendSeconds formats d as nginx's seconds with milliseconds: "0.042".
func AppendSeconds(dst []byte, d time.Duration) []byte {
	ms := d.Milliseconds()
	dst = strconv.AppendInt(dst, ms/1000, 10)
	dst = append(dst, '.')
	frac := ms % 1000
	return append(dst, byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// AppendAddr appends a client address as nginx's $remote_addr writes it; a
// connection on a unix-domain socket (no IP address) is "unix:".
func AppendAddr(dst []byte, a netip.AddrPort) []byte {
	if !a.Addr().IsValid() {
		return append(dst, "unix:"...)
	}
	return a.Addr().AppendTo(dst)
}

// AppendPort appends a client port as nginx's $remote_port: nothing for port 0 (an
// address realip took without a port, a unix-domain socket).
func AppendPort(dst []byte, a netip.AddrPort) []byte {
	if a.Port() == 0 {
		return dst
	}
	return strconv.AppendUint(dst, uint64(a.Port()), 10)
}
