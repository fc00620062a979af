package upstream

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/resolver"
)

// Module declares the upstream block and its directives.
var Module = &conf.Module{
	Name: "upstream",
	Directives: []conf.Directive{
		{Name: "upstream", Contexts: conf.HTTPCtx, Args: conf.Args1, Block: true, Multi: true, Set: setUpstream,
			Syntax: "upstream name { ... }",
			Doc:    "A group of servers that proxy_pass can name."},
		{Name: "server", Contexts: conf.UpstreamCtx, Args: conf.Args1More, Multi: true, Set: setServer,
			Syntax: "server address [weight=number] [max_fails=number] [fail_timeout=time] [max_conns=number] [backup] [down] [resolve] [slow_start=time] [route=string];",
			Doc:    "A server of the group: host:port, [v6]:port, host (port 80) or unix:/path (a unix-domain socket); a name resolving to several addresses gives several servers. Defaults: weight=1 max_fails=1 fail_timeout=10s; max_conns counts per loop. resolve (with zone in the group, nginx 1.27.3+): the name is looked up at run time with the group's resolver and again when its answer expires (TTL or valid=, plus a second); servers come and go with its addresses without a reload, requests in flight keep theirs, idle keep-alive connections to a removed address are closed. A name that does not resolve leaves the group without those servers (502 until it does); another failure keeps the last addresses and asks again after resolver_timeout. Each loop asks and keeps these servers' failure state for itself. slow_start (NGINX Plus): after the server recovers (its health check passes again, or a request succeeds after fail_timeout) its weight grows from 1 to its own over this time; round robin and least_conn's ties only, ignored for a lone server. route (NGINX Plus): the server's value in a sticky cookie instead of the MD5 of its address."},
		{Name: "keepalive", Contexts: conf.UpstreamCtx, Args: conf.Args1, Set: setGroupNumber(func(g *Group) *int { return &g.Keepalive }, 1),
			Syntax: "keepalive connections;",
			Doc:    "Idle connections to the group's servers each loop keeps for reuse."},
		{Name: "keepalive_timeout", Contexts: conf.UpstreamCtx, Args: conf.Args1, Set: setGroupKeepaliveTimeout,
			Syntax: "keepalive_timeout time;", Default: "60s",
			Doc: "How long an idle upstream connection is kept."},
		{Name: "keepalive_requests", Contexts: conf.UpstreamCtx, Args: conf.Args1, Set: setGroupNumber(func(g *Group) *int { return &g.KeepaliveRequests }, 1),
			Syntax: "keepalive_requests number;", Default: "1000",
			Doc: "Requests one upstream connection serves before it is closed."},
		{Name: "least_conn", Contexts: conf.UpstreamCtx, Args: conf.Args0, Set: setMethod,
			Syntax: "least_conn;",
			Doc:    "Send each request to the server with the fewest active connections for its weight."},
		{Name: "ip_hash", Contexts: conf.UpstreamCtx, Args: conf.Args0, Set: setMethod,
			Syntax: "ip_hash;",
			Doc:    "Pick the server from the client address (first three octets of IPv4), so a client keeps its server."},
		{Name: "hash", Contexts: conf.UpstreamCtx, Args: conf.Args1 | conf.Args2, Set: setMethod,
			Syntax: "hash key [consistent];",
			Doc:    "Pick the server from a key with variables; consistent uses a ketama ring so few keys move when servers change."},
		{Name: "zone", Contexts: conf.UpstreamCtx, Args: conf.Args1 | conf.Args2, Set: setZone,
			Syntax: "zone name [size];",
			Doc:    "Required, as nginx 1.27.3+, by servers with resolve. numaproxy keeps every group in process memory that all loops share, so the zone holds nothing and its size (checked as nginx does) limits nothing."},
		{Name: "resolver", Contexts: conf.UpstreamCtx, Args: conf.Args1More, Set: setGroupResolver,
			Syntax: "resolver address ... [valid=time] [ipv4=on|off] [ipv6=on|off] [status_zone=zone];",
			Doc:    "The name servers of the group's servers with resolve (nginx 1.27.3+); without it the http level's resolver."},
		{Name: "resolver_timeout", Contexts: conf.UpstreamCtx, Args: conf.Args1, Set: setGroupResolverTimeout,
			Syntax: "resolver_timeout time;", Default: "30s",
			Doc: "Longest time a lookup of the group's names may take; without it the http level's resolver_timeout."},
		{Name: "sticky", Contexts: conf.UpstreamCtx, Args: conf.Args1More, Set: setSticky,
			Syntax: "sticky cookie name [expires=time|max] [domain=domain] [httponly] [samesite=strict|lax|none] [secure] [path=path];",
			Doc:    "NGINX Plus's session persistence: a response to a client without the cookie (or whose cookie names a server that is not available) sets it to the server that answered (the hexadecimal MD5 of its address, or its route=), and later requests with it go to that server while it is available, else to the one the balancing method picks, which the response then names. Without expires the cookie lasts the browser session; max is 31 Dec 2037. sticky route and sticky learn are refused."},
		{Name: "random", Contexts: conf.UpstreamCtx, Args: conf.Args0 | conf.Args1 | conf.Args2, Set: setMethod,
			Syntax: "random [two [least_conn]];",
			Doc:    "Pick a server at random by weight; two: of two random picks, the one with fewer connections."},
	},
	NewMain: func() any { return &Groups{byName: map[string]*Group{}} },
	Check:   check,
}

// Groups are the upstream groups of one snapshot, declared and implicit.
type Groups struct {
	List   []*Group
	byName map[string]*Group
}

// Lookup returns the declared or implicit group called name.
func (gs *Groups) Lookup(name string) *Group { return gs.byName[name] }

// GroupsOf returns cfg's upstream groups.
func GroupsOf(cfg *conf.Config) *Groups { return cfg.MainConf(Module).(*Groups) }

// lookupIP resolves server names; tests replace it to stay off the network.
var lookupIP = net.LookupIP

func setUpstream(c *conf.Cursor, s *conf.Stmt) error {
	gs := c.MainConf().(*Groups)
	name := s.Args[0].Value
	if g := gs.byName[name]; g != nil && !g.Implicit {
		return s.Errorf("duplicate upstream %q", name)
	}
	g := &Group{Name: name, Pos: s.Pos, KeepaliveTimeout: 60 * time.Second, KeepaliveRequests: 1000}
	gs.byName[name] = g
	gs.List = append(gs.List, g)
	if err := c.ParseBlock(conf.UpstreamCtx, g); err != nil {
		return err
	}
	if len(g.Peers)+len(g.Backup)+len(g.Resolve) == 0 {
		return s.Errorf("no servers are inside upstream")
	}
	return g.finish()
}

func setZone(c *conf.Cursor, s *conf.Stmt) error {
	g := c.Block.(*Group)
	name := s.Args[0].Value
	if name == "" {
		return s.Errorf("invalid zone name %q", name)
	}
	if len(s.Args) == 2 {
		n, err := conf.ParseSize(s.Args[1].Value)
		if err != nil {
			return s.Errorf("invalid zone size %q", s.Args[1].Value)
		}
		if n < 8*int64(os.Getpagesize()) {
			return s.Errorf("zone %q is too small", name)
		}
	}
	g.Zone = name
	return nil
}

func setGroupResolver(c *conf.Cursor, s *conf.Stmt) error {
	g := c.Block.(*Group)
	cfg, err := resolver.ParseResolver(s)
	if err != nil {
		return err
	}
	g.Resolver = &cfg
	return nil
}

func setGroupResolverTimeout(c *conf.Cursor, s *conf.Stmt) error {
	d, err := resolver.ParseTimeout(s)
	if err != nil {
		return err
	}
	c.Block.(*Group).ResolverTimeout = d
	return nil
}

// finish numbers the peers and builds what the method needs.
func (g *Group) finish() error {
	if len(g.Peers) == 0 && len(g.Resolve) == 0 {
		return &conf.Error{Pos: g.Pos, Msg: fmt.Sprintf("upstream %q has only backup servers", g.Name)}
	}
	if len(g.Peers)+len(g.Backup) > maxPeers {
		return &conf.Error{Pos: g.Pos, Msg: fmt.Sprintf("upstream %q has more than %d servers", g.Name, maxPeers)}
	}
	g.tries = 0
	for i, p := range g.all() {
		p.index = i
		p.setRoute()
		if !p.Down {
			g.tries++
		}
	}
	g.single = len(g.Peers) == 1 && len(g.Backup) == 0
	if g.Method == HashConsistent {
		g.buildRing()
	}
	return nil
}

func setServer(c *conf.Cursor, s *conf.Stmt) error {
	g := c.Block.(*Group)
	var addrs []netip.AddrPort
	var rs *ResolveServer
	unixPath, err := unixSocketPath(s.Args[0].Value)
	if err == nil && unixPath == "" {
		if hasArg(s, "resolve") {
			rs, addrs, err = resolveLater(s.Args[0].Value)
		} else {
			addrs, err = resolve(s.Args[0].Value)
		}
	}
	if err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	}
	if unixPath != "" {
		addrs = []netip.AddrPort{{}}
	}
	tmpl := PeerConfig{Name: s.Args[0].Value, Weight: 1, MaxFails: 1, FailTimeout: 10 * time.Second, Pos: s.Pos}
	if !strings.Contains(tmpl.Name, ":") || strings.HasSuffix(tmpl.Name, "]") {
		tmpl.Name += ":80"
	}
	for _, a := range s.Args[1:] {
		key, val, hasVal := strings.Cut(a.Value, "=")
		var n int
		if hasVal && (key == "weight" || key == "max_fails" || key == "max_conns") {
			if n, err = conf.ParseNumber(val); err != nil {
				return s.InvalidValue(a, "")
			}
		}
		switch {
		case hasVal && key == "weight" && n >= 1:
			tmpl.Weight = n
		case hasVal && key == "max_fails":
			tmpl.MaxFails = n
		case hasVal && key == "max_conns":
			tmpl.MaxConns = n
		case hasVal && key == "route" && val != "":
			tmpl.RouteParam = val
		case hasVal && key == "slow_start":
			d, err := conf.ParseTime(val)
			if err != nil {
				return s.InvalidValue(a, "")
			}
			tmpl.SlowStart = d
		case hasVal && key == "fail_timeout":
			d, err := conf.ParseTime(val)
			if err != nil {
				return s.InvalidValue(a, "")
			}
			tmpl.FailTimeout = d
		case !hasVal && key == "backup":
			tmpl.Backup = true
		case !hasVal && key == "down":
			tmpl.Down = true
		case !hasVal && key == "resolve":
			// a name is looked up at run time (rs); an address stays as it is
		default:
			return &conf.Error{Pos: a.Pos, Msg: fmt.Sprintf("invalid parameter %q", a.Value)}
		}
	}
	if rs != nil {
		rs.PeerConfig = tmpl
		g.Resolve = append(g.Resolve, rs)
		return nil
	}
	for _, addr := range addrs {
		p := &Peer{Addr: addr, Unix: unixPath, PeerConfig: tmpl}
		if p.Backup {
			g.Backup = append(g.Backup, p)
		} else {
			g.Peers = append(g.Peers, p)
		}
	}
	return nil
}

// unixSocketPath returns the path of a "unix:/path" address, "" for another kind.
func unixSocketPath(text string) (string, error) {
	if len(text) < 5 || !strings.EqualFold(text[:5], "unix:") { // any case, as nginx
		return "", nil
	}
	path := text[5:]
	switch {
	case path == "":
		return "", fmt.Errorf("no path in the unix domain socket")
	case len(path) >= len(unix.RawSockaddrUnix{}.Path):
		return "", fmt.Errorf("too long path in the unix domain socket")
	}
	return path, nil
}

func hasArg(s *conf.Stmt, v string) bool {
	for _, a := range s.Args[1:] {
		if a.Value == v {
			return true
		}
	}
	return false
}

// resolveLater reads the address of a server with resolve: a name is left for
// run time (nginx's no_resolve), an IP address is used as it is.
func resolveLater(text string) (*ResolveServer, []netip.AddrPort, error) {
	host, port, err := splitHostPort(text)
	if err != nil {
		return nil, nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return nil, []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), port)}, nil
	}
	return &ResolveServer{Host: host, Port: port}, nil, nil
}

// splitHostPort reads "host:port", "[v6]:port" or "host" (port 80).
func splitHostPort(text string) (string, uint16, error) {
	host, portText := text, "80"
	if strings.HasPrefix(text, "[") {
		end := strings.IndexByte(text, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("missing ]")
		}
		host = text[1:end]
		if rest := text[end+1:]; rest != "" {
			if rest[0] != ':' {
				return "", 0, fmt.Errorf("invalid address")
			}
			portText = rest[1:]
		}
	} else if i := strings.LastIndexByte(text, ':'); i >= 0 {
		host, portText = text[:i], text[i+1:]
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("invalid address or port")
	}
	return host, uint16(port), nil
}

// resolve turns "host:port", "[v6]:port", "host" (port 80) into addresses.
func resolve(text string) ([]netip.AddrPort, error) {
	host, port, err := splitHostPort(text)
	if err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), uint16(port))}, nil
	}
	ips, err := lookupIP(host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("host not found")
	}
	var out []netip.AddrPort
	seen := map[netip.Addr]bool{}
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip)
		if !ok || seen[a.Unmap()] {
			continue
		}
		seen[a.Unmap()] = true
		out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(port)))
	}
	return out, nil
}

func setGroupNumber(field func(*Group) *int, min int) func(c *conf.Cursor, s *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		n, err := conf.ParseNumber(s.Args[0].Value)
		if err != nil || n < min {
			return s.InvalidValue(s.Args[0], "")
		}
		*field(c.Block.(*Group)) = n
		return nil
	}
}

func setGroupKeepaliveTimeout(c *conf.Cursor, s *conf.Stmt) error {
	d, err := conf.ParseTime(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	c.Block.(*Group).KeepaliveTimeout = d
	return nil
}

func setMethod(c *conf.Cursor, s *conf.Stmt) error {
	g := c.Block.(*Group)
	if g.methodSet {
		c.Warn(s.Pos, "load balancing method redefined")
	}
	g.methodSet = true
	switch s.Name {
	case "least_conn":
		g.Method = LeastConn
	case "ip_hash":
		g.Method = IPHash
	case "hash":
		g.Method, g.HashKey = Hash, s.Args[0].Value
		if len(s.Args) == 2 {
			if s.Args[1].Value != "consistent" {
				return s.InvalidValue(s.Args[1], `it must be "consistent"`)
			}
			g.Method = HashConsistent
		}
	case "random":
		g.Method = Random
		if len(s.Args) >= 1 {
			if s.Args[0].Value != "two" {
				return s.InvalidValue(s.Args[0], `it must be "two"`)
			}
			g.Method = RandomTwo
		}
		if len(s.Args) == 2 && s.Args[1].Value != "least_conn" {
			return s.InvalidValue(s.Args[1], `it must be "least_conn"`)
		}
	}
	return nil
}

// check rejects what the methods cannot do; it runs once the whole file is read, so
// the order of "server ... backup" and the method directive does not matter.
func check(cfg *conf.Config, self *conf.Module) error {
	for _, g := range cfg.MainConf(self).(*Groups).List {
		if err := g.checkResolve(cfg); err != nil {
			return err
		}
		backup := g.Backup
		for _, rs := range g.Resolve {
			if rs.Backup {
				backup = append(backup, &Peer{PeerConfig: rs.PeerConfig})
			}
		}
		if len(backup) > 0 && g.Method != RoundRobin && g.Method != LeastConn {
			return &conf.Error{Pos: backup[0].Pos, Msg: fmt.Sprintf("the \"backup\" parameter cannot be used with the %q balancing method", g.Method.String())}
		}
		for _, p := range append(g.all(), resolvePeers(g)...) {
			if p.SlowStart > 0 && g.Method != RoundRobin && g.Method != LeastConn {
				return &conf.Error{Pos: p.Pos, Msg: fmt.Sprintf("the \"slow_start\" parameter cannot be used with the %q balancing method", g.Method.String())}
			}
		}
		if g.Method == HashConsistent && len(g.points) == 0 {
			g.buildRing()
		}
	}
	return nil
}

func resolvePeers(g *Group) []*Peer {
	var ps []*Peer
	for _, rs := range g.Resolve {
		ps = append(ps, &Peer{PeerConfig: rs.PeerConfig})
	}
	return ps
}

// ForProxyPass returns the group a proxy_pass to hostport uses: a declared upstream
// when hostport is its name (no port given), else an implicit group of the addresses
// hostport resolves to, shared by every proxy_pass naming it. Call it from a Check
// function, while the snapshot is being built.
func ForProxyPass(cfg *conf.Config, hostport string, hasPort bool) (*Group, error) {
	gs := GroupsOf(cfg)
	unixPath, err := unixSocketPath(hostport)
	if err != nil {
		return nil, fmt.Errorf("%v in upstream %q", err, hostport)
	}
	if !hasPort && unixPath == "" {
		if g := gs.byName[hostport]; g != nil && !g.Implicit {
			return g, nil
		}
	}
	key := hostport
	if !hasPort && unixPath == "" {
		key += ":80"
	}
	if g := gs.byName["implicit "+key]; g != nil {
		return g, nil
	}
	addrs := []netip.AddrPort{{}}
	if unixPath == "" {
		if addrs, err = resolve(key); err != nil {
			return nil, fmt.Errorf("host not found in upstream %q", hostport)
		}
	}
	g := &Group{Name: hostport, Implicit: true, KeepaliveTimeout: 60 * time.Second, KeepaliveRequests: 1000}
	for _, a := range addrs {
		// nginx gives implicit peers max_fails=1 fail_timeout=10s like declared ones.
		g.Peers = append(g.Peers, &Peer{Addr: a, Unix: unixPath, PeerConfig: PeerConfig{Name: key, Weight: 1, MaxFails: 1, FailTimeout: 10 * time.Second}})
	}
	if err := g.finish(); err != nil {
		return nil, err
	}
	gs.byName["implicit "+key] = g
	gs.List = append(gs.List, g)
	return g, nil
}

// checkResolve gives a group with servers to resolve at run time its resolver
// (its own or the http level's) and resolver_timeout, with nginx's errors.
func (g *Group) checkResolve(cfg *conf.Config) error {
	if len(g.Resolve) == 0 {
		return nil
	}
	where := fmt.Sprintf("upstream %q in %s:%d", g.Name, g.Pos.File, g.Pos.Line)
	if g.Zone == "" {
		return &conf.Error{Pos: g.Pos, Msg: "resolving names at run time requires " + where + " to be in shared memory"}
	}
	top := &resolver.LocConf{}
	if cfg.HTTP != nil {
		top = resolver.HTTPConf(cfg.HTTP)
	}
	if g.Resolver == nil {
		g.Resolver = top.Resolver
	}
	if g.ResolverTimeout == 0 {
		g.ResolverTimeout = top.Timeout
	}
	if g.ResolverTimeout == 0 {
		g.ResolverTimeout = 30 * time.Second
	}
	if g.Resolver == nil {
		return &conf.Error{Pos: g.Pos, Msg: "no resolver defined to resolve names at run time in " + where}
	}
	return nil
}
