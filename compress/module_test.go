package compress

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

func loadConf(t *testing.T, src string) *conf.Config {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: conf.MustRegistry(httpcore.Module, Module), Prefix: dir, File: file})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestInheritance: each directive is inherited from the level above unless the
// level sets it, as nginx merges its loc_conf; the defaults are nginx's (and
// ngx_brotli's, zstd-nginx-module's).
func TestInheritance(t *testing.T) {
	cfg := loadConf(t, `http {
	gzip on;
	gzip_types text/plain;
	gzip_proxied expired no-cache;
	server {
		gzip_comp_level 6;
		brotli on;
		location /a { }
		location /b { gzip off; gzip_types *; brotli_min_length 1k; zstd on; zstd_comp_level 19; gzip_vary on; gzip_buffers 4 16k; }
	}
}`)
	a := cfg.HTTP.Servers[0].Locations[0].Conf(Module).(*LocConf)
	b := cfg.HTTP.Servers[0].Locations[1].Conf(Module).(*LocConf)
	g := a.Coders[Gzip]
	if !g.On || g.Level != 6 || g.MinLength != 20 || !g.Types.match([]byte("text/plain")) || !g.Types.match([]byte("text/html")) || g.Types.match([]byte("image/png")) {
		t.Errorf("/a gzip: %+v", g)
	}
	if a.Proxied != ProxiedExpired|ProxiedNoCache || a.Vary || a.HTTPMinor != 1 || a.BufNum*a.BufSize != 128<<10 {
		t.Errorf("/a: proxied %b vary %v http 1.%d buffers %d*%d", a.Proxied, a.Vary, a.HTTPMinor, a.BufNum, a.BufSize)
	}
	if br := a.Coders[Brotli]; !br.On || br.Level != 6 || br.MinLength != 20 || !br.Types.match([]byte("text/html")) || br.Types.match([]byte("text/plain")) {
		t.Errorf("/a brotli: %+v", br)
	}
	if a.Coders[Zstd].On || a.Coders[Zstd].Level != 1 {
		t.Errorf("/a zstd: %+v", a.Coders[Zstd])
	}
	if g := b.Coders[Gzip]; g.On || !g.Types.Any || g.Level != 6 {
		t.Errorf("/b gzip: %+v", g)
	}
	if b.Coders[Brotli].MinLength != 1024 || !b.Coders[Zstd].On || b.Coders[Zstd].Level != 19 || !b.Vary || b.BufNum*b.BufSize != 64<<10 {
		t.Errorf("/b: %+v", b)
	}
}

// TestTokenAccepted is ngx_brotli's Accept-Encoding test, which brotli_static and
// zstd_static on use: the token alone, its q-value not read.
func TestTokenAccepted(t *testing.T) {
	for ae, want := range map[string]bool{
		"br": true, "br,gzip": true, "gzip, br": true, "gzip,br;q=0": true, "BR": true, " br ": true,
		"": false, "b": false, "brotli": false, "xbr": false, "gzip, xbr, br": false, "gzip;br": false,
	} {
		if got := tokenAccepted([]byte(ae), "br"); got != want {
			t.Errorf("%q: %v, want %v", ae, got, want)
		}
	}
}
