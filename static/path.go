package static

import (
	"bytes"
	"errors"
)

// Errors of MapURI; Content answers them with 400, 403 and 500.
var (
	// ErrBadURI: the URI has a NUL byte or a ".." segment, which the core's
	// normalisation never lets through; refused defensively.
	ErrBadURI = errors.New(`URI has a NUL byte or a ".." segment`)
	// ErrOutsideRoot: the URI's tail, put after the alias, climbs out of it with "..":
	// a location without a trailing slash ("location /i { alias /data/i/; }") whose
	// request is "/i../x". nginx serves /data/x; numaproxy refuses.
	ErrOutsideRoot = errors.New("path leaves the root")
	// ErrBadRoot: a root or alias with variables expanded to a value with a NUL byte.
	ErrBadRoot = errors.New("root has a NUL byte")
)

// MapURI appends to dst the file name that uri maps to under the location's root or
// alias (nginx's ngx_http_map_uri_to_path) and returns it with the length of its root
// part, the length nginx calls root: $document_root, and the part try_files names
// are put after.
//
// With root the name is the root followed by uri; with alias, the alias followed by
// uri without the location's prefix; in a regex location the alias (built from the
// captures) is the whole name, unless addURI (set by try_files there) asks for uri
// after it. vars expands a root or alias with variables.
func MapURI(dst []byte, lc *LocConf, uri []byte, vars Vars, addURI bool) (path []byte, root int, err error) {
	start := len(dst)
	if bytes.IndexByte(uri, 0) >= 0 {
		return dst, 0, ErrBadURI
	}
	skip := 0
	if lc.RootTmpl == nil {
		dst = append(dst, lc.Root...)
	} else {
		dst = appendRoot(dst, lc, vars)
		if bytes.IndexByte(dst[start:], 0) >= 0 {
			return dst[:start], 0, ErrBadRoot
		}
	}
	root = len(dst) - start
	switch {
	case lc.AliasWhole && !addURI:
		return dst, root, nil
	case lc.AliasWhole:
	case lc.Alias:
		skip = lc.AliasLen
	}
	if skip > len(uri) {
		skip = len(uri)
	}
	dst = append(dst, uri[skip:]...)
	if dotDotAfter(dst[start:], root) {
		if hasDotDot(uri) {
			return dst[:start], 0, ErrBadURI
		}
		return dst[:start], 0, ErrOutsideRoot
	}
	return dst, root, nil
}

// appendRoot expands a root or alias with variables; a relative result is under the
// configuration prefix, as nginx's ngx_get_full_name.
func appendRoot(dst []byte, lc *LocConf, vars Vars) []byte {
	start := len(dst)
	dst = lc.RootTmpl.Append(dst, vars)
	if len(dst) > start && dst[start] == '/' {
		return dst
	}
	// Rare (a root that starts with a variable holding a relative path): shift the
	// value right to put the prefix first.
	n := len(dst) - start
	dst = append(dst, lc.prefix...)
	dst = append(dst, '/')
	copy(dst[start+len(lc.prefix)+1:], dst[start:start+n])
	copy(dst[start:], lc.prefix)
	dst[start+len(lc.prefix)] = '/'
	return dst
}

// DocumentRoot appends $document_root: the root or alias with its variables
// expanded, as MapURI uses it.
func DocumentRoot(dst []byte, lc *LocConf, vars Vars) []byte {
	if lc.RootTmpl == nil {
		return append(dst, lc.Root...)
	}
	return appendRoot(dst, lc, vars)
}

// dotDotAfter reports a ".." segment of path that ends after its first from bytes,
// that is one the URI contributed to.
func dotDotAfter(path []byte, from int) bool {
	if !bytes.Contains(path, dotDot) {
		return false // most paths: one search instead of one per segment
	}
	for i := 0; i < len(path); {
		j := bytes.IndexByte(path[i:], '/')
		end := len(path)
		if j >= 0 {
			end = i + j
		}
		if end > from && end-i == 2 && path[i] == '.' && path[i+1] == '.' {
			return true
		}
		i = end + 1
	}
	return false
}

var dotDot = []byte("..")

func hasDotDot(uri []byte) bool { return dotDotAfter(uri, 0) }

// Exten returns the extension of uri's last segment, nginx's r->exten: what follows
// the last "." that is not the segment's first character.
func Exten(uri []byte) []byte {
	for i := len(uri) - 1; i > 1; i-- {
		switch {
		case uri[i] == '.' && uri[i-1] != '/':
			return uri[i+1:]
		case uri[i] == '/':
			return nil
		}
	}
	return nil
}
