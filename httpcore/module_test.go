package httpcore

import (
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/internal/conftest"
)

var testRegistry = conf.MustRegistry(Module)

func loadConf(t testing.TB, src string) (*conf.Config, error) {
	t.Helper()
	return conftest.Load(t, testRegistry, src)
}

func mustConf(t testing.TB, src string) *conf.Config {
	t.Helper()
	cfg, err := loadConf(t, src)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func lc(l *conf.Location) *LocConf { return LocationConf(l) }

func TestCoreDirectives(t *testing.T) {
	cfg := mustConf(t, `http {
	keepalive_timeout 30s 25s;
	server {
		client_max_body_size 10m;
		location / { error_page 502 504 =200 /fallback; error_page 404 @named; }
		location /b { server_tokens off; }
	}
}`)
	a, b := lc(cfg.HTTP.Servers[0].Locations[0]), lc(cfg.HTTP.Servers[0].Locations[1])
	if a.ClientMaxBodySize != 10<<20 || a.KeepaliveTimeout != 30*time.Second || a.KeepaliveHeader != 25*time.Second || !a.ServerTokens {
		t.Errorf("a = %+v", a)
	}
	if b.ServerTokens || b.KeepaliveRequests != 1000 || b.ErrorPages != nil {
		t.Errorf("b = %+v", b)
	}
	if ep := a.ErrorPages; len(ep) != 3 || ep[1].Code != 504 || ep[1].Status != 200 || ep[2].Target != "@named" || ep[2].Status != 0 || !a.HasErrorPage(404) {
		t.Errorf("error pages %+v", ep)
	}
	// A target with variables is decided when an error comes (nginx's complex value).
	vars := lc(mustConf(t, `http { server { location / { error_page 404 /e/$status.html; error_page 497 https://$host$request_uri; error_page 500 /literal$; } } }`).HTTP.Servers[0].Locations[0])
	if ep := vars.ErrorPages; len(ep) != 3 || ep[0].URI == nil || ep[0].URI.String() != "/e/$status.html" || ep[1].URI == nil || ep[2].URI != nil {
		t.Errorf("error pages with variables %+v", ep)
	}
	for src, want := range map[string]string{
		"http { server { location / {\nerror_page 200 /x;\n} } }":               `value must be between 300 and 599`,
		"http { server { location / {\nclient_header_timeout 1s;\n} } }":        `"client_header_timeout" directive is not allowed here`,
		"http { server { location / {\nlarge_client_header_buffers 4 1;\n} } }": `"large_client_header_buffers" directive is not allowed here`,
		"http {\nlarge_client_header_buffers 4 1;\n}":                           `invalid value "1" in "large_client_header_buffers" directive`,
		"http { server { location / {\nerror_page 404 /e/$nosuchvar;\n} } }":    `unknown "nosuchvar" variable`,
	} {
		_, err := loadConf(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
}

// TestLingeringDirectives: nginx's defaults (on, 30s, 5s), values set at any level
// and inherited, and lingering_close's values (any case, as nginx's enums).
func TestLingeringDirectives(t *testing.T) {
	cfg := mustConf(t, `http {
	lingering_time 10s;
	server {
		lingering_close ALWAYS;
		location /inherit { }
		location /own { lingering_close off; lingering_timeout 1s; }
	}
	server { location / { } }
}`)
	s1, s2 := cfg.HTTP.Servers[0], cfg.HTTP.Servers[1]
	for _, tc := range []struct {
		l       *conf.Location
		close   LingeringClose
		time    time.Duration
		timeout time.Duration
	}{
		{s1.Locations[0], LingeringAlways, 10 * time.Second, 5 * time.Second},
		{s1.Locations[1], LingeringOff, 10 * time.Second, time.Second},
		{s2.Locations[0], LingeringOn, 10 * time.Second, 5 * time.Second},
	} {
		c := lc(tc.l)
		if c.LingeringClose != tc.close || c.LingeringTime != tc.time || c.LingeringTimeout != tc.timeout {
			t.Errorf("%s: %d %v %v, want %d %v %v", tc.l.Path, c.LingeringClose, c.LingeringTime, c.LingeringTimeout, tc.close, tc.time, tc.timeout)
		}
	}
	if d := mustConf(t, "http { server { location / { } } }"); lc(d.HTTP.Servers[0].Locations[0]).LingeringTime != 30*time.Second {
		t.Error("lingering_time's default is not 30s")
	}
	if _, err := loadConf(t, "http { lingering_close sometimes; }"); err == nil || !strings.Contains(err.Error(), `invalid value "sometimes" in "lingering_close" directive`) {
		t.Errorf("bad lingering_close: %v", err)
	}
}

// TestLimitExceptConf: the methods limited (GET brings HEAD, names in any case),
// the block's implicit location, and nginx's refusals.
func TestLimitExceptConf(t *testing.T) {
	cfg := mustConf(t, "http { server { location /a { limit_except get PUT { } location /a/in { } } } }")
	a := cfg.HTTP.Servers[0].Locations[0]
	l := lc(a)
	if l.limitLoc == nil || l.limitLoc.Kind != conf.LocLimitExcept || l.limitLoc.Parent != a || l.limitLoc.Owner() != a {
		t.Fatalf("limit_except location %+v", l.limitLoc)
	}
	for m, limited := range map[string]bool{"GET": false, "HEAD": false, "PUT": false, "POST": true, "DELETE": true, "TRACE": true, "get": true} {
		if got := l.limitExcept&methodBit([]byte(m)) != 0; got != limited {
			t.Errorf("%s limited: %v, want %v", m, got, limited)
		}
	}
	if in := lc(a.Locations[1]); in.limitLoc != nil {
		t.Errorf("a nested location inherited limit_except")
	}
	if head := lc(mustConf(t, "http { server { location / { limit_except HEAD { } } } }").HTTP.Servers[0].Locations[0]); head.limitExcept&methodBit([]byte("GET")) == 0 {
		t.Errorf("HEAD alone lets GET through")
	}
	for src, want := range map[string]string{
		"http { server { location / {\nlimit_except TRACE { }\n} } }":                        `invalid method "TRACE"`,
		"http { server { location / { limit_except GET { }\nlimit_except POST { } } } }":     `"limit_except" directive is duplicate`,
		"http { server {\nlimit_except GET { }\n} }":                                         `"limit_except" directive is not allowed here`,
		"http { server { location / { limit_except GET {\nclient_max_body_size 1m;\n} } } }": `"client_max_body_size" directive is not allowed here`,
	} {
		_, err := loadConf(t, src)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ":2") {
			t.Errorf("%q: %v, want %s at line 2", src, err, want)
		}
	}
}
