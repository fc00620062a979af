package route

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
)

func loadConfig(t testing.TB, src string) *conf.Config {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: conf.MustRegistry(), Prefix: dir, File: file})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// serverID names a server by the line of its server block.
func serverID(srv *conf.Server) int {
	if srv == nil {
		return 0
	}
	return srv.Pos.Line
}

func TestServerSelection(t *testing.T) {
	cfg := loadConfig(t, `http {
server { listen 80; server_name example.org www.example.org; }
server { listen 80; server_name example.net; }
server { listen 80; server_name *.example.org; }
server { listen 80; server_name *.www.example.org; }
server { listen 80; server_name mail.*; }
server { listen 80; server_name mail.example.*; }
server { listen 80; server_name ~^(?<user>.+)\.example\.net$; }
server { listen 80; server_name ~^.*\.net$; }
server { listen 8080; server_name a; }
server { listen 8080 default_server; server_name b; }
server { listen 127.0.0.1:8080; server_name c; }
server { listen 80; server_name .example.com; }
}`)
	tbl := Build(cfg)
	at := func(addr string) *AddrServers {
		a := tbl.Addr(netip.MustParseAddrPort(addr))
		if a == nil {
			t.Fatalf("no servers for %s", addr)
		}
		return a
	}
	tests := []struct {
		addr, host string
		line       int
	}{
		{"10.0.0.1:80", "example.org", 2},
		{"10.0.0.1:80", "WWW.Example.ORG:80", 2},
		{"10.0.0.1:80", "example.org.", 2},
		{"10.0.0.1:80", "example.net", 3},
		{"10.0.0.1:80", "a.example.org", 4},
		{"10.0.0.1:80", "b.a.example.org", 4},
		{"10.0.0.1:80", "x.www.example.org", 5}, // longest leading wildcard
		{"10.0.0.1:80", "mail.foo", 6},
		{"10.0.0.1:80", "mail.example.de", 7},   // longest trailing wildcard
		{"10.0.0.1:80", "mail.example.com", 13}, // a leading wildcard beats a trailing one
		{"10.0.0.1:80", "joe.example.net", 8},   // first regex in file order
		{"10.0.0.1:80", "other.net", 9},
		{"10.0.0.1:80", "example.com", 13},
		{"10.0.0.1:80", "sub.example.com", 13},
		{"10.0.0.1:80", "unknown.host", 2}, // no match: the first server on the address
		{"10.0.0.1:80", "", 2},
		{"10.0.0.1:80", "[::1]:80", 2},
		{"10.0.0.1:8080", "a", 10},
		{"10.0.0.1:8080", "zzz", 11}, // default_server
		{"127.0.0.1:8080", "a", 12},  // a specific address sees only its own servers
		{"127.0.0.1:8080", "nothing", 12},
	}
	for _, tt := range tests {
		if got := serverID(at(tt.addr).Server([]byte(tt.host))); got != tt.line {
			t.Errorf("%s Host %q: server at line %d, want %d", tt.addr, tt.host, got, tt.line)
		}
	}
	if tbl.Addr(netip.MustParseAddrPort("10.0.0.1:9999")) != nil {
		t.Error("an address nothing listens on has servers")
	}
}

func TestLocationOrderNginxDocs(t *testing.T) {
	// The example from nginx's documentation of "location", configurations A to E.
	cfg := loadConfig(t, `http { server {
location = / { }
location / { }
location /documents/ { }
location ^~ /images/ { }
location ~* \.(gif|jpg|jpeg)$ { }
} }`)
	srv := cfg.HTTP.Servers[0]
	locs := Build(cfg).Locations(srv)
	tests := map[string]int{
		"/":                        2, // A
		"/index.html":              3, // B
		"/documents/document.html": 4, // C
		"/images/1.gif":            5, // D
		"/documents/1.jpg":         6, // E
		"/DOCUMENTS/1.JPG":         6, // E: ~* ignores case
	}
	for path, line := range tests {
		if m := locs.Find([]byte(path), nil); m.Location == nil || m.Location.Pos.Line != line {
			t.Errorf("%s: got %+v, want line %d", path, m.Location, line)
		}
	}
}

func TestLocationNestingAndRegexOrder(t *testing.T) {
	cfg := loadConfig(t, `http { server {
location /a/ {
  location /a/b/ {
    location ~ \.inner$ { }
  }
  location ~ \.mid$ { }
}
location ~ \.(mid|outer)$ { }
location ~ \.outer$ { }
location ^~ /static/ {
  location ~ \.png$ { }
}
location ~ ^/static/ { }
location ~ ^/re/ {
  location /re/x/ { }
}
location = /exact { }
location /exact { }
location @named { }
} }`)
	locs := Build(cfg).Locations(cfg.HTTP.Servers[0])
	tests := []struct {
		path   string
		line   int
		prefix string
	}{
		{"/a/x", 2, "/a/"},
		{"/a/b/x", 3, "/a/b/"},
		{"/a/b/x.inner", 4, ""}, // the deepest regex first
		{"/a/b/x.mid", 6, ""},   // then the regex of the enclosing level
		{"/a/x.mid", 6, ""},     // nested regex before the server-level one
		{"/a/x.outer", 8, ""},   // first server-level regex in file order
		{"/x.outer", 8, ""},     // no prefix matched: regexes still searched
		{"/static/x", 10, "/static/"},
		{"/static/x.png", 11, ""}, // ^~ skips outer regexes, not nested ones
		{"/re/y", 14, ""},
		{"/re/x/y", 15, "/re/x/"}, // a regex match is searched inside
		{"/exact", 17, ""},
		{"/exactly", 18, "/exact"},
		{"/nothing", 0, ""},
	}
	for _, tt := range tests {
		m := locs.Find([]byte(tt.path), nil)
		line := 0
		if m.Location != nil {
			line = m.Location.Pos.Line
		}
		if line != tt.line || m.Prefix != tt.prefix {
			t.Errorf("%s: line %d prefix %q, want line %d prefix %q", tt.path, line, m.Prefix, tt.line, tt.prefix)
		}
	}
	if locs.Named("@named") == nil {
		t.Error("named location not found")
	}
	if locs.Find([]byte("@named"), nil).Location != nil {
		t.Error("a named location matched a request path")
	}
}

func TestAutoRedirect(t *testing.T) {
	cfg := loadConfig(t, "http { server { location /dir/ { } location / { } } }")
	locs := Build(cfg).Locations(cfg.HTTP.Servers[0])
	if l := locs.AutoRedirect([]byte("/dir")); l == nil || l.Path != "/dir/" {
		t.Fatalf("/dir: %+v", l)
	}
	if locs.AutoRedirect([]byte("/")) != nil || locs.AutoRedirect([]byte("/dir/")) != nil {
		t.Fatal("auto redirect where none is due")
	}
	// Paths of 63 bytes and more share one length bit: each is compared.
	long, long2 := "/"+strings.Repeat("a", 70), "/"+strings.Repeat("a", 65)
	cfg = loadConfig(t, "http { server { location "+long+"/ { } location "+long2+"/ { } location /dir/ { } } }")
	locs = Build(cfg).Locations(cfg.HTTP.Servers[0])
	for _, p := range []string{long, long2, "/dir"} {
		if l := locs.AutoRedirect([]byte(p)); l == nil || l.Path != p+"/" {
			t.Fatalf("%s: %+v", p, l)
		}
	}
	for _, p := range []string{long[:len(long)-1], long + "a", "/" + strings.Repeat("b", 70), "/dix"} {
		if l := locs.AutoRedirect([]byte(p)); l != nil {
			t.Fatalf("%s: auto redirect to %s", p, l.Path)
		}
	}
}

func BenchmarkRoute(b *testing.B) {
	cfg := loadConfig(b, `http {
server { listen 80; server_name example.org; }
server { listen 80; server_name api.example.com *.example.com;
  location / { }
  location /api/ { location /api/v2/ { } }
  location ~* \.(png|jpg)$ { }
} }`)
	tbl := Build(cfg)
	addr := netip.MustParseAddrPort("127.0.0.1:80")
	host, path := []byte("API.example.com:80"), []byte("/api/v2/users/42")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		srv := tbl.Addr(addr).Server(host)
		if m := tbl.Locations(srv).Find(path, nil); m.Location == nil {
			b.Fatal("no match")
		}
	}
}

// TestServerNameOnlyDefault: an address whose names all lead to its default server
// answers without reading the Host; any other name or a regex keeps the search.
func TestServerNameOnlyDefault(t *testing.T) {
	for _, tc := range []struct {
		http        string
		onlyDefault bool
	}{
		{`server { listen 80; }`, true},
		{`server { listen 80; server_name a.example *.example www.*; }`, true},
		{`server { listen 80; server_name a; } server { listen 80; server_name a; }`, true}, // the first keeps a
		{`server { listen 80; server_name a; } server { listen 80; server_name b; }`, false},
		{`server { listen 80; server_name a; } server { listen 80 default_server; server_name b; }`, false},
		{`server { listen 80; } server { listen 80; server_name *.b; }`, false},
		{`server { listen 80; } server { listen 80; server_name b.*; }`, false},
		{`server { listen 80; server_name ~^(?<x>.+)$; }`, false}, // its captures are set
	} {
		cfg := loadConfig(t, "http { "+tc.http+" }")
		tbl := Build(cfg)
		a := tbl.Addr(netip.MustParseAddrPort("10.0.0.1:80"))
		if a.onlyDefault != tc.onlyDefault {
			t.Errorf("%s: onlyDefault %v", tc.http, a.onlyDefault)
		}
		for _, host := range []string{"a", "A.b", "x.b", "b.x", "a.example", "www.x", "", "[::1]:80"} {
			want := a.Default
			func() {
				a.onlyDefault = false
				defer func() { a.onlyDefault = tc.onlyDefault }()
				want, _ = a.ServerName([]byte(host))
			}()
			if got, _ := a.ServerName([]byte(host)); got != want {
				t.Errorf("%s: Host %q: server %p, the full search %p", tc.http, host, got, want)
			}
		}
	}
}
