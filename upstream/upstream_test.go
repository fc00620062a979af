package upstream

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
)

func init() {
	// Tests stay off the network: two names resolve, anything else is not found.
	lookupIP = func(host string) ([]net.IP, error) {
		switch host {
		case "twin.test":
			return []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("10.0.0.2")}, nil
		case "localhost":
			return []net.IP{net.ParseIP("127.0.0.1")}, nil
		}
		return nil, errors.New("not found")
	}
}

func load(t testing.TB, src string) (*conf.Config, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf.Load(conf.Options{Registry: conf.MustRegistry(Module), Prefix: dir, File: file})
}

func group(t testing.TB, body string) *Group {
	t.Helper()
	cfg, err := load(t, "http { upstream g {\n"+body+"\n} }")
	if err != nil {
		t.Fatal(err)
	}
	return GroupsOf(cfg).Lookup("g")
}

func TestUpstreamDirectives(t *testing.T) {
	g := group(t, `
server 10.0.0.10:8080 weight=5 max_fails=3 fail_timeout=30s max_conns=100;
server twin.test;
server [::1]:9000 backup;
server 10.0.0.11 down;
keepalive 32;
keepalive_timeout 75s;
keepalive_requests 500;
least_conn;`)
	if len(g.Peers) != 4 || len(g.Backup) != 1 {
		t.Fatalf("peers %d backup %d", len(g.Peers), len(g.Backup))
	}
	p := g.Peers[0]
	if p.Addr.String() != "10.0.0.10:8080" || p.Weight != 5 || p.MaxFails != 3 || p.FailTimeout != 30*time.Second || p.MaxConns != 100 {
		t.Errorf("peer 0 = %+v", p)
	}
	if g.Peers[1].Addr.String() != "10.0.0.1:80" || g.Peers[2].Addr.String() != "10.0.0.2:80" || g.Peers[1].Name != "twin.test:80" {
		t.Errorf("a name with two addresses gives two peers: %v %v", g.Peers[1].Addr, g.Peers[2].Addr)
	}
	if g.Peers[1].MaxFails != 1 || g.Peers[1].FailTimeout != 10*time.Second || g.Peers[1].Weight != 1 {
		t.Errorf("defaults: %+v", g.Peers[1].PeerConfig)
	}
	if !g.Peers[3].Down || g.Backup[0].Addr.String() != "[::1]:9000" {
		t.Errorf("down/backup wrong")
	}
	if g.Keepalive != 32 || g.KeepaliveTimeout != 75*time.Second || g.KeepaliveRequests != 500 || g.Method != LeastConn {
		t.Errorf("group = %+v", g)
	}
}

func TestUpstreamErrors(t *testing.T) {
	tests := map[string]string{
		"http { upstream g {\nserver nowhere.test:80;\n} }":                             `invalid value "nowhere.test:80" in "server" directive, host not found in `,
		"http { upstream g {\nserver 10.0.0.1 weight=0;\n} }":                           `invalid parameter "weight=0" in `,
		"http { upstream g {\nserver 10.0.0.1 slow_start=x;\n} }":                       `invalid value "slow_start=x" in `,
		"http { upstream g {\nip_hash;\nserver 10.0.0.1 slow_start=10s;\n} }":           `the "slow_start" parameter cannot be used with the "ip_hash" balancing method in `,
		"http { upstream g {\n}\n}":                                                     `no servers are inside upstream in `,
		"http { upstream g { server 10.0.0.1; }\nupstream g { server 10.0.0.2; } }":     `duplicate upstream "g" in `,
		"http { upstream g {\nserver 10.0.0.1;\nserver 10.0.0.2 backup;\nip_hash;\n} }": `the "backup" parameter cannot be used with the "ip_hash" balancing method in `,
		"http { upstream g {\nserver 10.0.0.1;\nhash $uri ketama;\n} }":                 `invalid value "ketama" in "hash" directive`,
		"http { upstream g {\nserver unix:;\n} }":                                       `invalid value "unix:" in "server" directive, no path in the unix domain socket`,
		"http { upstream g {\nserver 10.0.0.1 backup;\n} }":                             `upstream "g" has only backup servers`,
		"http { server {\nkeepalive 1;\n} }":                                            `"keepalive" directive is not allowed here`,
	}
	for src, want := range tests {
		_, err := load(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
}

// TestUnixPeers: "server unix:/path" and a proxy_pass to unix:/path are unix-domain
// peers, keyed and shown by their path.
func TestUnixPeers(t *testing.T) {
	cfg, err := load(t, "http { upstream g {\nserver unix:/run/a.sock weight=2;\nserver 10.0.0.1:81;\n} }")
	if err != nil {
		t.Fatal(err)
	}
	g := GroupsOf(cfg).Lookup("g")
	p := g.Peers[0]
	if p.Unix != "/run/a.sock" || p.Addr.IsValid() || p.Weight != 2 || p.Name != "unix:/run/a.sock" || p.String() != "unix:/run/a.sock" {
		t.Fatalf("unix peer %+v", p)
	}
	if p.Key() == g.Peers[1].Key() || g.Peers[1].String() != "10.0.0.1:81" {
		t.Fatal("keys")
	}
	ig, err := ForProxyPass(cfg, "unix:/run/b.sock", false)
	if err != nil || len(ig.Peers) != 1 || ig.Peers[0].Unix != "/run/b.sock" || !ig.Implicit {
		t.Fatalf("implicit unix group %+v %v", ig, err)
	}
	if again, _ := ForProxyPass(cfg, "unix:/run/b.sock", false); again != ig {
		t.Fatal("a second proxy_pass to the same socket gets another group")
	}
	if _, err := ForProxyPass(cfg, "unix:/"+strings.Repeat("x", 120), false); err == nil || !strings.Contains(err.Error(), "too long path") {
		t.Fatalf("long path: %v", err)
	}
}

func TestMethodRedefinedWarns(t *testing.T) {
	cfg, err := load(t, "http { upstream g {\nserver 10.0.0.1;\nleast_conn;\nip_hash;\n} }")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), "load balancing method redefined") {
		t.Fatalf("warnings = %v", cfg.Warnings)
	}
	if GroupsOf(cfg).Lookup("g").Method != IPHash {
		t.Fatal("the later method does not win")
	}
}

func sequence(b *Balancer, n int, now time.Time) string {
	var out []string
	for i := 0; i < n; i++ {
		var tried Tried
		p := b.Pick(now, nil, netip.Addr{}, &tried)
		if p == nil {
			out = append(out, "-")
			continue
		}
		out = append(out, fmt.Sprint(p.Addr.Port()))
		b.Done(p, now, false)
	}
	return strings.Join(out, " ")
}

func TestSmoothWeightedRoundRobin(t *testing.T) {
	// nginx's documented sequence for weights 5, 1, 1: a a b a c a a.
	g := group(t, "server 10.0.0.1:1 weight=5; server 10.0.0.1:2; server 10.0.0.1:3;")
	b := g.NewBalancer(1)
	if got := sequence(b, 14, time.Now()); got != "1 1 2 1 3 1 1 1 1 2 1 3 1 1" {
		t.Fatalf("sequence %s", got)
	}
}

func TestFailuresRestAndProbe(t *testing.T) {
	g := group(t, "server 10.0.0.1:1 max_fails=2 fail_timeout=10s; server 10.0.0.1:2;")
	b := g.NewBalancer(1)
	now := time.Unix(1000, 0)
	p1 := g.Peers[0]
	for i := 0; i < 2; i++ {
		var tried Tried
		b.Pick(now, nil, netip.Addr{}, &tried)
		b.Done(p1, now, true)
	}
	if p1.Fails() != 2 || p1.Available(now) {
		t.Fatalf("after max_fails the peer rests: fails %d", p1.Fails())
	}
	if got := sequence(b, 4, now.Add(5*time.Second)); got != "2 2 2 2" {
		t.Fatalf("resting peer picked: %s", got)
	}
	// After fail_timeout one request probes it; while the probe is out it rests again.
	later := now.Add(11 * time.Second)
	var tried Tried
	seen := map[uint16]int{}
	for i := 0; i < 4; i++ {
		tried.Reset()
		p := b.Pick(later, nil, netip.Addr{}, &tried)
		seen[p.Addr.Port()]++
	}
	if seen[1] != 1 {
		t.Fatalf("probe picks of the rested peer: %d, want 1", seen[1])
	}
	b.Done(p1, later, false)
	if p1.Fails() != 0 || !p1.Available(later) {
		t.Fatal("a successful probe does not restore the peer")
	}
}

func TestBackupOnlyWhenPrimariesDown(t *testing.T) {
	g := group(t, "server 10.0.0.1:1; server 10.0.0.1:2 backup;")
	b := g.NewBalancer(1)
	now := time.Now()
	if got := sequence(b, 3, now); got != "1 1 1" {
		t.Fatalf("backup used while primary is up: %s", got)
	}
	var tried Tried
	p := b.Pick(now, nil, netip.Addr{}, &tried)
	b.Done(p, now, true)
	// The retry of the same request goes to the backup.
	if p2 := b.Pick(now, nil, netip.Addr{}, &tried); p2 == nil || p2.Addr.Port() != 2 {
		t.Fatalf("retry after the primary failed: %v", p2)
	}
	if p3 := b.Pick(now, nil, netip.Addr{}, &tried); p3 != nil {
		t.Fatalf("a third try found %v; every peer was tried", p3)
	}
}

func TestMaxConnsAndLeastConn(t *testing.T) {
	g := group(t, "least_conn; server 10.0.0.1:1 max_conns=1; server 10.0.0.1:2 weight=2;")
	b := g.NewBalancer(1)
	now := time.Now()
	var picks []string
	var held []*Peer
	for i := 0; i < 4; i++ {
		var tried Tried
		p := b.Pick(now, nil, netip.Addr{}, &tried)
		held = append(held, p)
		picks = append(picks, fmt.Sprint(p.Addr.Port()))
	}
	// 1 and 2 start level; weight 2 takes twice the connections; max_conns caps 1 at one.
	if strings.Join(picks, " ") != "2 1 2 2" {
		t.Fatalf("least_conn picks %v", picks)
	}
	if b.Conns(g.Peers[0]) != 1 || b.Conns(g.Peers[1]) != 3 {
		t.Fatalf("conns %d %d", b.Conns(g.Peers[0]), b.Conns(g.Peers[1]))
	}
	for _, p := range held {
		b.Done(p, now, false)
	}
	if b.Conns(g.Peers[0]) != 0 || b.Conns(g.Peers[1]) != 0 {
		t.Fatal("connections not released")
	}
}

func TestIPHashKeepsClientsSubnet(t *testing.T) {
	g := group(t, "ip_hash; server 10.0.0.1:1; server 10.0.0.1:2; server 10.0.0.1:3;")
	b := g.NewBalancer(1)
	now := time.Now()
	pick := func(ip string) uint16 {
		var tried Tried
		p := b.Pick(now, nil, netip.MustParseAddr(ip), &tried)
		b.Done(p, now, false)
		return p.Addr.Port()
	}
	first := pick("192.168.7.1")
	for _, ip := range []string{"192.168.7.2", "192.168.7.200", "::ffff:192.168.7.9"} {
		if got := pick(ip); got != first {
			t.Fatalf("%s went to %d, its /24 to %d", ip, got, first)
		}
	}
	spread := map[uint16]bool{}
	for i := 0; i < 64; i++ {
		spread[pick(fmt.Sprintf("10.%d.%d.1", i, (i*7)%256))] = true
	}
	if len(spread) != 3 {
		t.Fatalf("ip_hash used %d of 3 servers", len(spread))
	}
}

func TestHashMatchesMemcachedFormula(t *testing.T) {
	g := group(t, "hash $request_uri; server 10.0.0.1:1; server 10.0.0.1:2; server 10.0.0.1:3;")
	b := g.NewBalancer(1)
	now := time.Now()
	// ((crc32("/a") >> 16) & 0x7fff) % 3 picks the peer on the first try.
	var tried Tried
	p := b.Pick(now, []byte("/a"), netip.Addr{}, &tried)
	want := int((crc32IEEE("/a")>>16)&0x7fff) % 3
	if p != g.Peers[want] {
		t.Fatalf("hash picked %v, formula says peer %d", p.Addr, want)
	}
	// The same key always goes to the same peer, and a failed peer is re-hashed away.
	b.Done(p, now, true)
	tried.Reset()
	if q := b.Pick(now, []byte("/a"), netip.Addr{}, &tried); q == p {
		t.Fatalf("failed peer picked again")
	}
}

func TestConsistentHashMovesFewKeys(t *testing.T) {
	four := group(t, "hash $uri consistent; server 10.0.0.1:1; server 10.0.0.1:2; server 10.0.0.1:3; server 10.0.0.1:4;")
	three := group(t, "hash $uri consistent; server 10.0.0.1:1; server 10.0.0.1:2; server 10.0.0.1:3;")
	b4, b3 := four.NewBalancer(1), three.NewBalancer(1)
	now := time.Now()
	moved, onFourth := 0, 0
	const keys = 4000
	for i := 0; i < keys; i++ {
		key := []byte(fmt.Sprintf("/object/%d", i))
		var t4, t3 Tried
		p4, p3 := b4.Pick(now, key, netip.Addr{}, &t4), b3.Pick(now, key, netip.Addr{}, &t3)
		if p4.Addr.Port() == 4 {
			onFourth++
			continue
		}
		if p4.Addr.Port() != p3.Addr.Port() {
			moved++
		}
	}
	// Removing one of four servers moves only the keys it held (about a quarter).
	if moved != 0 {
		t.Fatalf("%d keys not on the removed server moved", moved)
	}
	if onFourth < keys/8 || onFourth > keys*3/8 {
		t.Fatalf("the fourth server held %d of %d keys", onFourth, keys)
	}
}

func TestRandomTwoPrefersFewerConns(t *testing.T) {
	g := group(t, "random two least_conn; server 10.0.0.1:1; server 10.0.0.1:2;")
	b := g.NewBalancer(42)
	now := time.Now()
	var tried Tried
	busy := b.Pick(now, nil, netip.Addr{}, &tried)
	for i := 0; i < 20; i++ {
		var t2 Tried
		p := b.Pick(now, nil, netip.Addr{}, &t2)
		if p == busy {
			t.Fatalf("pick %d went to the busier peer", i)
		}
		b.Done(p, now, false)
	}
}

func TestForProxyPass(t *testing.T) {
	cfg, err := load(t, "http { upstream backend { server 10.0.0.1:81; } }")
	if err != nil {
		t.Fatal(err)
	}
	g, err := ForProxyPass(cfg, "backend", false)
	if err != nil || g.Implicit || g.Name != "backend" {
		t.Fatalf("named upstream: %+v %v", g, err)
	}
	g1, err := ForProxyPass(cfg, "localhost:8080", true)
	if err != nil || !g1.Implicit || g1.Peers[0].Addr.String() != "127.0.0.1:8080" {
		t.Fatalf("implicit: %+v %v", g1, err)
	}
	if g2, _ := ForProxyPass(cfg, "localhost:8080", true); g2 != g1 {
		t.Fatal("implicit groups for the same target are not shared")
	}
	if _, err := ForProxyPass(cfg, "nowhere.test", false); err == nil || !strings.Contains(err.Error(), `host not found in upstream "nowhere.test"`) {
		t.Fatalf("err = %v", err)
	}
}

func BenchmarkPickRoundRobin(b *testing.B) {
	g := group(b, "server 10.0.0.1:1 weight=3; server 10.0.0.1:2; server 10.0.0.1:3 weight=2;")
	bal := g.NewBalancer(1)
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var tried Tried
		p := bal.Pick(now, nil, netip.Addr{}, &tried)
		bal.Done(p, now, false)
	}
}

func BenchmarkPickConsistentHash(b *testing.B) {
	g := group(b, "hash $uri consistent; server 10.0.0.1:1; server 10.0.0.1:2; server 10.0.0.1:3;")
	bal := g.NewBalancer(1)
	now := time.Now()
	key := []byte("/some/object/key")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var tried Tried
		p := bal.Pick(now, key, netip.Addr{}, &tried)
		bal.Done(p, now, false)
	}
}
