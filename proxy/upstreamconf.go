package proxy

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// Bind is a proxy_bind: the source address of upstream connections.
type Bind struct {
	Addr        netip.AddrPort     // a fixed address (port 0: any); unset when Value has variables
	Value       *httpcore.Template // an address with variables, parsed for each connection
	Transparent bool
}

// IgnoreHeaders is proxy_ignore_headers, a bit set of upstream response fields.
type IgnoreHeaders uint16

const (
	IgnoreXAccelRedirect IgnoreHeaders = 1 << iota
	IgnoreXAccelExpires
	IgnoreXAccelLimitRate
	IgnoreXAccelBuffering
	IgnoreXAccelCharset
	IgnoreExpires
	IgnoreCacheControl
	IgnoreSetCookie
	IgnoreVary
)

var ignoreHeaderNames = []struct {
	name string
	bit  IgnoreHeaders
}{
	{"X-Accel-Redirect", IgnoreXAccelRedirect}, {"X-Accel-Expires", IgnoreXAccelExpires},
	{"X-Accel-Limit-Rate", IgnoreXAccelLimitRate}, {"X-Accel-Buffering", IgnoreXAccelBuffering},
	{"X-Accel-Charset", IgnoreXAccelCharset}, {"Expires", IgnoreExpires},
	{"Cache-Control", IgnoreCacheControl}, {"Set-Cookie", IgnoreSetCookie}, {"Vary", IgnoreVary},
}

// setIgnoreHeaders is nginx's bitmask slot: the fields of every proxy_ignore_headers
// of a level add up (one named twice is a warning), and replace the inherited set.
func setIgnoreHeaders(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitIgnoreHeaders == 0 {
		lc.IgnoreHeaders = 0
		lc.set |= bitIgnoreHeaders
	}
	for _, a := range s.Args {
		i := 0
		for i < len(ignoreHeaderNames) && !strings.EqualFold(ignoreHeaderNames[i].name, a.Value) {
			i++
		}
		if i == len(ignoreHeaderNames) {
			return s.InvalidValue(a, "")
		}
		if bit := ignoreHeaderNames[i].bit; lc.IgnoreHeaders&bit != 0 {
			c.Warn(a.Pos, "duplicate value %q in \"proxy_ignore_headers\" directive", a.Value)
		} else {
			lc.IgnoreHeaders |= bit
		}
	}
	return nil
}

// setProxyMethod takes a method or a template. A fixed one must be a token (nginx
// sends whatever it is given, "X Y" included); one built from variables is checked
// for each request.
func setProxyMethod(c *conf.Cursor, s *conf.Stmt) error {
	t, err := httpcore.CompileTemplate(c, s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	}
	if t.Static() && !http1.IsToken(s.Args[0].Value) {
		return s.InvalidValue(s.Args[0], "not a method")
	}
	lc := locConf(c)
	lc.Method = t
	lc.set |= bitMethod
	return nil
}

// setProxyBind is nginx's ngx_http_upstream_bind_set_slot: off, or an address
// (variables allowed) with an optional port, and transparent.
func setProxyBind(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	lc.set |= bitBind
	v := s.Args[0].Value
	if len(s.Args) == 1 && v == "off" {
		lc.Bind = nil
		return nil
	}
	b := &Bind{}
	t, err := httpcore.CompileTemplate(c, v)
	if err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	}
	if t.Static() {
		a, ok := parseBindAddr(v)
		if !ok {
			return s.Errorf("invalid address %q", v)
		}
		b.Addr = a
	} else {
		b.Value = t
	}
	if len(s.Args) == 2 {
		if s.Args[1].Value != "transparent" {
			return s.Errorf("invalid parameter %q", s.Args[1].Value)
		}
		b.Transparent = true
	}
	lc.Bind = b
	return nil
}

// parseBindAddr is nginx's ngx_parse_addr_port: an IPv4 or IPv6 address, or one
// with a port (1-65535): 10.0.0.1:5000, [::1]:5000, [::1]. Names are not resolved.
func parseBindAddr(s string) (netip.AddrPort, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 0), a.Zone() == ""
	}
	host, port := "", ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.AddrPort{}, false
		}
		if end == len(s)-1 {
			a, err := netip.ParseAddr(s[1:end])
			return netip.AddrPortFrom(a, 0), err == nil && a.Zone() == ""
		}
		if s[end+1] != ':' {
			return netip.AddrPort{}, false
		}
		host, port = s[1:end], s[end+2:]
	} else {
		i := strings.IndexByte(s, ':')
		if i < 0 {
			return netip.AddrPort{}, false
		}
		host, port = s[:i], s[i+1:]
	}
	p, err := strconv.Atoi(port)
	a, aerr := netip.ParseAddr(host)
	if err != nil || p < 1 || p > 65535 || aerr != nil || a.Zone() != "" {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, uint16(p)), true
}

// dialOptions are the socket settings of a connection to p for the current request:
// proxy_connect_timeout, proxy_socket_keepalive and proxy_bind.
func (ex *exchange) dialOptions(unixPath string) eventloop.DialOptions {
	lcf := ex.lc
	o := eventloop.DialOptions{Unix: unixPath, Timeout: lcf.ConnectTimeout, KeepAlive: lcf.SocketKeepalive}
	b := lcf.Bind
	if b == nil {
		return o
	}
	o.Transparent = b.Transparent
	if b.Value == nil {
		o.Local = b.Addr
		return o
	}
	v := b.Value.Append(ex.st.scratch[:0], ex.r)
	if len(v) == 0 {
		return o // an empty value binds nothing, as in nginx
	}
	a, ok := parseBindAddr(string(v))
	if !ok {
		ex.st.log.Error("invalid local address \""+string(v)+"\"", "client", ex.r.RemoteAddr().String())
		return o
	}
	o.Local = a
	return o
}
