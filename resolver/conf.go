package resolver

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
)

// lookupIP resolves name server names at configuration time, off the loops, as
// nginx does; tests replace it to stay off the network.
var lookupIP = net.LookupIP

// ParseResolver reads a "resolver" directive (contexts http, server, location;
// one or more arguments):
//
//	resolver address ... [valid=time] [ipv4=on|off] [ipv6=on|off] [status_zone=zone];
//
// An address is an IP address (IPv6 in brackets) or a host name, which is looked
// up now, with an optional port (default 53). Errors are nginx's, at the
// directive's file:line. As in nginx, each level inherits the nearest resolver
// and, separately, the nearest resolver_timeout (ParseTimeout), which a lookup
// passes as Query.Timeout; a level that sets its own "resolver" gets a resolver
// (a cache) of its own.
func ParseResolver(s *conf.Stmt) (Config, error) {
	var cfg Config
	for _, a := range s.Args {
		v := a.Value
		switch {
		case strings.HasPrefix(v, "valid="):
			d, ok := parseSeconds(v[len("valid="):])
			if !ok {
				return Config{}, s.Errorf("invalid parameter: %s", v)
			}
			cfg.Valid = d
		case strings.HasPrefix(v, "ipv4="), strings.HasPrefix(v, "ipv6="):
			var off bool
			switch v[len("ipv4="):] { // nginx takes on and off in lower case only
			case "on":
			case "off":
				off = true
			default:
				return Config{}, s.Errorf("invalid parameter: %s", v)
			}
			if v[3] == '4' {
				cfg.NoIPv4 = off
			} else {
				cfg.NoIPv6 = off
			}
		case strings.HasPrefix(v, "status_zone="):
			if v == "status_zone=" {
				return Config{}, s.Errorf("invalid parameter: %s", v)
			}
			cfg.StatusZone = v[len("status_zone="):]
		default:
			addrs, err := parseServer(v)
			if err != nil {
				return Config{}, s.Errorf("%s in resolver %q", err.Error(), v)
			}
			cfg.Servers = append(cfg.Servers, addrs...)
		}
	}
	if cfg.NoIPv4 && cfg.NoIPv6 {
		return Config{}, s.Errorf("%s", errBothOff.Error())
	}
	if len(cfg.Servers) == 0 {
		return Config{}, s.Errorf("no name servers defined")
	}
	cfg.key = settingsKey(&cfg)
	return cfg, nil
}

// ParseTimeout reads a "resolver_timeout time;" directive (default 30s).
func ParseTimeout(s *conf.Stmt) (time.Duration, error) {
	d, err := conf.ParseTime(s.Args[0].Value)
	if err != nil {
		return 0, s.InvalidValue(s.Args[0], "")
	}
	// 0 would mean the default here; nginx's 0 fails a lookup at once, as does this.
	return max(d, time.Nanosecond), nil
}

// parseSeconds reads a time in nginx's seconds mode (ngx_parse_time(s, 1)),
// which has no milliseconds.
func parseSeconds(s string) (time.Duration, bool) {
	if strings.Contains(s, "ms") {
		return 0, false
	}
	d, err := conf.ParseTime(s)
	return d, err == nil
}

type parseError string

func (e parseError) Error() string { return string(e) }

// parseServer reads "addr", "addr:port", "[v6]", "[v6]:port" or "name[:port]",
// as ngx_parse_url does for the resolver (nginx's u.err texts).
func parseServer(v string) ([]netip.AddrPort, error) {
	if len(v) >= 5 && strings.EqualFold(v[:5], "unix:") {
		return nil, parseError("unix domain sockets are not supported")
	}
	host, port := v, ""
	if strings.HasPrefix(v, "[") {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return nil, parseError("invalid host")
		}
		host, port = v[1:end], v[end+1:]
		if port != "" {
			if port[0] != ':' {
				return nil, parseError("invalid host")
			}
			port = port[1:]
			if port == "" {
				return nil, parseError("invalid port")
			}
		}
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return nil, parseError("invalid IPv6 address")
		}
	} else if i := strings.IndexByte(v, ':'); i >= 0 {
		host, port = v[:i], v[i+1:]
		if port == "" {
			return nil, parseError("invalid port")
		}
	}
	p := 53
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '+' {
			return nil, parseError("invalid port")
		}
		p = n
	}
	if host == "" || strings.ContainsAny(host, "/?# ") {
		return nil, parseError("invalid host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), uint16(p))}, nil
	}
	ips, err := lookupIP(host)
	if err != nil || len(ips) == 0 {
		return nil, parseError("host not found")
	}
	var out []netip.AddrPort
	for _, ip := range ips {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(p)))
		}
	}
	return out, nil
}
