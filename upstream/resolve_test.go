package upstream

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/resolver"
)

func loadWithResolver(t *testing.T, src string) (*conf.Config, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := conf.MustRegistry(Module, httpcore.Module, resolver.Module)
	return conf.Load(conf.Options{Registry: reg, Prefix: dir, File: file})
}

// TestServerResolve: nginx 1.27.3's server ... resolve: a name is left for run
// time (one that does not resolve now is no error), an address stays fixed; the
// group needs a zone and a resolver, its own or the http level's.
func TestServerResolve(t *testing.T) {
	cfg, err := loadWithResolver(t, `events {} http {
	resolver 127.0.0.1:5300;
	resolver_timeout 7s;
	upstream a { zone a 64k; server nowhere.invalid:8080 resolve weight=3; server 10.0.0.1 resolve; server b.test resolve backup; }
	upstream b { zone b; resolver 127.0.0.2 valid=5s; resolver_timeout 2s; server b.test resolve; }
	server { }
}`)
	if err != nil {
		t.Fatal(err)
	}
	a, b := GroupsOf(cfg).Lookup("a"), GroupsOf(cfg).Lookup("b")
	if len(a.Resolve) != 2 || a.Resolve[0].Host != "nowhere.invalid" || a.Resolve[0].Port != 8080 || a.Resolve[0].Weight != 3 ||
		!a.Resolve[1].Backup || a.Resolve[1].Port != 80 || len(a.Peers) != 1 || a.Peers[0].Addr.String() != "10.0.0.1:80" {
		t.Fatalf("a: %+v %+v", a.Resolve, a.Peers)
	}
	if a.Resolver == nil || a.Resolver.Servers[0].String() != "127.0.0.1:5300" || a.ResolverTimeout != 7*time.Second {
		t.Errorf("a's resolver %+v %v", a.Resolver, a.ResolverTimeout)
	}
	if b.Resolver.Servers[0].String() != "127.0.0.2:53" || b.Resolver.Valid != 5*time.Second || b.ResolverTimeout != 2*time.Second || len(b.Peers) != 0 {
		t.Errorf("b's resolver %+v %v", b.Resolver, b.ResolverTimeout)
	}

	// Versions: the fixed servers and the names' addresses, new peers each time,
	// failure state kept by address; none at all is a group that answers nil.
	v1 := a.Resolved([][]netip.Addr{{netip.MustParseAddr("10.0.0.5")}, nil}, nil)
	if len(v1.Peers) != 2 || v1.Peers[1].Addr.String() != "10.0.0.5:8080" || v1.Peers[1].Weight != 3 || v1.Origin() != a || v1.Peers[0] == a.Peers[0] {
		t.Fatalf("v1 %v", v1.Peers)
	}
	v1.Peers[1].Failed(time.Now())
	v2 := a.Resolved([][]netip.Addr{{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("10.0.0.6")}, {netip.MustParseAddr("10.0.0.9")}}, v1)
	if len(v2.Peers) != 3 || len(v2.Backup) != 1 || v2.Peers[1].Fails() != 1 || v2.Peers[2].Fails() != 0 {
		t.Fatalf("v2 %v %v", v2.Peers, v2.Backup)
	}
	empty := b.Resolved([][]netip.Addr{nil}, nil)
	var tried Tried
	if p := empty.NewBalancer(1).Pick(time.Now(), nil, netip.Addr{}, &tried); p != nil || empty.Tries() != 0 {
		t.Errorf("empty group picked %v", p)
	}

	for src, want := range map[string]string{
		"events {} http { resolver 127.0.0.1;\nupstream u { server u.test resolve; } }":         `resolving names at run time requires upstream "u" in `,
		"events {} http {\nupstream u { zone u; server u.test resolve; } }":                     `no resolver defined to resolve names at run time in upstream "u" in `,
		"events {} http {\nupstream u { zone u 1k; server u.test resolve; } }":                  `zone "u" is too small`,
		"events {} http {\nupstream u { zone u; resolver 127.0.0.1 ipv4=off ipv6=off; } }":      `"ipv4" and "ipv6" cannot both be "off"`,
		"events {} http {\nupstream u { zone u; server 10.0.0.1 resolve; } }":                   "", // an address needs no resolver
		"events {} http { resolver 127.0.0.1;\nupstream u { zone u; server u.test resolve; } }": "",
	} {
		_, err := loadWithResolver(t, src)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}
