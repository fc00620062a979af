package realip

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/cidr"
	"github.com/numaproxy/numaproxy/internal/conftest"
)

func load(t *testing.T, src string) (*conf.Config, error) {
	t.Helper()
	return conftest.Load(t, conf.MustRegistry(httpcore.Module, Module), src)
}

// The directives are refused where nginx refuses them, with the file and line.
func TestDirectiveErrors(t *testing.T) {
	for src, want := range map[string]string{
		"http {\n real_ip_recursive maybe;\n}":            `t.conf:2`,
		"http { set_real_ip_from 10.0.0.0/33; }":          `host not found in set_real_ip_from "10.0.0.0/33"`,
		"http { set_real_ip_from no-such-host.invalid; }": `host not found`,
		"http { real_ip_recursive maybe; }":               `it must be "on" or "off"`,
		"http { set_real_ip_from all; }":                  `host not found in set_real_ip_from "all"`,
	} {
		_, err := load(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
	if _, err := load(t, "http {\n real_ip_header proxy_protocol;\n}"); err != nil {
		t.Errorf("proxy_protocol: %v", err)
	}
}

// A level with set_real_ip_from replaces the trusted list it would inherit; the
// header and recursion inherit on their own; a name is resolved when read.
func TestInheritance(t *testing.T) {
	cfg, err := load(t, `http {
    set_real_ip_from 10.0.0.0/8; real_ip_header X-Forwarded-For; real_ip_recursive on;
    server {
        location /a { }
        location /b { set_real_ip_from 192.0.2.1; real_ip_header X-Client; }
        location /c { set_real_ip_from localhost; real_ip_recursive off; }
    }
}`)
	if err != nil {
		t.Fatal(err)
	}
	locs := cfg.HTTP.Servers[0].Locations
	a, b, c := locs[0].Conf(Module).(*LocConf), locs[1].Conf(Module).(*LocConf), locs[2].Conf(Module).(*LocConf)
	if !a.From.Contains(netip.MustParseAddr("10.1.1.1")) || a.kind != xForwardedFor || !a.Recursive {
		t.Errorf("/a: %+v", a)
	}
	if b.From.Contains(netip.MustParseAddr("10.1.1.1")) || !b.From.Contains(netip.MustParseAddr("192.0.2.1")) ||
		b.kind != otherHeader || b.header != "x-client" || !b.Recursive {
		t.Errorf("/b: %+v", b)
	}
	if !c.From.Contains(netip.MustParseAddr("127.0.0.1")) || c.kind != xForwardedFor || c.Recursive {
		t.Errorf("/c: %+v", c)
	}
}

// walk is ngx_http_get_forwarded_addr_internal: the list's last address behind a
// trusted peer, or with recursion the last one that is not trusted.
func TestWalk(t *testing.T) {
	from := &cidr.Set{}
	for _, p := range []string{"127.0.0.0/8", "10.0.0.0/8"} {
		from.Nets = append(from.Nets, netip.MustParsePrefix(p))
	}
	peer := netip.MustParseAddrPort("127.0.0.1:5000")
	for _, c := range []struct {
		v         string
		recursive bool
		want      string
		st        walkState
	}{
		{"1.2.3.4", false, "1.2.3.4:0", stOK},
		{"1.2.3.4, 10.0.0.1", false, "10.0.0.1:0", stOK},
		{"1.2.3.4, 10.0.0.1", true, "1.2.3.4:0", stOK},
		{"1.2.3.4, 198.51.100.1, 10.0.0.1", true, "198.51.100.1:0", stDone},
		{"10.0.0.2, 10.0.0.1", true, "10.0.0.2:0", stOK},
		{"1.2.3.4,,  ", false, "1.2.3.4:0", stOK},
		{"bad, 10.0.0.1", true, "10.0.0.1:0", stDone},
		{"bad", false, "127.0.0.1:5000", stNone},
		{"", false, "127.0.0.1:5000", stNone},
		{"[2001:db8::1]:80", false, "[2001:db8::1]:80", stOK},
	} {
		a, st := walk(peer, []byte(c.v), from, c.recursive)
		if a.String() != c.want || st != c.st {
			t.Errorf("walk(%q, %v) = %v %d, want %s %d", c.v, c.recursive, a, st, c.want, c.st)
		}
	}
}
