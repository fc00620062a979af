package resolver

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
)

func stmt(line string) *conf.Stmt {
	f := strings.Fields(line)
	pos := conf.Pos{File: "/etc/numaproxy/site.conf", Line: 5}
	s := &conf.Stmt{Name: f[0], Pos: pos}
	for _, a := range f[1:] {
		s.Args = append(s.Args, conf.Token{Value: a, Pos: pos})
	}
	return s
}

func TestParseResolver(t *testing.T) {
	lookupIP = func(host string) ([]net.IP, error) {
		if host == "dns.local" {
			return []net.IP{net.ParseIP("10.9.9.1"), net.ParseIP("fd00::53")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	t.Cleanup(func() { lookupIP = net.LookupIP })

	cfg, err := ParseResolver(stmt("resolver 127.0.0.1 [::1]:5353 dns.local:54 valid=5m ipv6=off status_zone=z"))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53"), netip.MustParseAddrPort("[::1]:5353"),
		netip.MustParseAddrPort("10.9.9.1:54"), netip.MustParseAddrPort("[fd00::53]:54")}
	if !slices.Equal(cfg.Servers, want) || cfg.Valid != 5*time.Minute || !cfg.NoIPv6 || cfg.NoIPv4 || cfg.StatusZone != "z" {
		t.Errorf("%+v", cfg)
	}

	// The messages nginx 1.22 prints for these (nginx -t), but for ipv4=, which is
	// nginx 1.23.1's, and unix:, which nginx takes and cannot use.
	for _, tc := range []struct{ line, err string }{
		{"resolver 127.0.0.1 valid=abc", "invalid parameter: valid=abc"},
		{"resolver 127.0.0.1 valid=1500ms", "invalid parameter: valid=1500ms"},
		{"resolver 127.0.0.1 valid=", "invalid parameter: valid="},
		{"resolver 127.0.0.1 ipv6=maybe", "invalid parameter: ipv6=maybe"},
		{"resolver 127.0.0.1 ipv6=OFF", "invalid parameter: ipv6=OFF"},
		{"resolver 127.0.0.1 ipv4=off ipv6=off", `"ipv4" and "ipv6" cannot both be "off"`},
		{"resolver valid=30s", "no name servers defined"},
		{"resolver 127.0.0.1:0", `invalid port in resolver "127.0.0.1:0"`},
		{"resolver 127.0.0.1:70000", `invalid port in resolver "127.0.0.1:70000"`},
		{"resolver 127.0.0.1:abc", `invalid port in resolver "127.0.0.1:abc"`},
		{"resolver 127.0.0.1:", `invalid port in resolver "127.0.0.1:"`},
		{"resolver ::1", `invalid port in resolver "::1"`},
		{"resolver [::1", `invalid host in resolver "[::1"`},
		{"resolver 127.0.0.1/24", `invalid host in resolver "127.0.0.1/24"`},
		{"resolver nonexistent.invalid", `host not found in resolver "nonexistent.invalid"`},
		{"resolver unix:/run/dns.sock", `unix domain sockets are not supported in resolver "unix:/run/dns.sock"`},
	} {
		_, err := ParseResolver(stmt(tc.line))
		if want := tc.err + " in /etc/numaproxy/site.conf:5"; err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", tc.line, err, want)
		}
	}
}

func TestParseTimeout(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{{"5s", 5 * time.Second}, {"1500ms", 1500 * time.Millisecond}, {"0", time.Nanosecond}} {
		if d, err := ParseTimeout(stmt("resolver_timeout " + tc.arg)); err != nil || d != tc.want {
			t.Errorf("%s: %v %v", tc.arg, d, err)
		}
	}
	_, err := ParseTimeout(stmt("resolver_timeout abc"))
	if want := `invalid value "abc" in "resolver_timeout" directive in /etc/numaproxy/site.conf:5`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
