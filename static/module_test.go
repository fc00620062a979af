package static

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

var testRegistry = conf.MustRegistry(httpcore.Module, Module)

func loadConf(t testing.TB, src string) (*conf.Config, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf.Load(conf.Options{Registry: testRegistry, Prefix: dir, File: file})
}

func mustConf(t testing.TB, src string) *conf.Config {
	t.Helper()
	cfg, err := loadConf(t, src)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Debian's /etc/nginx/mime.types, installed with nginx, parses through the types
// block and maps what nginx maps.
func TestDebianMimeTypes(t *testing.T) {
	if _, err := os.Stat("/etc/nginx/mime.types"); err != nil {
		t.Skip("no /etc/nginx/mime.types (nginx not installed)")
	}
	cfg := mustConf(t, "http { include /etc/nginx/mime.types; server { location / { } } }")
	lc := ConfOf(cfg.HTTP.Servers[0].Locations[0])
	for ext, want := range map[string]string{
		"html": "text/html", "HTM": "text/html", "css": "text/css", "js": "application/javascript",
		"png": "image/png", "svgz": "image/svg+xml", "woff2": "font/woff2", "json": "application/json",
		"mp4": "video/mp4", "exe": "application/octet-stream", "txt": "text/plain",
	} {
		if got := string(lc.Types.Lookup([]byte(ext), nil)); got != want {
			t.Errorf("%s: %q, want %q", ext, got, want)
		}
	}
	if lc.Types.Len() < 100 {
		t.Errorf("only %d extensions", lc.Types.Len())
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
}

func TestDefaults(t *testing.T) {
	cfg := mustConf(t, "http { server { location / { } } }")
	lc := ConfOf(cfg.HTTP.Servers[0].Locations[0])
	if want := cfg.Prefix + "/html"; string(lc.Root) != want || lc.Alias {
		t.Errorf("root %q alias %v, want %q", lc.Root, lc.Alias, want)
	}
	if len(lc.Index) != 1 || lc.Index[0].Raw != "index.html" {
		t.Errorf("index %v", lc.Index)
	}
	if got := string(lc.Types.Lookup([]byte("jpg"), nil)); got != "image/jpeg" || lc.Types.Len() != 3 {
		t.Errorf("default types: jpg %q, %d types", got, lc.Types.Len())
	}
	if string(lc.DefaultType) != "text/plain" || !lc.ETag || lc.IfModifiedSince != IMSExact || lc.MaxRanges != -1 ||
		lc.Expires.Mode != ExpiresOff || lc.Charset != "" || !lc.LogNotFound || lc.DisableSymlinks != SymlinksOff ||
		lc.OpenFileCache != nil || lc.CacheValid != time.Minute || lc.CacheMinUses != 1 || lc.CacheErrors ||
		lc.Autoindex || !lc.AutoindexExactSize || lc.AutoindexFormat != FormatHTML || lc.AutoindexLocaltime ||
		lc.Sendfile || lc.SendfileMaxChunk != 2<<20 || lc.TCPNoPush || !lc.TCPNoDelay ||
		lc.DirectIO != DirectIOOff || lc.DirectIOAlignment != 512 || lc.TryFiles != nil {
		t.Errorf("defaults: %+v", lc)
	}
	for _, typ := range defaultCharsetTypes {
		if !lc.CharsetTypes.Has([]byte(typ), nil) {
			t.Errorf("charset_types lacks %s", typ)
		}
	}
	if lc.CharsetTypes.Has([]byte("image/png"), nil) {
		t.Error("charset_types has image/png")
	}
}

func TestInheritance(t *testing.T) {
	cfg := mustConf(t, `http {
	root /srv/www/;
	index a.html b.html;
	expires 1h;
	types { text/x-a a; }
	open_file_cache max=10;
	charset_types text/css;
	server {
		try_files $uri =404;
		location /x/ {
			alias /data/x/;
			index c.html;
			location /x/y/ { }
		}
		location = /exact { alias /data/one; }
		location ~ ^/re/(.*)$ { alias /data/$1; }
		location /z/ {
			types { }
			expires off;
			open_file_cache off;
			charset_types *;
			internal;
			location /z/in/ { }
		}
	}
}`)
	srv := cfg.HTTP.Servers[0]
	s, x, xy, exact, re, z, zin := ServerConf(srv), ConfOf(srv.Locations[0]), ConfOf(srv.Locations[0].Locations[0]),
		ConfOf(srv.Locations[1]), ConfOf(srv.Locations[2]), ConfOf(srv.Locations[3]), ConfOf(srv.Locations[3].Locations[0])
	if string(s.Root) != "/srv/www" || s.Alias {
		t.Errorf("server root %q", s.Root)
	}
	if len(s.TryFiles) != 2 || x.TryFiles != nil {
		t.Errorf("try_files: server %d, location %d (not inherited)", len(s.TryFiles), len(x.TryFiles))
	}
	if string(x.Root) != "/data/x/" || !x.Alias || x.AliasLen != 3 || string(xy.Root) != "/data/x/" || !xy.Alias || xy.AliasLen != 3 {
		t.Errorf("alias: x %q %v %d, nested %q %v %d", x.Root, x.Alias, x.AliasLen, xy.Root, xy.Alias, xy.AliasLen)
	}
	if string(exact.Root) != "/data/one" || exact.AliasLen != 6 {
		t.Errorf("exact alias %q %d", exact.Root, exact.AliasLen)
	}
	if !re.AliasWhole || re.RootTmpl == nil || re.RootTmpl.Raw != "/data/$1" {
		t.Errorf("regex alias %+v", re)
	}
	if len(x.Index) != 1 || x.Index[0].Raw != "c.html" || len(xy.Index) != 1 || len(s.Index) != 2 {
		t.Errorf("index: s %d x %d xy %d", len(s.Index), len(x.Index), len(xy.Index))
	}
	if x.Expires.Mode != ExpiresAccess || x.Expires.Time != time.Hour || z.Expires.Mode != ExpiresOff || zin.Expires.Mode != ExpiresOff {
		t.Errorf("expires %+v %+v %+v", x.Expires, z.Expires, zin.Expires)
	}
	if x.Types.Lookup([]byte("a"), nil) == nil || x.Types.Lookup([]byte("html"), nil) != nil || z.Types.Len() != 0 || zin.Types.Len() != 0 {
		t.Error("types not inherited as nginx: a level's block replaces the defaults, an empty one empties them")
	}
	if x.OpenFileCache == nil || x.OpenFileCache != s.OpenFileCache || z.OpenFileCache != nil {
		t.Error("open_file_cache: one spec shared downward, off below")
	}
	if !x.CharsetTypes.Has([]byte("text/css"), nil) || !x.CharsetTypes.Has([]byte("text/html"), nil) || x.CharsetTypes.Has([]byte("text/plain"), nil) {
		t.Error("charset_types: text/html and the listed type only")
	}
	if !z.CharsetTypes.Has([]byte("image/png"), nil) {
		t.Error(`charset_types * matches any type`)
	}
	zc, zinc, xc := httpcore.LocationConf(srv.Locations[3]), httpcore.LocationConf(srv.Locations[3].Locations[0]), httpcore.LocationConf(srv.Locations[0])
	if !zc.Internal() || !zinc.Internal() || xc.Internal() {
		t.Errorf("internal (the core's, inherited as nginx merges it): z %v nested %v x %v", zc.Internal(), zinc.Internal(), xc.Internal())
	}
}

func TestDirectiveValues(t *testing.T) {
	cfg := mustConf(t, `http {
	server {
		location /a { expires modified -1d; if_modified_since before; max_ranges 0; disable_symlinks if_not_owner from=$document_root; }
		location /b { expires @15h30m; open_file_cache max=5 inactive=20s; open_file_cache_valid 2m; open_file_cache_min_uses 3; open_file_cache_errors on; }
		location /c { expires epoch; aio off; directio off; directio_alignment 4k; sendfile on; sendfile_max_chunk 512k; tcp_nopush on; tcp_nodelay off; }
		location /d { expires max; charset utf-8; source_charset UTF-8; autoindex on; autoindex_format jsonp; autoindex_exact_size off; autoindex_localtime on; }
		location /e { try_files $uri $uri/ @fallback; default_type application/octet-stream; etag off; log_not_found off; disable_symlinks on; }
		location /f { try_files /a /b/ =418; root html; }
	}
}`)
	l := cfg.HTTP.Servers[0].Locations
	a, b, c, d, e, f := ConfOf(l[0]), ConfOf(l[1]), ConfOf(l[2]), ConfOf(l[3]), ConfOf(l[4]), ConfOf(l[5])
	if a.Expires != (Expires{ExpiresModified, -24 * time.Hour}) || a.IfModifiedSince != IMSBefore || a.MaxRanges != 0 ||
		a.DisableSymlinks != SymlinksIfNotOwner || a.SymlinksFrom == nil || a.SymlinksFrom.Raw != "$document_root" {
		t.Errorf("a: %+v", a)
	}
	if b.Expires != (Expires{ExpiresDaily, 15*time.Hour + 30*time.Minute}) || *b.OpenFileCache != (CacheSpec{5, 20 * time.Second}) ||
		b.CacheValid != 2*time.Minute || b.CacheMinUses != 3 || !b.CacheErrors {
		t.Errorf("b: %+v", b)
	}
	if c.Expires.Mode != ExpiresEpoch || c.DirectIO != DirectIOOff || c.DirectIOAlignment != 4096 || !c.Sendfile ||
		c.SendfileMaxChunk != 512<<10 || !c.TCPNoPush || c.TCPNoDelay {
		t.Errorf("c: %+v", c)
	}
	if d.Expires.Mode != ExpiresMax || d.Charset != "utf-8" || d.SourceCharset != "UTF-8" || !d.Autoindex ||
		d.AutoindexFormat != FormatJSONP || d.AutoindexExactSize || !d.AutoindexLocaltime {
		t.Errorf("d: %+v", d)
	}
	if len(e.TryFiles) != 3 || !e.TryFiles[1].TestDir || e.TryFiles[1].Name.Raw != "$uri" || e.TryFiles[2].Name.Raw != "@fallback" ||
		string(e.DefaultType) != "application/octet-stream" || e.ETag || e.LogNotFound || e.DisableSymlinks != SymlinksOn || e.SymlinksFrom != nil {
		t.Errorf("e: %+v", e)
	}
	if len(f.TryFiles) != 3 || f.TryFiles[2].Code != 418 || !f.TryFiles[1].TestDir || string(f.Root) != cfg.Prefix+"/html" {
		t.Errorf("f: %+v root %q", f.TryFiles, f.Root)
	}
}

// Each refusal carries nginx's message (or, for what numaproxy does not do, says so).
func TestDirectiveErrors(t *testing.T) {
	for src, want := range map[string]string{
		"http { alias /x; }": `"alias" directive is not allowed here`,
		"http { server { location / { root /a; root /b; } } }":                           `"root" directive is duplicate`,
		"http { server { location / { root /a; alias /b; } } }":                          `"alias" directive is duplicate, "root" directive was specified earlier`,
		"http { server { location @n { alias /b; } } }":                                  `the "alias" directive cannot be used inside the named location`,
		"http { root $document_root/x; }":                                                `the $document_root variable cannot be used in the "root" directive`,
		"http { root /a/${realpath_root}; }":                                             `the $realpath_root variable cannot be used in the "root" directive`,
		"http { root /a/$; }":                                                            `invalid variable name`,
		"http { index ''; }":                                                             `index "" in "index" directive is invalid`,
		"http { try_files a; }":                                                          `"try_files" directive is not allowed here`,
		"http { server { try_files a; } }":                                               `invalid number of arguments in "try_files" directive`,
		"http { server { try_files a b; try_files a b; } }":                              `"try_files" directive is duplicate`,
		"http { server { try_files a =abc; } }":                                          `invalid code "=abc"`,
		"http { server { try_files a =1000; } }":                                         `invalid code "=1000"`,
		"http { server { try_files a =0; } }":                                            `invalid code "=0"`,
		"http { server { internal; } }":                                                  `"internal" directive is not allowed here`,
		"http { server { location / { internal; internal; } } }":                         `"internal" directive is duplicate`,
		"http { types { text/html html; image/x { } } }":                                 `unexpected "{"`,
		"http { default_type a; default_type b; }":                                       `"default_type" directive is duplicate`,
		"http { etag maybe; }":                                                           `invalid value "maybe" in "etag" directive`,
		"http { if_modified_since later; }":                                              `invalid value "later" in "if_modified_since" directive`,
		"http { max_ranges -1; }":                                                        `invalid value "-1" in "max_ranges" directive`,
		"http { expires 1x; }":                                                           `invalid value "1x" in "expires" directive, invalid value`,
		"http { expires 500ms; }":                                                        `invalid value "500ms" in "expires" directive`,
		"http { expires modified @1h; }":                                                 `daily time cannot be used with "modified" parameter`,
		"http { expires @25h; }":                                                         `daily time value must be less than 24 hours`,
		"http { expires later 1h; }":                                                     `invalid value "later" in "expires" directive`,
		"http { expires modified max; }":                                                 `invalid value "max" in "expires" directive`,
		"http { expires $e; }":                                                           `variables in expires are not supported yet`,
		"http { expires 1h; expires 2h; }":                                               `"expires" directive is duplicate`,
		"http { charset $c; }":                                                           `variables in charset are not supported yet`,
		"http { disable_symlinks maybe; }":                                               `invalid parameter "maybe"`,
		"http { disable_symlinks from=/a; }":                                             `"disable_symlinks" must have "off", "on" or "if_not_owner" parameter`,
		"http { disable_symlinks on off; }":                                              `duplicate parameters "on off"`,
		"http { disable_symlinks off from=/a; }":                                         `"from=" cannot be used with "off" parameter`,
		"http { open_file_cache inactive=1m; }":                                          `"open_file_cache" must have the "max" parameter`,
		"http { open_file_cache max=0; }":                                                `invalid "open_file_cache" parameter "max=0"`,
		"http { open_file_cache max=1 size=2; }":                                         `invalid "open_file_cache" parameter "size=2"`,
		"http { open_file_cache_valid 1x; }":                                             `invalid value "1x" in "open_file_cache_valid" directive`,
		"http { open_file_cache_min_uses x; }":                                           `invalid value "x" in "open_file_cache_min_uses" directive`,
		"http { autoindex_format yaml; }":                                                `invalid value "yaml" in "autoindex_format" directive`,
		"http { aio on; }":                                                               `"aio on" is unsupported on this platform`,
		"http { aio sometimes; }":                                                        `invalid value "sometimes" in "aio" directive`,
		"http { directio big; }":                                                         `invalid value "big" in "directio" directive`,
		"http { aio threads; }":                                                          `"aio threads" is not supported`,
		"http { directio 4m; }":                                                          `"directio 4m" is not supported`,
		"http { sendfile_max_chunk lots; }":                                              `invalid value "lots" in "sendfile_max_chunk" directive`,
		"http { types { include a b; } }":                                                `invalid number of arguments in "include" directive`,
		"http { server { location / { alias /a; } location /b { root /x; root /y; } } }": `"root" directive is duplicate`,
	} {
		_, err := loadConf(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n  err = %v\n want %q", src, err, want)
		}
	}
}

func TestTypesBlock(t *testing.T) {
	cfg := mustConf(t, `http {
	types { text/html html; TEXT/Plain TXT Text; }
	types { application/x-b b; image/x-dup html; }
	server { }
}`)
	lc := ServerConf(cfg.HTTP.Servers[0])
	for ext, want := range map[string]string{"txt": "TEXT/Plain", "TEXT": "TEXT/Plain", "b": "application/x-b", "html": "image/x-dup", "jpg": ""} {
		if got := string(lc.Types.Lookup([]byte(ext), nil)); got != want {
			t.Errorf("%s: %q, want %q", ext, got, want)
		}
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), `duplicate extension "html", content type: "image/x-dup", previous content type: "text/html"`) {
		t.Errorf("warnings %v", cfg.Warnings)
	}
}

func TestTemplate(t *testing.T) {
	vars := mapVars{"uri": "/a b", "host": "h", "1": "cap"}
	for src, want := range map[string]string{
		"plain": "plain", "$uri": "/a b", "${host}x": "hx", "/x/$1/$2": "/x/cap/", "$uri$host": "/a bh", "$unknown.": ".",
	} {
		tm, err := CompileTemplate(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := string(tm.Append(nil, vars)); got != want {
			t.Errorf("%s = %q, want %q", src, got, want)
		}
	}
	for _, bad := range []string{"$", "a$", "${x", "${}", "$-"} {
		if _, err := CompileTemplate(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

// mapVars is a Vars for tests.
type mapVars map[string]string

func (m mapVars) AppendVar(dst []byte, name string) ([]byte, bool) {
	v, ok := m[name]
	return append(dst, v...), ok
}
