package proxy

import (
	"bytes"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// AppendVar evaluates one variable for the client's current request into dst. It
// is the single place variables get their values (nginx's variables, plus
// $numa_node, $worker_cpu and $incoming_cpu).
func (c *client) AppendVar(dst []byte, id VarID, param string) []byte {
	r := &c.req
	switch id {
	case VarHost:
		// nginx: the Host header without port, lower-cased, else the server name.
		if h := r.Host(); len(h) > 0 {
			return appendLowerHost(dst, h)
		}
		return append(dst, c.serverName()...)
	case VarHTTP:
		return c.appendHTTPVar(dst, param)
	case VarCookie:
		return append(dst, cookieValue(c.headerValue("cookie"), param)...)
	case VarArg:
		q, _ := c.query()
		return append(dst, argValue(q, param)...)
	case VarRemoteAddr:
		return c.remote.Addr().AppendTo(dst)
	case VarRemotePort:
		return strconv.AppendUint(dst, uint64(c.remote.Port()), 10)
	case VarServerAddr:
		return c.local.Addr().AppendTo(dst)
	case VarServerPort:
		return strconv.AppendUint(dst, uint64(c.local.Port()), 10)
	case VarServerName:
		return append(dst, c.serverName()...)
	case VarServerProtocol:
		if r.ProtoMinor() == 1 {
			return append(dst, "HTTP/1.1"...)
		}
		return append(dst, "HTTP/1.0"...)
	case VarScheme:
		if c.https() {
			return append(dst, "https"...)
		}
		return append(dst, "http"...)
	case VarHTTPS:
		if c.https() {
			return append(dst, "on"...)
		}
		return dst
	case VarRequest:
		if c.headLen > 0 && c.headLen <= len(c.in) {
			line := c.in[:c.headLen]
			if i := bytes.IndexByte(line, '\n'); i >= 0 {
				line = bytes.TrimRight(line[:i], "\r")
			}
			return append(dst, line...)
		}
		return dst
	case VarRequestMethod:
		return append(dst, r.Method()...)
	case VarRequestURI:
		return append(dst, r.Target()...)
	case VarURI:
		return append(dst, c.uriBuf...)
	case VarArgs:
		q, _ := c.query()
		return append(dst, q...)
	case VarIsArgs:
		if _, ok := c.query(); ok {
			return append(dst, '?')
		}
		return dst
	case VarContentLength:
		return append(dst, c.headerValue("content-length")...)
	case VarContentType:
		return append(dst, c.headerValue("content-type")...)
	case VarProxyHost:
		if c.lcf.Pass != nil {
			if c.lcf.Pass.Unix {
				return append(dst, "localhost"...) // as nginx for a unix-domain socket
			}
			host := c.lcf.Pass.Host
			if len(host) > 3 && host[len(host)-3:] == ":80" {
				host = host[:len(host)-3]
			}
			return append(dst, host...)
		}
		return dst
	case VarProxyAddXForwardedFor:
		// nginx: every X-Forwarded-For field, each followed by ", ", then the address.
		h := &r.Headers
		for i := h.Index("x-forwarded-for", 0); i >= 0; i = h.Index("x-forwarded-for", i+1) {
			dst = append(dst, h.Value(i)...)
			dst = append(dst, ", "...)
		}
		return c.remote.Addr().AppendTo(dst)
	case VarUpstreamAddr:
		if c.ex != nil && c.ex.peer != nil {
			return c.ex.peer.AppendAddr(dst)
		}
		return dst
	case VarUpstreamStatus:
		if c.ex != nil && c.ex.status != 0 {
			return strconv.AppendInt(dst, int64(c.ex.status), 10)
		}
		return dst
	case VarUpstreamResponseTime:
		if c.ex != nil && c.ex.status != 0 {
			return appendSeconds(dst, c.ex.responseTime)
		}
		return dst
	case VarStatus:
		// nginx's "%03ui": 000 before a status is set.
		st := c.status
		return append(dst, byte('0'+st/100%10), byte('0'+st/10%10), byte('0'+st%10))
	case VarBodyBytesSent:
		return strconv.AppendInt(dst, c.bodySent, 10)
	case VarRequestTime:
		return appendSeconds(dst, time.Since(c.started))
	case VarTimeLocal:
		return time.Now().AppendFormat(dst, "02/Jan/2006:15:04:05 -0700")
	case VarTimeISO8601:
		return time.Now().AppendFormat(dst, "2006-01-02T15:04:05-07:00")
	case VarMsec:
		now := time.Now()
		dst = strconv.AppendInt(dst, now.Unix(), 10)
		dst = append(dst, '.')
		ms := now.Nanosecond() / 1e6
		return append(dst, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	case VarConnection:
		return strconv.AppendUint(dst, c.id, 10)
	case VarConnectionRequests:
		return strconv.AppendInt(dst, int64(c.requests), 10)
	case VarHostname:
		return append(dst, c.w.hostname...)
	case VarNumaNode:
		return strconv.AppendInt(dst, int64(c.w.numaNode), 10)
	case VarWorkerCPU:
		return strconv.AppendInt(dst, int64(c.w.loop.CPU()), 10)
	case VarIncomingCPU:
		cpu, err := unix.GetsockoptInt(c.conn.Fd(), unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
		if err != nil {
			return append(dst, '-')
		}
		return strconv.AppendInt(dst, int64(cpu), 10)
	}
	return dst
}

// serverName is $server_name: the first name of the server that took the request.
func (c *client) serverName() string {
	if c.srv == nil || len(c.srv.Names) == 0 {
		return ""
	}
	return c.srv.Names[0].Name
}

// appendHTTPVar is $http_NAME (name lower-case, with dashes), as nginx 1.22 finds
// it: repeated X-Forwarded-For and Cookie fields joined with ", " and "; "; Host,
// User-Agent, Referer and Via by their exact names; any other name matches a field
// whose name has "_" where name has "-" (underscores_in_headers on lets those in).
func (c *client) appendHTTPVar(dst []byte, name string) []byte {
	h := &c.req.Headers
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
		return append(dst, c.headerValue(name)...)
	}
	for i := 0; i < h.Len(); i++ {
		if equalFoldDash(h.Name(i), name) {
			return append(dst, h.Value(i)...)
		}
	}
	return dst
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
func (c *client) headerValue(name string) []byte {
	v, _ := c.req.Headers.Get(name)
	return v
}

// appendLowerHost appends host as nginx's $host has it (ngx_http_validate_host):
// without its port and its trailing dot, lower-cased.
func appendLowerHost(dst, host []byte) []byte {
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

// argValue finds name=value in a query string (names compare case-insensitively, as
// nginx's $arg_).
func argValue(q []byte, name string) []byte {
	for len(q) > 0 {
		pair := q
		if i := bytes.IndexByte(q, '&'); i >= 0 {
			pair, q = q[:i], q[i+1:]
		} else {
			q = nil
		}
		k, v := pair, []byte(nil)
		if i := bytes.IndexByte(pair, '='); i >= 0 {
			k, v = pair[:i], pair[i+1:]
		}
		if equalFoldBytes(k, name) {
			return v
		}
	}
	return nil
}

// cookieValue finds a cookie in a Cookie header ("a=1; b=2").
func cookieValue(h []byte, name string) []byte {
	for len(h) > 0 {
		item := h
		if i := bytes.IndexByte(h, ';'); i >= 0 {
			item, h = h[:i], h[i+1:]
		} else {
			h = nil
		}
		item = bytes.TrimSpace(item)
		if i := bytes.IndexByte(item, '='); i >= 0 && string(item[:i]) == name {
			return item[i+1:]
		}
	}
	return nil
}

// appendSeconds formats d as nginx's seconds with milliseconds: "0.042".
func appendSeconds(dst []byte, d time.Duration) []byte {
	ms := d.Milliseconds()
	dst = strconv.AppendInt(dst, ms/1000, 10)
	dst = append(dst, '.')
	frac := ms % 1000
	return append(dst, byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// https reports a connection on an address that speaks TLS (nginx's $https).
func (c *client) https() bool {
	a := c.w.snapshotFor(c.local).Routes.Addr(c.local)
	return a != nil && a.SSL
}
