package route

import (
	"net/netip"
	"sort"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/pcre"
)

// Table routes requests of one configuration snapshot.
type Table struct {
	addrs     map[netip.AddrPort]*AddrServers
	locations map[*conf.Server]*Locations
}

// AddrServers are the servers listening on one address:port and the index that picks
// one by Host.
type AddrServers struct {
	Addr    netip.AddrPort
	Default *conf.Server // default_server, else the first server listing the address
	SSL     bool         // connections speak TLS: some listen of the address says ssl
	// ProxyProtocol: connections start with a PROXY protocol header (some listen of
	// the address says proxy_protocol).
	ProxyProtocol bool

	exact      map[string]*conf.Server
	leadWild   []wildName // *.example.com, longest first
	trailWild  []wildName // www.example.*, longest first
	regexNames []regexName
	// onlyDefault: every name of the address leads to Default and none is a regex,
	// so that any Host does (a single server, the usual case): ServerName answers
	// without looking at it.
	onlyDefault bool
}

type wildName struct {
	name string // "example.com" for *.example.com; "www.example" for www.example.*
	srv  *conf.Server
}

type regexName struct {
	name conf.ServerName
	srv  *conf.Server
}

// Build makes the routing table of cfg's http block (nil cfg.HTTP gives an empty one).
func Build(cfg *conf.Config) *Table {
	t := &Table{addrs: map[netip.AddrPort]*AddrServers{}, locations: map[*conf.Server]*Locations{}}
	if cfg.HTTP == nil {
		return t
	}
	for _, srv := range cfg.HTTP.Servers {
		t.locations[srv] = buildLocations(srv.Locations)
		for _, l := range srv.Listens {
			a := t.addrs[l.Addr]
			if a == nil {
				a = &AddrServers{Addr: l.Addr, Default: srv, exact: map[string]*conf.Server{}}
				t.addrs[l.Addr] = a
			}
			if l.DefaultServer {
				a.Default = srv
			}
			a.SSL = a.SSL || l.SSL
			a.ProxyProtocol = a.ProxyProtocol || l.ProxyProtocol
			a.add(srv)
		}
	}
	for _, a := range t.addrs {
		longestFirst := func(w []wildName) {
			sort.SliceStable(w, func(i, j int) bool { return len(w[i].name) > len(w[j].name) })
		}
		longestFirst(a.leadWild)
		longestFirst(a.trailWild)
		a.onlyDefault = a.leadsOnlyToDefault()
	}
	return t
}

// add indexes srv's names; where two servers on an address share a name the first
// keeps it, as nginx does (it warns "conflicting server name").
func (a *AddrServers) add(srv *conf.Server) {
	for _, n := range srv.Names {
		switch n.Kind {
		case conf.NameExact:
			if _, taken := a.exact[n.Name]; !taken {
				a.exact[n.Name] = srv
			}
		case conf.NameWildcardPrefix:
			a.leadWild = append(a.leadWild, wildName{n.Name, srv})
		case conf.NameWildcardSuffix:
			a.trailWild = append(a.trailWild, wildName{n.Name, srv})
		case conf.NameRegex:
			a.regexNames = append(a.regexNames, regexName{n, srv})
		}
	}
}

func (a *AddrServers) leadsOnlyToDefault() bool {
	if len(a.regexNames) > 0 {
		return false
	}
	for _, srv := range a.exact {
		if srv != a.Default {
			return false
		}
	}
	for _, w := range append(a.leadWild[:len(a.leadWild):len(a.leadWild)], a.trailWild...) {
		if w.srv != a.Default {
			return false
		}
	}
	return true
}

// Addr finds the servers for a connection accepted on local: the entry for exactly
// that address, else the wildcard entry of its port (0.0.0.0 or [::]).
func (t *Table) Addr(local netip.AddrPort) *AddrServers {
	if a := t.addrs[local]; a != nil {
		return a
	}
	any := netip.IPv4Unspecified()
	if local.Addr().Is6() {
		any = netip.IPv6Unspecified()
	}
	return t.addrs[netip.AddrPortFrom(any, local.Port())]
}

// Addrs lists every address the configuration listens on.
func (t *Table) Addrs() []*AddrServers {
	out := make([]*AddrServers, 0, len(t.addrs))
	for _, a := range t.addrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr.String() < out[j].Addr.String() })
	return out
}

// maxHost bounds the Host names matched by name; longer ones go to the default server.
const maxHost = 255

// Server picks the server for a Host header value (port and trailing dot ignored, any
// case) in nginx's order: exact name, longest leading wildcard, longest trailing
// wildcard, first matching regex, default server.
func (a *AddrServers) Server(host []byte) *conf.Server {
	srv, _ := a.ServerName(host)
	return srv
}

// ServerName is Server, and the regex name that chose the server (nil for any other
// name): the core runs it again on CanonicalHost for its captures, as nginx sets
// them from server_name ~regex.
func (a *AddrServers) ServerName(host []byte) (*conf.Server, *pcre.Regexp) {
	if a.onlyDefault {
		return a.Default, nil
	}
	var buf [maxHost]byte
	h := canonicalHost(buf[:0], host)
	if len(h) == 0 {
		return a.Default, nil
	}
	if srv, ok := a.exact[string(h)]; ok {
		return srv, nil
	}
	for _, w := range a.leadWild {
		// *.example.com matches x.example.com and x.y.example.com, not example.com.
		if len(h) > len(w.name)+1 && h[len(h)-len(w.name)-1] == '.' && string(h[len(h)-len(w.name):]) == w.name {
			return w.srv, nil
		}
	}
	for _, w := range a.trailWild {
		if len(h) > len(w.name)+1 && h[len(w.name)] == '.' && string(h[:len(w.name)]) == w.name {
			return w.srv, nil
		}
	}
	for _, r := range a.regexNames {
		// A copy, so that buf does not escape to the heap on the paths without regexes.
		if r.name.Regex.MatchString(string(h)) {
			return r.srv, r.name.Regex
		}
	}
	return a.Default, nil
}

// CanonicalHost is the host name server names match: lower-case, without port and
// trailing dot; empty for an invalid one.
func CanonicalHost(dst, host []byte) []byte { return canonicalHost(dst, host) }

// canonicalHost lower-cases host and drops its port and trailing dot; an invalid or
// over-long host gives an empty result (the default server).
func canonicalHost(dst, host []byte) []byte {
	if len(host) > 0 && host[0] == '[' { // IPv6 literal: keep through ']'
		end := -1
		for i, c := range host {
			if c == ']' {
				end = i
				break
			}
		}
		if end < 0 || end+1 > maxHost {
			return dst[:0]
		}
		return appendLower(dst, host[:end+1])
	}
	for i, c := range host {
		if c == ':' {
			host = host[:i]
			break
		}
	}
	for len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	if len(host) > maxHost {
		return dst[:0]
	}
	return appendLower(dst, host)
}

func appendLower(dst, s []byte) []byte {
	for _, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// Locations returns the location index of a server of this table.
func (t *Table) Locations(srv *conf.Server) *Locations { return t.locations[srv] }
