package cidr

import (
	"net/netip"
	"testing"
)

// Parse and ParseAddrPort read what nginx's ngx_ptocidr and ngx_parse_addr_port
// read, and refuse what they refuse.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   string
		masked bool
	}{
		{"10.0.0.0/8", "10.0.0.0/8", false},
		{"10.1.2.3/8", "10.0.0.0/8", true},
		{"192.168.1.1", "192.168.1.1/32", false},
		{"1..2.3", "1.0.2.3/32", false}, // ngx_inet_addr: an empty octet is 0
		{"01.2.3.4", "1.2.3.4/32", false},
		{"2001:db8::/32", "2001:db8::/32", false},
		{"2001:db8::1/32", "2001:db8::/32", true},
		{"::1", "::1/128", false},
		{"0.0.0.0/0", "0.0.0.0/0", false},
	} {
		p, masked, err := Parse(c.in)
		if err != nil || p.String() != c.want || masked != c.masked {
			t.Errorf("Parse(%q) = %v %v %v, want %s %v", c.in, p, masked, err, c.want, c.masked)
		}
	}
	for _, bad := range []string{"", "all", "256.0.0.1", "1.2.3", "1.2.3.4.5", "255.255.255.255", "10.0.0.0/33",
		"10.0.0.0/", "10.0.0.0/+8", "fe80::1%eth0", "example.com", "::/129"} {
		if p, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, p)
		}
	}
}

func TestParseAddrPort(t *testing.T) {
	for in, want := range map[string]string{
		"1.2.3.4": "1.2.3.4:0", "1.2.3.4:80": "1.2.3.4:80", "::1": "[::1]:0", "[::1]:443": "[::1]:443",
		"2001:db8::5": "[2001:db8::5]:0", "[2001:db8::5]:65535": "[2001:db8::5]:65535",
	} {
		if a, ok := ParseAddrPort([]byte(in)); !ok || a.String() != want {
			t.Errorf("ParseAddrPort(%q) = %v %v, want %s", in, a, ok, want)
		}
	}
	for _, bad := range []string{"", "[::1]", "[::1]:", "1.2.3.4:0", "1.2.3.4:65536", "1.2.3.4:x", "host:80", "[1.2.3.4]:80x", " 1.2.3.4"} {
		if a, ok := ParseAddrPort([]byte(bad)); ok {
			t.Errorf("ParseAddrPort(%q) = %v, want a refusal", bad, a)
		}
	}
}

func TestSetContains(t *testing.T) {
	s := &Set{Nets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}}
	for a, want := range map[string]bool{"10.1.1.1": true, "11.0.0.1": false, "::ffff:10.0.0.1": true,
		"2001:db8::9": true, "2001:db9::1": false} {
		if got := s.Contains(netip.MustParseAddr(a)); got != want {
			t.Errorf("Contains(%s) = %v", a, got)
		}
	}
	if s.Contains(netip.Addr{}) {
		t.Error("a unix-domain peer matched without unix:")
	}
	s.Unix = true
	if !s.Contains(netip.Addr{}) {
		t.Error("a unix-domain peer did not match unix:")
	}
}
