package rewrite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

func loadConf(t *testing.T, src string) (*conf.Config, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf.Load(conf.Options{Registry: conf.MustRegistry(httpcore.Module, Module), Prefix: dir, File: file})
}

func TestReturnForms(t *testing.T) {
	cfg, err := loadConf(t, `http { server {
	return 301 https://$host$request_uri;
	location /a { return 200 "hello $remote_addr"; location /a/b { } }
	location /b { return https://example.com/; }
	location /c { return 204; }
} }`)
	if err != nil {
		t.Fatal(err)
	}
	srv := cfg.HTTP.Servers[0]
	ret := func(c any) *Return { return c.(*LocConf).Return }
	if r := ret(srv.Conf(Module)); r.Code != 301 || r.Text.String() != "https://$host$request_uri" {
		t.Errorf("server return %+v", r)
	}
	if r := ret(srv.Locations[0].Conf(Module)); r.Code != 200 || !r.Text.Uses("remote_addr") {
		t.Errorf("a return %+v", r)
	}
	if r := ret(srv.Locations[0].Locations[0].Conf(Module)); r != nil {
		t.Errorf("a nested location inherited return %+v", r)
	}
	if r := ret(srv.Locations[1].Conf(Module)); r.Code != 302 {
		t.Errorf("URL-only return %+v", r)
	}
	if r := ret(srv.Locations[2].Conf(Module)); r.Code != 204 || r.Text != nil {
		t.Errorf("code-only return %+v", r)
	}
	for src, want := range map[string]string{
		"http { server { location / {\nreturn 2000;\n} } }":   `invalid value "2000" in "return" directive`,
		"http {\nreturn 200;\n}":                              `"return" directive is not allowed here`,
		"http { server { location / {\nreturn 200 $x;\n} } }": `unknown "x" variable`,
	} {
		if _, err := loadConf(t, src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
}
