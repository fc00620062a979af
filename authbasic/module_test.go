package authbasic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/static"
	"github.com/numaproxy/numaproxy/upstream"
)

func loadConf(t testing.TB, src string) (*conf.Config, string, error) {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "conf"), 0o755)
	file := filepath.Join(dir, "conf", "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: conf.MustRegistry(Module), Prefix: dir, File: file})
	return cfg, dir, err
}

func TestDirectives(t *testing.T) {
	cfg, dir, err := loadConf(t, `http {
    auth_basic_user_file users;
    server {
        listen 127.0.0.1:1;
        auth_basic "top";
        location /a/ { }
        location /b/ { auth_basic off; }
        location /c/ { auth_basic "c"; auth_basic_user_file /etc/other; }
        location /d/ { auth_basic_user_file ../users; }
        location /e/ { auth_basic_user_file users; }
    }
    server {
        listen 127.0.0.1:2;
        location / { auth_basic_user_file users; }
    }
}
`)
	if err != nil {
		t.Fatal(err)
	}
	srv := cfg.HTTP.Servers[0]
	byPath := map[string]*LocConf{}
	for _, l := range srv.Locations {
		byPath[l.Path] = ConfOf(l)
	}
	users := filepath.Join(dir, "conf") + "/users"
	for _, tc := range []struct {
		lc      *LocConf
		enabled bool
		realm   string
		file    string
	}{
		{ServerConf(srv), true, "top", users},
		{byPath["/a/"], true, "top", users},
		{byPath["/b/"], false, "off", users},
		{byPath["/c/"], true, "c", "/etc/other"},
		{byPath["/d/"], true, "top", filepath.Join(dir, "conf") + "/../users"},
		{byPath["/e/"], true, "top", users},
		{ConfOf(cfg.HTTP.Servers[1].Locations[0]), false, "", users},
	} {
		if tc.lc.Enabled() != tc.enabled || tc.lc.Realm != tc.realm || tc.lc.File.Path != tc.file {
			t.Errorf("%+v: want enabled %v realm %q file %q", tc.lc, tc.enabled, tc.realm, tc.file)
		}
	}
	if got := string(byPath["/c/"].Challenge); got != `Basic realm="c"` {
		t.Errorf("challenge %q", got)
	}
	// One UserFile per path, shared by every location that names it.
	files := MainConfOf(cfg).Files()
	if len(files) != 3 || byPath["/a/"].File != byPath["/e/"].File {
		t.Errorf("files %v", files)
	}
}

func TestDirectiveErrors(t *testing.T) {
	for src, want := range map[string]string{
		`http { auth_basic "a"; auth_basic "b"; }`:                 `"auth_basic" directive is duplicate`,
		`http { auth_basic_user_file a; auth_basic_user_file b; }`: `"auth_basic_user_file" directive is duplicate`,
		`http { auth_basic $nosuch; }`:                             `unknown "nosuch" variable`,
		`http { auth_basic_user_file /etc/$nosuch; }`:              `unknown "nosuch" variable`,
		`http { auth_basic "a\nb"; }`:                              "would split the WWW-Authenticate header",
		`http { auth_basic_user_file ""; }`:                        "empty file name",
		`http { auth_basic; }`:                                     `invalid number of arguments in "auth_basic" directive`,
		`auth_basic "x";`:                                          `"auth_basic" directive is not allowed here`,
	} {
		_, _, err := loadConf(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// The module's directives clash with none of the binary's, so wiring it in is adding
// it to the registry.
func TestRegistersWithTheBinarysModules(t *testing.T) {
	if _, err := conf.NewRegistry(domains.Module, upstream.Module, proxy.Module, static.Module, Module); err != nil {
		t.Fatal(err)
	}
}
