package route

import "errors"

// ErrBadURI is a request path nginx would answer with 400: a bad percent-escape, an
// encoded NUL, a ".." above the root, or a path that does not start with "/".
var ErrBadURI = errors.New("invalid request URI")

// Normalize appends to dst the path as locations see it, nginx's $uri
// (ngx_http_parse_complex_uri): every percent-escape decoded, once, then "." and ".."
// segments resolved and runs of slashes merged unless mergeSlashes is off (nginx's
// merge_slashes). An encoded "/" or
// "." counts as the character itself, as in nginx, so that a location guard sees the
// path an upstream will decode: "/%2Fadmin" and "/x/..%2Fadmin" are "/admin". A
// backslash (%5C) is not a separator (nginx on Linux). path is the request-target's
// path without the query; an empty one (absolute-form "http://host") is "/".
func Normalize(dst, path []byte, mergeSlashes bool) ([]byte, error) {
	if len(path) == 0 {
		return append(dst, '/'), nil
	}
	if path[0] != '/' {
		return dst, ErrBadURI
	}
	if isNormal(path) {
		return append(dst, path...), nil
	}
	return normalize(dst, path, mergeSlashes)
}

// isNormal reports a path (starting with "/") that Normalize leaves as it is,
// whatever merge_slashes says: no escape, no NUL, and no segment that is empty
// or starts with "." (so none is "." or ".."). Most request paths are, and
// one pass over them is a fraction of normalize's.
func isNormal(path []byte) bool {
	prev := byte('/')
	for _, c := range path[1:] {
		if c == '%' || c == 0 || prev == '/' && (c == '/' || c == '.') {
			return false
		}
		prev = c
	}
	return true
}

// normalize is Normalize's general case.
func normalize(dst, path []byte, mergeSlashes bool) ([]byte, error) {
	base := len(dst)
	out := append(dst, '/')
	seg := len(out) // where the current segment starts in out
	for i := 1; ; {
		last := i == len(path)
		c := byte('/') // the end of the path closes the last segment like a slash
		if !last {
			c = path[i]
			i++
			if c == '%' {
				if i+2 > len(path) || unhex(path[i]) < 0 || unhex(path[i+1]) < 0 {
					return dst[:base], ErrBadURI
				}
				c = byte(unhex(path[i])<<4 | unhex(path[i+1]))
				i += 2
			}
			if c == 0 {
				return dst[:base], ErrBadURI // nginx: 400
			}
		}
		if c != '/' {
			out = append(out, c)
			continue
		}
		switch s := out[seg:]; {
		case len(s) == 0: // "//", or the end after a slash
			if !mergeSlashes && !last {
				out = append(out, '/')
			}
		case len(s) == 1 && s[0] == '.':
			out = out[:seg]
		case len(s) == 2 && s[0] == '.' && s[1] == '.':
			if seg == base+1 {
				return dst[:base], ErrBadURI // above the root
			}
			j := seg - 2
			for out[j] != '/' {
				j--
			}
			out = out[:j+1]
		default:
			if !last {
				out = append(out, '/')
			}
		}
		if last {
			return out, nil
		}
		seg = len(out)
	}
}

// HasEscape reports whether a request path holds a percent-escape, which is when
// nginx re-escapes $uri for an upstream (its r->quoted_uri).
func HasEscape(path []byte) bool {
	for _, c := range path {
		if c == '%' {
			return true
		}
	}
	return false
}

// AppendEscaped appends s percent-encoding what nginx's ngx_escape_uri(NGX_ESCAPE_URI)
// does since 1.21.1: controls, space, `"`, `#`, `%`, `<`, `>`, `?`, `\`, `^`, "`",
// `{`, `|`, `}`, DEL and every non-ASCII byte. "/" stays, so decoding the result
// gives s back and a normalised s stays normalised.
func AppendEscaped(dst, s []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range s {
		if escapeURI[c>>5]&(1<<(c&31)) != 0 {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// escapeURI is nginx's "uri" table in ngx_escape_uri: bit c of the bitmap is set when
// byte c is escaped.
var escapeURI = [8]uint32{
	0xffffffff, // 0x00-0x1f
	0xd000002d, // ?>=< ;:98 7654 3210 /.-, +*)( '&%$ #"!  (space " # % < > ?)
	0x50000000, // _^]\ [ZYX WVUT SRQP ONML KJIH GFED CBA@ (\ ^)
	0xb8000001, //  ~}| {zyx wvut srqp onml kjih gfed cba` (` { | } DEL)
	0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
}

// AppendReplaced appends the path a proxy_pass with a URI part sends upstream for
// uri (a normalised $uri) matched by the prefix location prefix: passURI, then the
// rest of uri, escaped when escape is set (nginx escapes when the client's path held
// an escape, HasEscape, or after an internal redirect). It is ErrBadURI when the
// result would climb out of passURI (ClimbsOut).
func AppendReplaced(dst, uri []byte, prefix, passURI string, escape bool) ([]byte, error) {
	if ClimbsOut(uri, prefix, passURI) {
		return dst, ErrBadURI
	}
	rest := uri[min(len(prefix), len(uri)):]
	dst = append(dst, passURI...)
	if escape {
		return AppendEscaped(dst, rest), nil
	}
	return append(dst, rest...), nil
}

// ClimbsOut reports whether replacing prefix by passURI in uri starts the rest with a
// ".." segment: with "location /a" and "proxy_pass http://up/b/", "/a../x" would reach
// the upstream as "/b/../x", which it resolves to "/x" outside /b/. nginx passes it on.
func ClimbsOut(uri []byte, prefix, passURI string) bool {
	rest := uri[min(len(prefix), len(uri)):]
	return len(passURI) > 0 && passURI[len(passURI)-1] == '/' && len(rest) >= 2 && rest[0] == '.' && rest[1] == '.' &&
		(len(rest) == 2 || rest[2] == '/')
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
