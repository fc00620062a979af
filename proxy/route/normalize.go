package route

import "errors"

// ErrBadURI is a request path nginx would answer with 400: a bad percent-escape, a
// ".." above the root, or a path that does not start with "/".
var ErrBadURI = errors.New("invalid request URI")

// Normalize appends to dst the path as locations see it (nginx's $uri), with the
// RFC 3986 unreserved characters percent-decoded (%41 is A, %2E is "."), "." and ".."
// segments resolved and runs of slashes merged (nginx's merge_slashes on). Other
// escapes stay as written, so an encoded "/" (%2F) never becomes a separator. path is
// the request-target's path, without the query.
func Normalize(dst, path []byte) ([]byte, error) {
	if len(path) == 0 || path[0] != '/' {
		return dst, ErrBadURI
	}
	base := len(dst)
	out := append(dst, '/')
	for i := 1; i <= len(path); i++ { // each pass reads one segment and the slash after it
		segStart := len(out)
		for i < len(path) && path[i] != '/' {
			c := path[i]
			if c != '%' {
				out = append(out, c)
				i++
				continue
			}
			if i+2 >= len(path) || unhex(path[i+1]) < 0 || unhex(path[i+2]) < 0 {
				return dst[:base], ErrBadURI
			}
			if d := byte(unhex(path[i+1])<<4 | unhex(path[i+2])); isUnreserved(d) {
				out = append(out, d)
			} else {
				// Kept escaped, in upper case so equal paths compare equal.
				out = append(out, '%', upper(path[i+1]), upper(path[i+2]))
			}
			i += 3
		}
		switch seg := out[segStart:]; {
		case len(seg) == 0: // "//" merged, or the trailing slash
		case len(seg) == 1 && seg[0] == '.':
			out = out[:segStart]
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			if segStart == base+1 {
				return dst[:base], ErrBadURI // above the root
			}
			j := segStart - 2
			for out[j] != '/' {
				j--
			}
			out = out[:j+1]
		default:
			if i < len(path) {
				out = append(out, '/')
			}
		}
	}
	return out, nil
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
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

func upper(c byte) byte {
	if 'a' <= c && c <= 'f' {
		return c - 'a' + 'A'
	}
	return c
}
