package proxy

import (
	"net/netip"
	"slices"
	"strconv"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/resolver"
	"github.com/numaproxy/numaproxy/upstream"
)

// varTarget is where a proxy_pass made of variables sends one request, nginx's
// ngx_http_proxy_eval and the upstream's resolved target: the evaluated URL, its
// parts, and the name lookup. It belongs to an exchange and is kept across the
// requests the exchange serves, so that its buffers are reused.
type varTarget struct {
	query      resolver.Query
	url        []byte // the evaluated URL
	hostHeader []byte // $proxy_host: host, with the port unless it is 80
	uri        []byte // the URI part; empty when the URL has none
	host       string // the name looked up; kept while the bytes are the same
	port       uint16
	key        []byte // scratch: lower-case lookup keys
	addrs      []netip.AddrPort
	inSelect   bool            // selectTarget runs: Resolved leaves the rest to it
	status     httpcore.Status // a failure Resolved met within selectTarget
}

// maxDynGroups bounds the groups a loop keeps for targets found at run time (the
// name comes from the request: a client may make up any number).
const maxDynGroups = 256

// dynGroup is a loop's group for one target found at run time, kept while its
// addresses stay the same, so that a steady target costs no allocation.
type dynGroup struct {
	addrs []netip.AddrPort // sorted
	g     *upstream.Group
	bal   *upstream.Balancer
}

// selectTarget evaluates the location's proxy_pass URL for the request and picks
// its group: an upstream block it names, its IP address, or its name looked up
// with the location's resolver. It returns 0 with ex.g set, 0 with ex.g nil while
// the lookup runs (Resolved goes on), or the status to answer.
func (ex *exchange) selectTarget() httpcore.Status {
	r, vt := ex.r, ex.vt
	vt.url = ex.lc.Pass.Value.Append(vt.url[:0], r)
	url := vt.url
	if len(url) <= 7 || !http1.EqualFold(url[:7], "http://") {
		ex.st.log.Error("invalid URL prefix in \""+string(url)+"\"", "client", r.RemoteAddr().String())
		return 500
	}
	rest := url[7:]
	host, port, uri, unixPath, errText := parseURL(rest)
	if errText != "" {
		ex.st.log.Error(errText+" in upstream \""+string(rest)+"\"", "client", r.RemoteAddr().String())
		return 500
	}
	vt.uri = vt.uri[:0]
	if len(uri) > 0 && uri[0] == '?' {
		vt.uri = append(vt.uri, '/') // as nginx: "http://h?a" asks for "/?a"
	}
	vt.uri = append(vt.uri, uri...)
	vt.hostHeader = vt.hostHeader[:0]
	switch {
	case unixPath != nil:
		vt.hostHeader = append(vt.hostHeader, "localhost"...)
	case port == nil || string(port) == "80":
		vt.hostHeader = append(vt.hostHeader, host...)
	default:
		vt.hostHeader = append(append(append(vt.hostHeader, host...), ':'), port...)
	}
	vt.port = 80
	if port != nil {
		n, _ := parsePort(port) // checked by parseURL
		vt.port = uint16(n)
	}
	if string(host) != vt.host {
		vt.host = string(host)
	}

	// An upstream block named so (without a port), or the group of a proxy_pass
	// elsewhere to the same host and port, as nginx's search of its upstreams.
	if unixPath == nil {
		if g := ex.snapState().targetGroup(vt, port == nil); g != nil {
			if !ex.useGroup(g) {
				ex.g = nil // begin follows the group's first lookups
			}
			return 0
		}
	}
	switch {
	case unixPath != nil:
		ex.useAddrs(nil, string(unixPath))
		return 0
	case host[0] == '[':
		a, _ := netip.ParseAddr(string(host[1 : len(host)-1])) // checked by parseURL
		vt.addrs = append(vt.addrs[:0], netip.AddrPortFrom(a.Unmap(), vt.port))
		ex.useAddrs(vt.addrs, "")
		return 0
	}
	if a, ok := parseIPv4(host); ok {
		vt.addrs = append(vt.addrs[:0], netip.AddrPortFrom(a, vt.port))
		ex.useAddrs(vt.addrs, "")
		return 0
	}
	res, timeout := resolver.For(r)
	if res == nil {
		ex.st.log.Error("no resolver defined to resolve "+vt.host, "client", r.RemoteAddr().String())
		return 502
	}
	vt.query.Timeout = timeout
	vt.status, vt.inSelect = 0, true
	res.Resolve(&vt.query, vt.host, ex) // a cached answer calls Resolved now
	vt.inSelect = false
	return vt.status
}

// Resolved takes the outcome of the target's lookup and goes on with the request
// (selectTarget does when the answer came at once).
func (ex *exchange) Resolved(_ *resolver.Query, res resolver.Result) {
	r, vt := ex.r, ex.vt
	if res.Err != nil {
		// nginx's line, whatever the failure, a timeout included, and its 502.
		ex.st.log.Error(res.Err.Error(), "client", r.RemoteAddr().String())
		if vt.inSelect {
			vt.status = 502
			return
		}
		ex.end()
		r.Fail(502)
		return
	}
	vt.addrs = vt.addrs[:0]
	for _, a := range res.Addrs {
		vt.addrs = append(vt.addrs, netip.AddrPortFrom(a, vt.port))
	}
	ex.useAddrs(vt.addrs, "")
	if !vt.inSelect {
		ex.begin()
	}
}

// useAddrs makes the exchange use the loop's group for the target's addresses.
func (ex *exchange) useAddrs(addrs []netip.AddrPort, unixPath string) {
	vt, st := ex.vt, ex.st
	slices.SortFunc(addrs, func(a, b netip.AddrPort) int { return a.Compare(b) })
	vt.key = append(append(append(vt.key[:0], vt.hostHeader...), ' '), unixPath...)
	vt.key = strconv.AppendUint(append(vt.key, ' '), uint64(vt.port), 10)
	dg := st.dyn[string(vt.key)]
	if dg == nil || !slices.Equal(dg.addrs, addrs) {
		if dg == nil {
			if len(st.dyn) >= maxDynGroups {
				for k := range st.dyn {
					delete(st.dyn, k)
					break
				}
			}
			dg = &dynGroup{}
			st.dyn[string(vt.key)] = dg
		}
		name := string(vt.hostHeader)
		if unixPath != "" {
			name = "unix:" + unixPath
		} else if len(name) == len(vt.host) {
			name += ":80"
		}
		dg.addrs = slices.Clone(addrs)
		dg.g = upstream.NewAddrGroup(name, dg.addrs, unixPath)
		dg.bal = dg.g.NewBalancer(uint64(st.w.Loop().CPU() + 1))
	}
	ex.g, ex.bal = dg.g, dg.bal
}

// targetGroup is the group a target names: an upstream block (a host without a
// port), or the group of a proxy_pass elsewhere to the same host and port. As
// nginx, names compare in any case.
func (s *snapState) targetGroup(vt *varTarget, noPort bool) *upstream.Group {
	if noPort {
		vt.key = appendLower(append(vt.key[:0], '='), vt.host)
		if g := s.targets[string(vt.key)]; g != nil {
			return g
		}
	}
	vt.key = appendLower(vt.key[:0], vt.host)
	vt.key = strconv.AppendUint(append(vt.key, ':'), uint64(vt.port), 10)
	return s.targets[string(vt.key)]
}

// targetKeys indexes a snapshot's groups for targetGroup: "=name" for upstream
// blocks, "host:port" for the groups of proxy_pass URLs.
func targetKeys(gs *upstream.Groups) map[string]*upstream.Group {
	m := map[string]*upstream.Group{}
	for _, g := range gs.List {
		switch {
		case !g.Implicit:
			m[string(appendLower([]byte{'='}, g.Name))] = g
		case len(g.Peers) > 0 && g.Peers[0].Unix == "":
			m[string(appendLower(nil, g.Peers[0].Name))] = g
		}
	}
	return m
}

func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// parseIPv4 reads a dotted IPv4 address, nginx's ngx_inet_addr (the resolver's
// shortcut for a name that is an address); other text is not parsed, so a name
// costs no error value.
func parseIPv4(s []byte) (netip.Addr, bool) {
	var a [4]byte
	n, dots, digits := 0, 0, 0
	for _, c := range s {
		switch {
		case '0' <= c && c <= '9':
			n = n*10 + int(c-'0')
			if digits++; n > 255 || digits > 3 {
				return netip.Addr{}, false
			}
		case c == '.' && digits > 0 && dots < 3:
			a[dots] = byte(n)
			n, digits = 0, 0
			dots++
		default:
			return netip.Addr{}, false
		}
	}
	if dots != 3 || digits == 0 {
		return netip.Addr{}, false
	}
	a[3] = byte(n)
	return netip.AddrFrom4(a), true
}

// parseURL splits what follows "http://" in an evaluated proxy_pass URL as nginx's
// ngx_parse_url does with uri_part (the URI part starts at the first "/" or "?"):
// host (an IPv6 address keeps its brackets) and port (nil when none), or the path
// of "unix:/path[:uri]". errText is nginx's text for a URL it refuses.
func parseURL(u []byte) (host, port, uri, unixPath []byte, errText string) {
	if len(u) >= 5 && http1.EqualFold(u[:5], "unix:") {
		path := u[5:]
		for i, c := range path {
			if c == ':' {
				path, uri = path[:i], path[i+1:]
				break
			}
		}
		switch {
		case len(path) == 0:
			return nil, nil, nil, nil, "no path in the unix domain socket"
		case len(path) >= 108: // sizeof(sun_path)
			return nil, nil, nil, nil, "too long path in the unix domain socket"
		}
		return path, nil, uri, path, ""
	}
	end := len(u)
	for i, c := range u {
		if c == '/' || c == '?' {
			end, uri = i, u[i:]
			break
		}
	}
	hp := u[:end]
	if len(hp) > 0 && hp[0] == '[' {
		i := 0
		for i < len(hp) && hp[i] != ']' {
			i++
		}
		if i == len(hp) {
			return nil, nil, nil, nil, "invalid host"
		}
		a, err := netip.ParseAddr(string(hp[1:i]))
		if err != nil || !a.Is6() || a.Zone() != "" {
			return nil, nil, nil, nil, "invalid IPv6 address"
		}
		host = hp[:i+1]
		if rest := hp[i+1:]; len(rest) > 0 {
			if rest[0] != ':' {
				return nil, nil, nil, nil, "invalid host"
			}
			port = rest[1:]
		}
	} else {
		host = hp
		for i, c := range hp {
			if c == ':' {
				host, port = hp[:i], hp[i+1:]
				break
			}
		}
	}
	if _, ok := parsePort(port); port != nil && !ok {
		return nil, nil, nil, nil, "invalid port"
	}
	if len(host) == 0 {
		return nil, nil, nil, nil, "no host"
	}
	return host, port, uri, nil, ""
}

// parsePort reads a port, 1 to 65535, digits only.
func parsePort(p []byte) (int, bool) {
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + int(c-'0'); n > 65535 {
			return 0, false
		}
	}
	return n, len(p) > 0 && n >= 1
}
