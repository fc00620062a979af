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
// a non-empty reg-name without percent escapes or an IP-literal of hex
// digits, colons and dots, then an optional run of port digits. It also
// refuses "..", like nginx.
func validHostPort(s []byte, requirePort bool) bool {
	if len(s) == 0 {
		return false
	}
	i := 0
	if s[0] == '[' {
		close := bytes.IndexByte(s, ']')
		if close < 2 {
			return false
		}
		for _, c := range s[1:close] {
			if byteClass[c]&classHex == 0 && c != ':' && c != '.' {
				return false
			}
		}
		i = close + 1
	} else {
		for i < len(s) && byteClass[s[i]]&classRegName != 0 {
			if s[i] == '.' && i > 0 && s[i-1] == '.' {
				return false
			}
			i++
		}
		if i == 0 {
			return false
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
