package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/headers"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/resolver"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/upstream"
)

var testRegistry = conf.MustRegistry(upstream.Module, httpcore.Module, resolver.Module, rewrite.Module, Module, headers.Module)

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

func lc(l *conf.Location) *LocConf { return l.Conf(Module).(*LocConf) }

func cc(l *conf.Location) *httpcore.LocConf { return httpcore.LocationConf(l) }

func headerNames(hs []HeaderSetting) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name+"="+h.Value.String())
	}
	return strings.Join(out, " ")
}

func TestSetHeaderInheritance(t *testing.T) {
	cfg := mustConf(t, `http {
	proxy_set_header X-Top top;
	server {
		location /inherit { }
		location /own { proxy_set_header X-Own own; proxy_set_header Host $host; }
	}
	server {
		proxy_set_header X-Server s;
		location / { }
	}
	server { location / { } }
}`)
	s1, s2 := cfg.HTTP.Servers[0], cfg.HTTP.Servers[1]
	if got := headerNames(lc(s1.Locations[0]).SetHeaders); got != "Host=$proxy_host Connection=close X-Top=top" {
		t.Errorf("inherited: %s", got)
	}
	// A level that sets any proxy_set_header replaces all inherited ones; nginx's
	// defaults stay unless overridden.
	if got := headerNames(lc(s1.Locations[1]).SetHeaders); got != "Host=$host Connection=close X-Own=own" {
		t.Errorf("own: %s", got)
	}
	if got := headerNames(lc(s2.Locations[0]).SetHeaders); got != "Host=$proxy_host Connection=close X-Server=s" {
		t.Errorf("server level: %s", got)
	}
	noHTTP := mustConf(t, "http { server { location / { } } }")
	if got := headerNames(lc(noHTTP.HTTP.Servers[0].Locations[0]).SetHeaders); got != "Host=$proxy_host Connection=close" {
		t.Errorf("defaults: %s", got)
	}
}

func TestDefaultsAndOverrides(t *testing.T) {
	cfg := mustConf(t, `http {
	proxy_read_timeout 5s;
	keepalive_timeout 30s 25s;
	server {
		client_max_body_size 10m;
		location / { proxy_http_version 1.1; proxy_buffering off; proxy_next_upstream error http_502 non_idempotent; }
		location /b { proxy_next_upstream off; server_tokens off; }
	}
}`)
	a, b := lc(cfg.HTTP.Servers[0].Locations[0]), lc(cfg.HTTP.Servers[0].Locations[1])
	ac, bc := cc(cfg.HTTP.Servers[0].Locations[0]), cc(cfg.HTTP.Servers[0].Locations[1])
	if a.ReadTimeout != 5*time.Second || a.ConnectTimeout != 60*time.Second || ac.ClientMaxBodySize != 10<<20 ||
		a.HTTPMinor != 1 || a.Buffering || ac.KeepaliveTimeout != 30*time.Second || ac.KeepaliveHeader != 25*time.Second {
		t.Errorf("a = %+v %+v", a, ac)
	}
	if a.NextUpstream != NextError|NextHTTP502|NextNonIdempotent || b.NextUpstream != 0 {
		t.Errorf("next upstream %b %b", a.NextUpstream, b.NextUpstream)
	}
	if !ac.ServerTokens || bc.ServerTokens || b.HTTPMinor != 0 || !b.Buffering || bc.KeepaliveRequests != 1000 {
		t.Errorf("b = %+v %+v", b, bc)
	}
}

func TestProxyPassForms(t *testing.T) {
	cfg := mustConf(t, `http {
	upstream backend { server 127.0.0.1:9001; }
	server {
		location /a/ { proxy_pass http://backend; }
		location /b/ { proxy_pass http://backend/x/; location /b/c/ { } }
		location /c/ { proxy_pass http://127.0.0.1:9002/; }
		location ~ \.php$ { proxy_pass http://127.0.0.1:9003; }
	}
}`)
	locs := cfg.HTTP.Servers[0].Locations
	a, b, c, re := lc(locs[0]).Pass, lc(locs[1]).Pass, lc(locs[2]).Pass, lc(locs[3]).Pass
	if a.Group.Name != "backend" || a.HasURI || b.URI != "/x/" || !b.HasURI || b.Group != a.Group {
		t.Errorf("a %+v b %+v", a, b)
	}
	if c.Group.Peers[0].Addr.String() != "127.0.0.1:9002" || !c.Group.Implicit || c.URI != "/" || re.HasURI {
		t.Errorf("c %+v re %+v", c, re)
	}
	if lc(locs[1].Locations[0]).Pass != nil {
		t.Error("proxy_pass inherited by a nested location")
	}
}

func TestModuleErrors(t *testing.T) {
	tests := map[string]string{
		"http { server { location ~ x {\nproxy_pass http://127.0.0.1:1/u;\n} } }":                `"proxy_pass" cannot have URI part in location given by regular expression in `,
		"http { server { location / {\nproxy_pass ftp://x;\n} } }":                               `invalid value "ftp://x" in "proxy_pass" directive, invalid URL prefix`,
		"http { server { location / {\nproxy_pass http://$host;\nproxy_redirect default;\n} } }": `"proxy_redirect default" cannot be used with "proxy_pass" directive with variables in `,
		"http { server { location / {\nproxy_pass http://$nosuch;\n} } }":                        `unknown "nosuch" variable`,
		"http { server { location / {\nproxy_buffer_size 16k;\n} } }":                            `"proxy_busy_buffers_size" must be less than the size of all "proxy_buffers" minus one buffer in `,
		"http { server { location / {\nproxy_buffers 1 8k;\n} } }":                               `there must be at least 2 "proxy_buffers" in `,
		"http { server { location / {\nproxy_max_temp_file_size 1k;\n} } }":                      `"proxy_max_temp_file_size" must be equal to zero to disable temporary files usage`,
		"http { server { location / {\nproxy_pass http://nowhere.invalid;\n} } }":                `host not found in upstream "nowhere.invalid" in `,
		"http { server {\nproxy_pass http://127.0.0.1:1;\n} }":                                   `"proxy_pass" directive is not allowed here in `,
		"http { server { location / {\nproxy_set_header X $nosuch;\n} } }":                       `unknown "nosuch" variable`,
		"http { server { location / {\nreturn 2000;\n} } }":                                      `invalid value "2000" in "return" directive`,
		"http { server { location / {\nerror_page 200 /x;\n} } }":                                `value must be between 300 and 599`,
		"http { server { location / {\nproxy_http_version 2;\n} } }":                             `invalid value "2" in "proxy_http_version" directive`,
		"http { server { location / {\nproxy_next_upstream error sometimes;\n} } }":              `invalid value "sometimes" in "proxy_next_upstream" directive`,
		"http { server { location / {\nclient_header_timeout 1s;\n} } }":                         `"client_header_timeout" directive is not allowed here`,
		"http { server { location / {\nadd_header X y sometimes;\n} } }":                         `invalid value "sometimes" in "add_header" directive`,
	}
	for src, want := range tests {
		_, err := loadConf(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
}
