// Package realip is nginx's ngx_http_realip_module: behind trusted proxies
// (set_real_ip_from), the client address is taken from a request header
// (real_ip_header: X-Real-IP, X-Forwarded-For or any other) and replaces
// $remote_addr and $remote_port for the rest of the request: access checks, the
// proxy's X-Forwarded-For, logs. $realip_remote_addr and $realip_remote_port keep
// the peer's.
//
// As nginx, it runs in the post-read phase with the configuration of the server
// the request's Host selected, and, if that did not change the address, once more
// in the preaccess phase with the location's. The address is the request's
// (httpcore.Request.SetRemoteAddr): the next request on the connection starts from
// the peer's again.
//
// "real_ip_header proxy_protocol" takes the source address and port of the
// connection's PROXY protocol header (listen ... proxy_protocol) when the peer is
// trusted, as nginx. Where it differs from nginx: "unix:" is accepted and never
// matches, numaproxy having no unix-domain listeners.
package realip

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/internal/cidr"
	"github.com/numaproxy/numaproxy/proxyproto"
)

// Module declares set_real_ip_from, real_ip_header and real_ip_recursive and the
// $realip_ variables.
var Module = &conf.Module{
	Name:       "realip",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP:  func(parent, child any) error { child.(*LocConf).inherit(parent.(*LocConf)); return nil },
	Ctx:        &httpcore.Hooks{Init: initModule, Variables: variables},
}

// self is Module, for the handlers (Module's own initialiser cannot name them).
var self *conf.Module

func init() { self = Module }

const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "set_real_ip_from", Contexts: hsl, Args: conf.Args1, Multi: true, Set: setFrom,
			Syntax: "set_real_ip_from address | CIDR | unix: | name;",
			Doc:    "A trusted proxy: requests from it take the client address from real_ip_header. A name is resolved once, when the configuration is read. A level that sets any replaces all inherited ones. unix: is accepted and matches nothing (no unix-domain listeners)."},
		{Name: "real_ip_header", Contexts: hsl, Args: conf.Args1, Set: setHeader,
			Syntax: "real_ip_header field | X-Real-IP | X-Forwarded-For | proxy_protocol;", Default: "X-Real-IP",
			Doc: "The request header that holds the client address (an address, with an optional port). X-Forwarded-For reads every such field, last address first; proxy_protocol takes the address and port of the connection's PROXY protocol header."},
		{Name: "real_ip_recursive", Contexts: hsl, Args: conf.Flag, Set: setRecursive,
			Syntax: "real_ip_recursive on | off;", Default: "off",
			Doc: "Off: the last address of the header is the client. On: the last address that is not a trusted proxy."},
	}
}

// headerKind is real_ip_header's value.
type headerKind uint8

const (
	xRealIP headerKind = iota
	xForwardedFor
	proxyProtocol
	otherHeader
)

// LocConf is the module's configuration at one level, after inheritance.
type LocConf struct {
	From      *cidr.Set // nil: no set_real_ip_from (the module does nothing here)
	kind      headerKind
	header    string // the field name, for otherHeader
	Recursive bool
	kindSet   bool
	recSet    bool
}

func (lc *LocConf) inherit(p *LocConf) {
	if lc.From == nil {
		lc.From = p.From
	}
	if !lc.kindSet {
		lc.kind, lc.header, lc.kindSet = p.kind, p.header, p.kindSet
	}
	if !lc.recSet {
		lc.Recursive, lc.recSet = p.Recursive, p.recSet
	}
}

func setFrom(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	if lc.From == nil {
		lc.From = &cidr.Set{}
	}
	v := s.Args[0].Value
	if v == "unix:" {
		lc.From.Unix = true
		return nil
	}
	p, masked, err := cidr.Parse(v)
	if err == nil {
		if masked {
			c.Warn(s.Args[0].Pos, "low address bits of %s are meaningless", v)
		}
		lc.From.Nets = append(lc.From.Nets, p)
		return nil
	}
	// nginx resolves a name when the configuration is read (not on a loop here).
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", v)
	if err != nil || len(addrs) == 0 {
		return s.Errorf("host not found in set_real_ip_from %q", v)
	}
	for _, a := range addrs {
		a = a.Unmap()
		lc.From.Nets = append(lc.From.Nets, netip.PrefixFrom(a, a.BitLen()))
	}
	return nil
}

func setHeader(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	v := s.Args[0].Value
	// nginx compares these names case-sensitively: "x-real-ip" is another header
	// (the same field, read as any other).
	switch v {
	case "X-Real-IP":
		lc.kind = xRealIP
	case "X-Forwarded-For":
		lc.kind = xForwardedFor
	case "proxy_protocol":
		lc.kind = proxyProtocol
	default:
		if v == "" {
			return s.InvalidValue(s.Args[0], "empty field name")
		}
		lc.kind, lc.header = otherHeader, strings.ToLower(v)
	}
	lc.kindSet = true
	return nil
}

func setRecursive(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	on, err := conf.ParseFlag(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], `it must be "on" or "off"`)
	}
	lc.Recursive, lc.recSet = on, true
	return nil
}

// initModule adds the handler to the post-read and preaccess phases when some
// level trusts a proxy.
func initModule(s *httpcore.Setup) error {
	used := false
	httpcore.Walk(s.Config, self, func(lc any) { used = used || lc.(*LocConf).From != nil })
	if !used {
		return nil
	}
	if err := s.AddHandler(httpcore.PostReadPhase, handle); err != nil {
		return err
	}
	return s.AddHandler(httpcore.PreaccessPhase, handle)
}

// handle is ngx_http_realip_handler: once a request, with the configuration of
// where the request stands (its server in post-read, its location in preaccess).
func handle(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || lc.From == nil || r.RemoteAddrSet() {
		return httpcore.Declined
	}
	h := &r.Head().Headers
	peer := r.PeerAddr()
	var a netip.AddrPort
	var ok bool
	switch lc.kind {
	case xRealIP:
		i := h.Index("x-real-ip", 0)
		if i < 0 {
			return httpcore.Declined
		}
		a, ok = forwarded(peer, h.Value(i), lc.From, lc.Recursive)
	case otherHeader:
		i := h.Index(lc.header, 0)
		if i < 0 {
			return httpcore.Declined
		}
		a, ok = forwarded(peer, h.Value(i), lc.From, lc.Recursive)
	case xForwardedFor:
		a, ok = forwardedFor(r, peer, lc)
	case proxyProtocol:
		// nginx: the header's source address and port, from a trusted peer.
		if src, has := proxyproto.SourceOf(r); has && lc.From.Contains(peer.Addr()) {
			a, ok = src, true
		}
	}
	if ok {
		r.SetRemoteAddr(a)
	}
	return httpcore.Declined
}

// forwardedFor is ngx_http_get_forwarded_addr over every X-Forwarded-For field,
// the last one first; without real_ip_recursive only the last field counts.
func forwardedFor(r *httpcore.Request, peer netip.AddrPort, lc *LocConf) (netip.AddrPort, bool) {
	h := &r.Head().Headers
	addr, st, found := peer, stNone, false
	for i := h.Len() - 1; i >= 0; i-- {
		if !http1.EqualFold(h.Name(i), "x-forwarded-for") {
			continue
		}
		addr, st = walk(addr, h.Value(i), lc.From, lc.Recursive)
		if !lc.Recursive {
			break
		}
		if st == stNone && found {
			st = stDone
			break
		}
		if st != stOK {
			break
		}
		found = true
	}
	return addr, st != stNone
}

// forwarded is ngx_http_get_forwarded_addr for one header value.
func forwarded(peer netip.AddrPort, v []byte, from *cidr.Set, recursive bool) (netip.AddrPort, bool) {
	a, st := walk(peer, v, from, recursive)
	return a, st != stNone
}

// walkState is what ngx_http_get_forwarded_addr_internal returns: NGX_DECLINED
// (nothing taken), NGX_OK (an address taken, the walk ended with the list or
// without recursion) or NGX_DONE (addresses taken until one that is not trusted
// or not an address).
type walkState uint8

const (
	stNone walkState = iota
	stOK
	stDone
)

// walk is ngx_http_get_forwarded_addr_internal, its recursion unrolled: while
// addr (the peer first) is a trusted proxy, the list's last address replaces it,
// once or, with recursive, on towards the list's start.
func walk(addr netip.AddrPort, v []byte, from *cidr.Set, recursive bool) (netip.AddrPort, walkState) {
	fail := stNone
	for {
		if !from.Contains(addr.Addr()) || len(v) == 0 {
			return addr, fail
		}
		// The last element: trailing spaces and commas skipped, then back to the
		// separator before it.
		i := len(v) - 1
		for i > 0 && (v[i] == ' ' || v[i] == ',') {
			i--
		}
		end := i + 1
		for i > 0 {
			if v[i] == ' ' || v[i] == ',' {
				i++
				break
			}
			i--
		}
		a, ok := cidr.ParseAddrPort(v[i:end])
		if !ok {
			return addr, fail
		}
		addr = a
		if !recursive || i == 0 {
			return addr, stOK
		}
		v, fail = v[:i-1], stDone
	}
}

// variables are $realip_remote_addr and $realip_remote_port: the peer's address
// and port, whatever realip made $remote_addr.
var variables = []httpcore.Variable{
	{Name: "realip_remote_addr", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return httpcore.AppendAddr(dst, r.PeerAddr())
	}},
	{Name: "realip_remote_port", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return httpcore.AppendPort(dst, r.PeerAddr())
	}},
}
