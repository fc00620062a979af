package conf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/pcre"
)

// httpDirectives declares the http skeleton: the blocks and the directives that say
// which server and location a request belongs to.
func httpDirectives() []Directive {
	return []Directive{
		{Name: "http", Contexts: MainCtx, Args: Args0, Block: true, Set: setHTTP,
			Syntax: "http { ... }",
			Doc:    "The HTTP server configuration."},
		{Name: "server", Contexts: HTTPCtx, Args: Args0, Block: true, Multi: true, Set: setServer,
			Syntax: "server { ... }",
			Doc:    "A virtual server."},
		{Name: "listen", Contexts: ServerCtx, Args: Args1More, Multi: true, Set: setListen,
			Syntax: "listen address[:port] | port [default_server] [ssl] [proxy_protocol] [reuseport] [bind] [backlog=number] [rcvbuf=size] [sndbuf=size] [deferred] [fastopen=number] [ipv6only=on|off] [so_keepalive=on|off|[keepidle]:[keepintvl]:[keepcnt]];", Default: "*:80",
			Doc: "Address and port the server accepts connections on; IPv6 as [::]:80. Every address gets its own sockets (one per loop, SO_REUSEPORT), so bind and reuseport are what numaproxy always does. Socket parameters are set on new sockets and again on reload; deferred sets TCP_DEFER_ACCEPT (1 s, as nginx). ssl makes the address speak TLS (if any listen of it says so, as in nginx); proxy_protocol makes each connection start with a PROXY protocol header (v1 or v2, before the TLS handshake with ssl), one without a valid header is closed. An IPv6 address's sockets take IPv6 only: ipv6only=off is refused (listen on the IPv4 address as well)."},
		{Name: "server_name", Contexts: ServerCtx, Args: Args1More, Multi: true, Set: setServerName,
			Syntax: "server_name name ...;", Default: `""`,
			Doc: "Names of the server: exact, *.example.com, example.*, .example.com, or ~regex."},
		{Name: "location", Contexts: ServerCtx | LocationCtx, Args: Args1 | Args2, Block: true, Multi: true, Set: setLocation,
			Syntax: "location [ = | ~ | ~* | ^~ ] uri { ... } | location @name { ... }",
			Doc:    "Configuration for a request URI; matched in nginx's order."},
	}
}

func setHTTP(c *Cursor, s *Stmt) error {
	h := &HTTP{Pos: s.Pos, confs: newHTTPConfs(c.p.reg)}
	c.Config.HTTP = h
	child := *c
	child.HTTP = h
	return child.parseHTTPBlock(HTTPCtx, h.confs)
}

func newHTTPConfs(r *Registry) moduleConfs {
	confs := make(moduleConfs, r.slots)
	for _, m := range r.modules {
		if m.NewHTTP != nil {
			confs[m.slot.Load()-1] = m.NewHTTP()
		}
	}
	return confs
}

func setServer(c *Cursor, s *Stmt) error {
	srv := &Server{Pos: s.Pos, confs: newHTTPConfs(c.p.reg)}
	c.HTTP.Servers = append(c.HTTP.Servers, srv)
	child := *c
	child.Server = srv
	return child.parseHTTPBlock(ServerCtx, srv.confs)
}

func setListen(c *Cursor, s *Stmt) error {
	l, err := parseListen(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	}
	l.Pos = s.Pos
	for _, a := range s.Args[1:] {
		key, val, hasVal := strings.Cut(a.Value, "=")
		switch {
		case !hasVal && (key == "default_server" || key == "default"):
			l.DefaultServer = true
		case !hasVal && key == "reuseport":
			l.ReusePort = true
		case !hasVal && key == "bind":
			l.Bind = true
		case hasVal && key == "backlog":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > 1<<20 {
				return s.InvalidValue(a, "invalid backlog")
			}
			l.Socket.Backlog = n
		case hasVal && (key == "rcvbuf" || key == "sndbuf"):
			n, err := ParseSize(val)
			if err != nil || n < 1 || n > 1<<30 {
				return &Error{Pos: a.Pos, Msg: fmt.Sprintf("invalid %s \"%s\"", key, val)}
			}
			if key == "rcvbuf" {
				l.Socket.RcvBuf = int(n)
			} else {
				l.Socket.SndBuf = int(n)
			}
		case hasVal && key == "so_keepalive":
			if err := parseSoKeepalive(val, &l.Socket); err != nil {
				return &Error{Pos: a.Pos, Msg: fmt.Sprintf("invalid so_keepalive value: \"%s\"", val)}
			}
		case !hasVal && key == "deferred":
			l.Socket.DeferAccept = true
		case hasVal && key == "fastopen":
			n, err := ParseNumber(val)
			if err != nil || n < 1 {
				return &Error{Pos: a.Pos, Msg: fmt.Sprintf("invalid fastopen \"%s\"", val)}
			}
			l.Socket.FastOpen = n
		case key == "setfib" || key == "accept_filter":
			return &Error{Pos: a.Pos, Msg: fmt.Sprintf("the %q parameter of %q is FreeBSD's; Linux has no such option", key, s.Name)}
		case hasVal && key == "ipv6only":
			on, err := ParseFlag(val)
			if err != nil || !l.Addr.Addr().Is6() {
				return s.InvalidValue(a, "ipv6only takes on or off, on an IPv6 address")
			}
			if !on {
				// An IPv6 socket is always IPV6_V6ONLY here: each address has its own
				// reuseport group and steering program, which a socket taking IPv4 too
				// would join twice.
				return &Error{Pos: a.Pos, Msg: `"ipv6only=off" (one socket for IPv4 and IPv6) is not supported: listen on the IPv4 address as well`}
			}
		case !hasVal && key == "ssl":
			l.SSL = true
		case !hasVal && key == "proxy_protocol":
			l.ProxyProtocol = true
		case key == "http2" || key == "quic":
			return &Error{Pos: a.Pos, Msg: fmt.Sprintf("the %q parameter of %q is not supported yet", key, s.Name)}
		default:
			return &Error{Pos: a.Pos, Msg: fmt.Sprintf("invalid parameter %q", a.Value)}
		}
	}
	c.Server.Listens = append(c.Server.Listens, l)
	return nil
}

// parseListen reads "addr:port", "[v6]:port", "*:port", "port" or "addr" (port 80).
func parseListen(text string) (Listen, error) {
	l := Listen{Text: text}
	if strings.HasPrefix(text, "unix:") {
		return l, errString("unix sockets are not supported")
	}
	host, portText := "", ""
	switch {
	case text == "" || strings.HasPrefix(text, ":"):
		return l, errString("no host")
	case isDigits(text):
		portText = text
	case strings.HasPrefix(text, "["):
		end := strings.Index(text, "]")
		if end < 0 {
			return l, errString("missing ]")
		}
		host, portText = text[1:end], "80"
		if rest := text[end+1:]; rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return l, errString("invalid address")
			}
			portText = rest[1:]
		}
	default:
		host, portText = text, "80"
		if i := strings.LastIndexByte(text, ':'); i >= 0 {
			host, portText = text[:i], text[i+1:]
		}
	}
	port, err := strconv.Atoi(portText)
	if err != nil || !isDigits(portText) || port < 1 || port > 65535 {
		return l, errString("invalid port")
	}
	var addr netip.Addr
	switch host {
	case "", "*":
		addr = netip.IPv4Unspecified()
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			addr = a.Unmap()
		} else if ips, err := lookupIP(host); err == nil && len(ips) > 0 {
			// nginx listens on the host's first address; do the same, IPv4 preferred.
			addr, _ = netip.AddrFromSlice(ips[0])
			for _, ip := range ips {
				if v4 := ip.To4(); v4 != nil {
					addr, _ = netip.AddrFromSlice(v4)
					break
				}
			}
			addr = addr.Unmap()
		} else {
			return l, fmt.Errorf("host not found in %q", text)
		}
	}
	l.Addr = netip.AddrPortFrom(addr, uint16(port))
	return l, nil
}

// lookupIP resolves listen host names; tests replace it to stay off the network.
var lookupIP = net.LookupIP

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func setServerName(c *Cursor, s *Stmt) error {
	for _, a := range s.Args {
		names, err := parseServerName(a.Value)
		var pe *pcre.Error
		if errors.As(err, &pe) {
			return &Error{Pos: a.Pos, Msg: err.Error(), Err: err}
		} else if err != nil {
			return s.InvalidValue(a, err.Error())
		}
		for i := range names {
			names[i].Pos = a.Pos
		}
		c.Server.Names = append(c.Server.Names, names...)
	}
	return nil
}

// parseServerName reads one server_name argument; ".example.com" gives two names.
func parseServerName(v string) ([]ServerName, error) {
	if strings.HasPrefix(v, "~") {
		// nginx compiles server names caselessly: Host is matched lower-cased.
		re, err := pcre.Compile(v[1:], true)
		if err != nil {
			return nil, regexError(err)
		}
		return []ServerName{{Kind: NameRegex, Name: v[1:], Regex: re}}, nil
	}
	name := strings.ToLower(v)
	if strings.ContainsAny(name, "/ \t") {
		return nil, errString("server name contains a space or slash")
	}
	stars := strings.Count(name, "*")
	switch {
	case stars == 0 && strings.HasPrefix(name, ".") && len(name) > 1:
		return []ServerName{{Kind: NameExact, Name: name[1:]}, {Kind: NameWildcardPrefix, Name: name[1:]}}, nil
	case stars == 0:
		return []ServerName{{Kind: NameExact, Name: name}}, nil
	case stars == 1 && strings.HasPrefix(name, "*.") && len(name) > 2:
		return []ServerName{{Kind: NameWildcardPrefix, Name: name[2:]}}, nil
	case stars == 1 && strings.HasSuffix(name, ".*") && len(name) > 2:
		return []ServerName{{Kind: NameWildcardSuffix, Name: name[:len(name)-2]}}, nil
	}
	return nil, errString("invalid server name or wildcard")
}

func setLocation(c *Cursor, s *Stmt) error {
	loc, err := parseLocation(s)
	if err != nil {
		return err
	}
	loc.Pos, loc.Parent = s.Pos, c.Location
	if err := checkNesting(c.Location, loc); err != nil {
		return s.Errorf("%s", err)
	}
	siblings := &c.Server.Locations
	if c.Location != nil {
		siblings = &c.Location.Locations
	}
	for _, other := range *siblings {
		if sameLocation(other, loc) {
			return s.Errorf("duplicate location %q", loc.Path)
		}
	}
	*siblings = append(*siblings, loc)
	loc.confs = newHTTPConfs(c.p.reg)
	child := *c
	child.Location = loc
	return child.parseHTTPBlock(LocationCtx, loc.confs)
}

// parseLocation reads the modifier and path, including nginx's joined forms
// "=/path", "~re", "~*re" and "@name".
func parseLocation(s *Stmt) (*Location, error) {
	loc := &Location{}
	var path Token
	if len(s.Args) == 2 {
		path = s.Args[1]
		switch s.Args[0].Value {
		case "=":
			loc.Kind = LocExact
		case "^~":
			loc.Kind = LocPrefixNoRegex
		case "~":
			loc.Kind = LocRegex
		case "~*":
			loc.Kind = LocRegexCaseless
		default:
			return nil, &Error{Pos: s.Args[0].Pos, Msg: fmt.Sprintf("invalid location modifier %q", s.Args[0].Value)}
		}
	} else {
		path = s.Args[0]
		v := path.Value
		switch {
		case strings.HasPrefix(v, "="):
			loc.Kind, path.Value = LocExact, v[1:]
		case strings.HasPrefix(v, "~*"):
			loc.Kind, path.Value = LocRegexCaseless, v[2:]
		case strings.HasPrefix(v, "~"):
			loc.Kind, path.Value = LocRegex, v[1:]
		case strings.HasPrefix(v, "@"):
			loc.Kind = LocNamed
		}
	}
	loc.Path = path.Value
	if loc.Path == "" || (loc.Kind == LocNamed && len(loc.Path) == 1) {
		return nil, s.InvalidValue(path, "empty location")
	}
	if loc.Kind == LocRegex || loc.Kind == LocRegexCaseless {
		re, err := pcre.Compile(loc.Path, loc.Kind == LocRegexCaseless)
		if err != nil {
			return nil, &Error{Pos: path.Pos, Msg: regexError(err).Error(), Err: err}
		}
		loc.Regex = re
	}
	return loc, nil
}

// regexError is nginx's message for a pattern that does not compile; pcre's own
// says what RE2 cannot do. The caller adds file:line.
func regexError(err error) error {
	var pe *pcre.Error
	if errors.As(err, &pe) {
		return fmt.Errorf("pcre2_compile() failed: %w", pe)
	}
	return err
}

// CompileRegex compiles a directive's regular expression with pcre, the error
// positioned at the argument, for modules (rewrite, if, map).
func CompileRegex(arg Token, caseless bool) (*pcre.Regexp, error) {
	re, err := pcre.Compile(arg.Value, caseless)
	if err != nil {
		return nil, &Error{Pos: arg.Pos, Msg: regexError(err).Error(), Err: err}
	}
	return re, nil
}

// ParseIf parses the { } of an "if" directive standing at c, as nginx's
// ngx_http_rewrite_if: inside a location (or a location's if) the block is an
// implicit location (LocIf) nested in it, parsed in LocIfCtx; inside a server (or
// a server's if) it is parsed in SrvIfCtx with configs of its own. It returns the
// location (nil in a server) and the calling module's config of the block.
func (c *Cursor) ParseIf(s *Stmt) (*Location, any, error) {
	child := *c
	child.Block, child.seen = nil, map[string]bool{}
	child.confs = newHTTPConfs(c.p.reg)
	var loc *Location
	if c.Location != nil && c.Ctx&(LocationCtx|LocIfCtx) != 0 {
		loc = &Location{Kind: LocIf, Path: c.Location.Path, Parent: c.Location, Pos: s.Pos, confs: child.confs}
		c.Location.Locations = append(c.Location.Locations, loc)
		child.Location, child.Ctx = loc, LocIfCtx
	} else {
		child.Ctx = SrvIfCtx
	}
	if err := c.p.parseBlock(&child, true); err != nil {
		return nil, nil, err
	}
	return loc, child.confs.get(c.module), nil
}

// ParseLimitExcept parses the { } of a "limit_except" directive standing in the
// location at c, as nginx's ngx_http_core_limit_except: the block is an implicit
// location (LocLimitExcept) nested in it, parsed in LmtCtx.
func (c *Cursor) ParseLimitExcept(s *Stmt) (*Location, error) {
	child := *c
	child.Block, child.seen = nil, map[string]bool{}
	child.confs = newHTTPConfs(c.p.reg)
	loc := &Location{Kind: LocLimitExcept, Path: c.Location.Path, Regex: c.Location.Regex, Parent: c.Location, Pos: s.Pos, confs: child.confs}
	c.Location.Locations = append(c.Location.Locations, loc)
	child.Location, child.Ctx = loc, LmtCtx
	if err := c.p.parseBlock(&child, true); err != nil {
		return nil, err
	}
	return loc, nil
}

// checkNesting applies nginx's rules for a location inside another.
func checkNesting(parent, loc *Location) error {
	if parent == nil {
		return nil
	}
	switch {
	case loc.Kind == LocNamed:
		return fmt.Errorf("named location %q can be on the server level only", loc.Path)
	case parent.Kind == LocExact:
		return fmt.Errorf("location %q cannot be inside the exact location %q", loc.Path, parent.Path)
	case parent.Kind == LocNamed:
		return fmt.Errorf("location %q cannot be inside the named location %q", loc.Path, parent.Path)
	case (parent.Kind == LocPrefix || parent.Kind == LocPrefixNoRegex) &&
		(loc.Kind == LocPrefix || loc.Kind == LocPrefixNoRegex || loc.Kind == LocExact) &&
		!strings.HasPrefix(loc.Path, parent.Path):
		return fmt.Errorf("location %q is outside location %q", loc.Path, parent.Path)
	}
	return nil
}

// sameLocation reports two siblings nginx would call duplicates: the same prefix (with
// or without ^~), the same exact path, or the same name.
func sameLocation(a, b *Location) bool {
	if a.Path != b.Path {
		return false
	}
	prefix := func(k LocationKind) bool { return k == LocPrefix || k == LocPrefixNoRegex }
	return (prefix(a.Kind) && prefix(b.Kind)) || (a.Kind == b.Kind && (a.Kind == LocExact || a.Kind == LocNamed))
}

// finishHTTP gives listen-less servers nginx's default, checks listen sockets across
// servers and merges module configs down the levels.
func finishHTTP(cfg *Config) error {
	h := cfg.HTTP
	type sockOpts struct {
		listen     Listen
		hasDefault bool
	}
	socks := map[netip.AddrPort]*sockOpts{}
	for _, srv := range h.Servers {
		if len(srv.Listens) == 0 {
			srv.Listens = []Listen{{Addr: netip.AddrPortFrom(netip.IPv4Unspecified(), 80), Text: "*:80", Pos: srv.Pos}}
		}
		seen := map[netip.AddrPort]bool{}
		for _, l := range srv.Listens {
			if seen[l.Addr] {
				return errorf(l.Pos, "duplicate listen %s", l.Text)
			}
			seen[l.Addr] = true
			so := socks[l.Addr]
			if so == nil {
				so = &sockOpts{listen: l}
				socks[l.Addr] = so
			} else if hasSocketOptions(l) && hasSocketOptions(so.listen) {
				return errorf(l.Pos, "duplicate listen options for %s", l.Addr)
			} else if hasSocketOptions(l) {
				so.listen = l
			}
			if l.DefaultServer {
				if so.hasDefault {
					return errorf(l.Pos, "a duplicate default server for %s", l.Addr)
				}
				so.hasDefault = true
			}
		}
	}
	for _, m := range cfg.registry.modules {
		if m.MergeHTTP == nil {
			continue
		}
		for _, srv := range h.Servers {
			if err := at(srv.Pos, m.MergeHTTP(h.confs.get(m), srv.confs.get(m))); err != nil {
				return err
			}
			if err := mergeLocations(m, srv.confs.get(m), srv.Locations); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasSocketOptions reports a listen that sets options of the socket itself, which
// nginx allows once per address.
func hasSocketOptions(l Listen) bool {
	return l.ReusePort || l.Bind || l.Socket != SocketOptions{}
}

// parseSoKeepalive reads so_keepalive=on|off|[keepidle]:[keepintvl]:[keepcnt], the
// times in nginx's units (a bare number is seconds).
func parseSoKeepalive(val string, o *SocketOptions) error {
	switch val {
	case "on":
		o.KeepAlive = 1
		return nil
	case "off":
		o.KeepAlive = -1
		return nil
	}
	parts := strings.Split(val, ":")
	if len(parts) != 3 || parts[0]+parts[1]+parts[2] == "" {
		return errString("invalid")
	}
	for i, p := range parts {
		if p == "" {
			continue
		}
		var n int
		if i < 2 {
			d, err := ParseTime(p)
			if err != nil || d < time.Second || d%time.Second != 0 {
				return errString("invalid")
			}
			n = int(d / time.Second)
		} else {
			v, err := ParseNumber(p)
			if err != nil || v < 1 {
				return errString("invalid")
			}
			n = v
		}
		*[]*int{&o.KeepIdle, &o.KeepIntvl, &o.KeepCnt}[i] = n
	}
	o.KeepAlive = 1
	return nil
}

func mergeLocations(m *Module, parent any, locs []*Location) error {
	for _, loc := range locs {
		if err := at(loc.Pos, m.MergeHTTP(parent, loc.confs.get(m))); err != nil {
			return err
		}
		if err := mergeLocations(m, loc.confs.get(m), loc.Locations); err != nil {
			return err
		}
	}
	return nil
}
