package resolver

import (
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/conftest"
)

func loadHTTP(t *testing.T, src string) (*conf.Config, error) {
	t.Helper()
	return conftest.Load(t, conf.MustRegistry(httpcore.Module, Module), src)
}

// TestDirectiveInheritance: as nginx, each level takes the nearest resolver and,
// separately, the nearest resolver_timeout.
func TestDirectiveInheritance(t *testing.T) {
	cfg, err := loadHTTP(t, `events {}
http {
	resolver 127.0.0.1:5300 valid=10s;
	server {
		resolver_timeout 5s;
		location /a { }
		location /b { resolver [::1] ipv6=off; }
	}
	server {
		resolver 127.0.0.2;
		location /c { resolver_timeout 1s; }
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := cfg.HTTP.Servers[0], cfg.HTTP.Servers[1]
	a := s1.Locations[0].Conf(Module).(*LocConf)
	b := s1.Locations[1].Conf(Module).(*LocConf)
	c := s2.Locations[0].Conf(Module).(*LocConf)
	top := HTTPConf(cfg.HTTP)
	if top.Resolver == nil || top.Resolver.Valid != 10*time.Second || top.Timeout != 30*time.Second {
		t.Fatalf("http level %+v", top)
	}
	if a.Resolver != top.Resolver || a.Timeout != 5*time.Second {
		t.Errorf("/a %+v", a)
	}
	if b.Resolver.Servers[0].String() != "[::1]:53" || !b.Resolver.NoIPv6 || b.Timeout != 5*time.Second {
		t.Errorf("/b %+v", b)
	}
	if c.Resolver.Servers[0].String() != "127.0.0.2:53" || c.Timeout != time.Second {
		t.Errorf("/c %+v", c)
	}
	if a.Resolver.key == b.Resolver.key || a.Resolver.key == "" {
		t.Errorf("settings keys %q %q", a.Resolver.key, b.Resolver.key)
	}

	for src, want := range map[string]string{
		"events {} http { server { location / {\nresolver 127.0.0.1 ipv4=off ipv6=off;\n} } }": `"ipv4" and "ipv6" cannot both be "off" in `,
		"events {} http {\nresolver_timeout abc;\n}":                                           `invalid value "abc" in "resolver_timeout" directive`,
		"events {} http {\nresolver 127.0.0.1;\nresolver 127.0.0.2;\n}":                        `is duplicate`,
		"events {}\nresolver 127.0.0.1;\n":                                                     `"resolver" directive is not allowed here`,
	} {
		if _, err := loadHTTP(t, src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", src, err, want)
		}
	}
}
