package route

import (
	"net/url"
	pathpkg "path"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
)

func TestAppendEscaped(t *testing.T) {
	// nginx 1.22's NGX_ESCAPE_URI set, byte by byte.
	for c := 0; c < 256; c++ {
		want := c <= 0x20 || c >= 0x7f || strings.IndexByte("\"#%<>?\\^`{|}", byte(c)) >= 0
		got := string(AppendEscaped(nil, []byte{byte(c)}))
		if escaped := len(got) == 3; escaped != want {
			t.Errorf("byte %#x: %q, escaped %v, want %v", c, got, escaped, want)
		}
	}
	if got := string(AppendEscaped(nil, []byte("/a b/%2F/;x=1/\r\n/€"))); got != "/a%20b/%252F/;x=1/%0D%0A/%E2%82%AC" {
		t.Fatalf("got %q", got)
	}
}

func TestAppendReplaced(t *testing.T) {
	tests := []struct {
		uri, prefix, pass string
		escape            bool
		want              string // "" for ErrBadURI
	}{
		{"/uri/x", "/uri/", "/base/", false, "/base/x"},
		{"/uri/a b", "/uri/", "/base/", true, "/base/a%20b"},
		{"/uri/a%2Fb", "/uri/", "/base/", true, "/base/a%252Fb"}, // a literal "%" from %25
		{"/uri/a?b", "/uri/", "/base/", true, "/base/a%3Fb"},
		{"/uri/", "/uri/", "/base/", false, "/base/"},
		{"/api/x", "/api", "/v1/", false, "/v1//x"}, // as nginx
		{"/api..", "/api", "/v1/", false, ""},       // would climb out of /v1/
		{"/api../x", "/api", "/v1/", true, ""},
		{"/api.../x", "/api", "/v1/", false, "/v1/.../x"},
		{"/api..", "/api", "/v1", false, "/v1.."}, // no climb without the slash
		{"/api./x", "/api", "/v1/", false, "/v1/./x"},
	}
	for _, tt := range tests {
		got, err := AppendReplaced(nil, []byte(tt.uri), tt.prefix, tt.pass, tt.escape)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%+v: %q, want an error", tt, got)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%+v: %q, %v; want %q", tt, got, err, tt.want)
		}
	}
}

// agreementConfig is the configuration FuzzUpstreamAgrees routes through; passURIs
// are the URI parts of the locations' proxy_pass ("" for none), guards the locations
// that send nothing upstream (return 403 in a real configuration).
const agreementConfig = `http { server {
location /admin { }
location / { }
location /uri/ { }
location /api { }
location = /exact { }
location ~ \.php$ { }
location /static/ { location ~ \.png$ { } }
} }`

var (
	passURIs = map[string]string{"/uri/": "/base/", "/api": "/v1/", "/exact": "/e/x", "/static/": "/files/"}
	guards   = map[string]bool{"/admin": true}
)

// FuzzUpstreamAgrees checks that the location chosen for a request path and the path
// sent upstream agree: what the upstream decodes and normalises (as nginx, or any
// server that decodes once) is the $uri the location matched when proxy_pass has no
// URI part, and with one it lies under that URI part and maps back to the same
// location. An encoded slash, dot or backslash, mixed-case or double encoding, or a
// ";" parameter must never lead the upstream elsewhere than the location guard saw.
func FuzzUpstreamAgrees(f *testing.F) {
	for _, s := range []string{
		"/", "/admin/secret.txt", "/%2Fadmin/secret.txt", "/%2fadmin/secret.txt", "/x/..%2Fadmin/secret.txt",
		"/x/..%2fadmin", "/x/%2E%2E/admin", "/x/%2e%2E%2Fadmin", "/uri/..%2Fadmin", "/uri/..%2F..%2Fadmin",
		"/uri/a%2Fb", "/uri/a%252Fb", "/uri/%252e%252e/x", "/uri/a%5C..%5Cadmin", "/uri/a;p=..%2F..%2Fadmin",
		"/admin;x/secret", "/uri/;/../../admin", "/api..", "/api../admin", "/api%2E%2E/admin", "/api/%2E%2E/x",
		"/exact", "/ex%61ct", "/exact/", "/x.php", "/x.ph%70", "/uri/x.php", "/static/a.png", "/static/..%2Fadmin.png",
		"/uri/a%3Fb", "/uri/a%23b", "/uri/%0D%0A", "/uri/%E2%82%AC", "/uri/a%20b", "/uri/%25", "/uri//x//",
	} {
		f.Add(s)
	}
	cfg := loadConfig(f, agreementConfig)
	locs := Build(cfg).Locations(cfg.HTTP.Servers[0])
	f.Fuzz(func(t *testing.T, path string) {
		if !validTargetPath(path) {
			return // the request parser refuses it
		}
		uri, err := Normalize(nil, []byte(path), true)
		if err != nil {
			return // 400
		}
		m := locs.Find(uri, nil)
		if m.Location == nil {
			t.Fatalf("%q ($uri %q): no location", path, uri)
		}
		if guards[m.Location.Path] {
			return
		}
		pass, hasURI := passURIs[m.Location.Path]
		var up []byte
		switch {
		case hasURI && m.Location.Kind == conf.LocExact:
			up = []byte(pass)
		case hasURI:
			if up, err = AppendReplaced(nil, uri, m.Prefix, pass, HasEscape([]byte(path))); err != nil {
				return // 400: the path would climb out of the URI part
			}
		default:
			up = []byte(path) // the client's path as received
		}
		seen, ok := upstreamView(up)
		if !ok {
			t.Fatalf("%q ($uri %q) sent upstream as %q, which does not decode", path, uri, up)
		}
		if !hasURI {
			if want := pathpkg.Clean(string(uri)); seen != want {
				t.Fatalf("%q: locations saw %q, the upstream sees %q", path, uri, seen)
			}
			return
		}
		base := pathpkg.Clean(pass)
		if seen != base && !strings.HasPrefix(seen, base+"/") {
			t.Fatalf("%q ($uri %q) in %s: the upstream sees %q, outside %q", path, uri, m.Location.Path, seen, pass)
		}
		if m.Location.Kind == conf.LocExact {
			return
		}
		back := m.Prefix + strings.TrimPrefix(seen[len(base):], "/")
		if again := locs.Find([]byte(back), nil); again.Location != m.Location {
			t.Fatalf("%q ($uri %q) in %s: the upstream sees %q, which maps back to %q in another location", path, uri, m.Location.Path, seen, back)
		}
	})
}

// upstreamView is the path a typical upstream serves for a request path: decoded
// once, then cleaned (dot segments resolved, "//" merged, ".." clamped at the root,
// the trailing slash dropped). It is written independently of Normalize.
func upstreamView(p []byte) (string, bool) {
	s, err := url.PathUnescape(string(p))
	if err != nil {
		return "", false
	}
	return pathpkg.Clean(s), true
}

// validTargetPath is what the request parser lets through as an origin-form path:
// visible bytes and obs-text, no "#" or "?", starting with "/".
func validTargetPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= 0x20 || c == 0x7f || c == '#' || c == '?' {
			return false
		}
	}
	return true
}
