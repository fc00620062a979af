package http1

import "bytes"

// TargetForm is the shape of a request-target (RFC 9112 §3.2).
type TargetForm uint8

const (
	OriginForm    TargetForm = iota // "/path?query"
	AbsoluteForm                    // "http://host/path?query"
	AuthorityForm                   // "host:port", CONNECT only
	AsteriskForm                    // "*", OPTIONS only
)

// target holds the offsets of a parsed request-target relative to its start.
type target struct {
	form                 TargetForm
	hostStart, hostEnd   int // authority of the absolute- or authority-form
	pathStart, pathEnd   int
	queryStart, queryEnd int // after '?'; queryStart < 0 when there is none
}

// parseTarget checks a request-target against its method (RFC 9112 §3.2).
func parseTarget(method, t []byte) (target, bool) {
	var r target
	r.queryStart, r.queryEnd = -1, -1
	if len(t) == 0 {
		return r, false
	}
	for _, c := range t {
		if byteClass[c]&classTarget == 0 {
			return r, false
		}
	}
	isConnect := string(method) == "CONNECT"
	switch {
	case isConnect:
		// authority-form: host ":" port, the port required (§3.2.3).
		if !validHostPort(t, true) {
			return r, false
		}
		r.form = AuthorityForm
		r.hostStart, r.hostEnd = 0, len(t)
		return r, true
	case t[0] == '/':
		r.form = OriginForm
		return r, r.splitPathQuery(t, 0)
	case len(t) == 1 && t[0] == '*':
		r.form = AsteriskForm
		return r, string(method) == "OPTIONS" // §3.2.4
	}
	// absolute-form (§3.2.2): only the http and https schemes make sense for a
	// gateway, and they require a host.
	rest, ok := cutSchemePrefix(t)
	if !ok {
		return r, false
	}
	r.form = AbsoluteForm
	r.hostStart = len(t) - len(rest)
	end := bytes.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	r.hostEnd = r.hostStart + end
	if !validHostPort(t[r.hostStart:r.hostEnd], false) {
		return r, false
	}
	return r, r.splitPathQuery(t, r.hostEnd)
}

func cutSchemePrefix(t []byte) ([]byte, bool) {
	switch {
	case len(t) > 7 && EqualFold(t[:7], "http://"):
		return t[7:], true
	case len(t) > 8 && EqualFold(t[:8], "https://"):
		return t[8:], true
	}
	return nil, false
}

// splitPathQuery records path and query from offset from. Percent escapes in
// the path must be well formed: net/url refuses "%zz" in a path (not in a
// query), and so does nginx when it decodes the URI.
func (r *target) splitPathQuery(t []byte, from int) bool {
	r.pathStart, r.pathEnd = from, len(t)
	if q := bytes.IndexByte(t[from:], '?'); q >= 0 {
		r.pathEnd = from + q
		r.queryStart, r.queryEnd = r.pathEnd+1, len(t)
	}
	path := t[r.pathStart:r.pathEnd]
	for i := 0; i < len(path); i++ {
		if path[i] == '%' {
			if i+2 >= len(path) || byteClass[path[i+1]]&classHex == 0 || byteClass[path[i+2]]&classHex == 0 {
				return false
			}
			i += 2
		}
	}
	return true
}

// validHostPort checks uri-host [":" port] (RFC 9110 §7.2, RFC 3986 §3.2.2):
// a non-empty reg-name without percent escapes or a bracketed IPv6 address
// (no zone, no IPvFuture), then an optional run of port digits. It also
// refuses ".." and ".", like nginx.
func validHostPort(s []byte, requirePort bool) bool {
	if len(s) == 0 {
		return false
	}
	i := 0
	if s[0] == '[' {
		close := bytes.IndexByte(s, ']')
		if close < 0 || !validIPv6(s[1:close]) {
			return false
		}
		i = close + 1
	} else {
		for i < len(s) && byteClass[s[i]]&classRegName != 0 {
			if s[i] == '.' && i > 0 && s[i-1] == '.' {
				return false
			}
			i++
		}
		if i == 0 || i == 1 && s[0] == '.' {
			return false // nginx refuses a host that is empty without its trailing dot
		}
	}
	if i == len(s) {
		return !requirePort
	}
	if s[i] != ':' {
		return false
	}
	port := s[i+1:]
	if requirePort && len(port) == 0 {
		return false
	}
	for _, c := range port {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// validIPv6 checks an IPv6address (RFC 3986 §3.2.2, RFC 4291 §2.2) the way
// net/netip does, which net/url applies to an IP-literal: eight groups of one
// to four hex digits, or fewer around a single "::", the last two possibly
// written as a dotted quad without leading zeros.
func validIPv6(s []byte) bool {
	groups, ellipsis, i := 0, false, 0
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis, i = true, 2
	}
	for i < len(s) {
		j := i
		for j < len(s) && byteClass[s[j]]&classHex != 0 {
			j++
		}
		if j < len(s) && s[j] == '.' {
			if !validIPv4(s[i:]) {
				return false
			}
			groups += 2
			break
		}
		if j == i || j-i > 4 {
			return false
		}
		groups++
		i = j
		if i == len(s) {
			break
		}
		if s[i] != ':' || i+1 == len(s) {
			return false
		}
		i++
		if s[i] == ':' {
			if ellipsis {
				return false
			}
			ellipsis = true
			i++
		}
	}
	if ellipsis {
		return groups < 8
	}
	return groups == 8
}

// validIPv4 checks a dotted quad of decimal octets without leading zeros.
func validIPv4(s []byte) bool {
	for octet := 0; octet < 4; octet++ {
		if octet > 0 {
			if len(s) == 0 || s[0] != '.' {
				return false
			}
			s = s[1:]
		}
		j := 0
		for j < len(s) && j < 4 && isDigit(s[j]) {
			j++
		}
		if j == 0 || j > 3 || j > 1 && s[0] == '0' {
			return false
		}
		if n, _ := parseDecimal(s[:j]); n > 255 {
			return false
		}
		s = s[j:]
	}
	return len(s) == 0
}
