package upstream

import (
	"net/netip"
	"testing"
	"time"
)

// The failure state machine of the balancer against nginx 1.22's
// ngx_http_upstream_round_robin.c: peers->single, the switch to backup servers, and
// what happens when every server is down (NGX_BUSY, "no live upstreams", with no
// reset of the failures: the "quick recovery" that reset them was removed in nginx
// 1.11.10; a server comes back by a probe after fail_timeout).

// pickFail picks a peer for a new request and ends its try as a failure; nil when
// none was available.
func pickFail(b *Balancer, now time.Time) *Peer {
	var tried Tried
	p := b.Pick(now, nil, netip.Addr{}, &tried)
	if p != nil {
		b.Done(p, now, true)
	}
	return p
}

func TestLoneServerIsNeverUnavailable(t *testing.T) {
	for _, body := range []string{
		"server 10.0.0.1:1;",
		"server 10.0.0.1:1 max_fails=3 fail_timeout=30s;",
		"least_conn; server 10.0.0.1:1;",
		"ip_hash; server 10.0.0.1:1;",
		"hash $uri; server 10.0.0.1:1;",
		"hash $uri consistent; server 10.0.0.1:1;",
		"random two; server 10.0.0.1:1;",
	} {
		g := group(t, body)
		b := g.NewBalancer(1)
		now := time.Unix(1000, 0)
		for i := 0; i < 200; i++ {
			if pickFail(b, now) == nil {
				t.Fatalf("%s: request %d found no server", body, i)
			}
		}
		if p := g.Peers[0]; p.Fails() != 0 || b.Conns(p) != 0 {
			t.Fatalf("%s: fails %d conns %d after 200 failed tries, want 0 0", body, p.Fails(), b.Conns(p))
		}
		var tried Tried
		if p := b.Pick(now, []byte("k"), netip.MustParseAddr("192.0.2.1"), &tried); p == nil {
			t.Fatalf("%s: the lone server is unavailable after failures", body)
		}
	}
}

func TestLoneServerImplicitGroup(t *testing.T) {
	cfg, err := load(t, "http { }")
	if err != nil {
		t.Fatal(err)
	}
	g, err := ForProxyPass(cfg, "127.0.0.1:8080", true)
	if err != nil {
		t.Fatal(err)
	}
	b := g.NewBalancer(1)
	now := time.Now()
	for i := 0; i < 10; i++ {
		if pickFail(b, now) == nil {
			t.Fatalf("proxy_pass host:port: try %d found no server", i)
		}
	}
	// A name with two addresses is two servers: each one's failures count.
	g2, err := ForProxyPass(cfg, "twin.test:80", true)
	if err != nil {
		t.Fatal(err)
	}
	b2 := g2.NewBalancer(1)
	pickFail(b2, now)
	pickFail(b2, now)
	if p := pickFail(b2, now); p != nil {
		t.Fatalf("two addresses, both failed: picked %v", p.Addr)
	}
}

func TestLoneServerDownOrAtMaxConns(t *testing.T) {
	b := group(t, "server 10.0.0.1:1 down;").NewBalancer(1)
	if p := pickFail(b, time.Now()); p != nil {
		t.Fatal("a lone server marked down was picked")
	}
	g := group(t, "server 10.0.0.1:1 max_conns=1;")
	b = g.NewBalancer(1)
	now := time.Now()
	var t1, t2 Tried
	p := b.Pick(now, nil, netip.Addr{}, &t1)
	if p == nil || b.Pick(now, nil, netip.Addr{}, &t2) != nil {
		t.Fatal("max_conns=1: want the first pick and no second")
	}
	b.Done(p, now, true)
	if b.Pick(now, nil, netip.Addr{}, &t2) == nil {
		t.Fatal("max_conns: a freed connection does not make room")
	}
}

func TestOnePrimaryWithBackupCountsFailures(t *testing.T) {
	// nginx sets peers->single = 0 once there is a backup: the primary's failures
	// count, the backup takes over, and a lone backup's failures count too.
	g := group(t, "server 10.0.0.1:1 fail_timeout=10s; server 10.0.0.1:2 backup fail_timeout=10s;")
	b := g.NewBalancer(1)
	now := time.Unix(1000, 0)
	if p := pickFail(b, now); p == nil || p.Addr.Port() != 1 {
		t.Fatalf("first pick %v, want the primary", p)
	}
	if p := pickFail(b, now); p == nil || p.Addr.Port() != 2 {
		t.Fatalf("second pick %v, want the backup", p)
	}
	if p := pickFail(b, now.Add(5*time.Second)); p != nil {
		t.Fatalf("primary and backup failed, yet %v was picked", p.Addr)
	}
	// After fail_timeout the primary is probed before the backup.
	later := now.Add(11 * time.Second)
	var tried Tried
	p := b.Pick(later, nil, netip.Addr{}, &tried)
	if p == nil || p.Addr.Port() != 1 {
		t.Fatalf("after fail_timeout: %v, want the primary", p)
	}
	b.Done(p, later, false)
	if g.Peers[0].Fails() != 0 {
		t.Fatal("a successful probe does not restore the primary")
	}
}

func TestBackupRetryWithinARequest(t *testing.T) {
	g := group(t, "server 10.0.0.1:1; server 10.0.0.1:2; server 10.0.0.1:3 backup; server 10.0.0.1:4 backup;")
	b := g.NewBalancer(1)
	now := time.Now()
	var tried Tried
	var got []uint16
	for {
		p := b.Pick(now, nil, netip.Addr{}, &tried)
		if p == nil {
			break
		}
		got = append(got, p.Addr.Port())
		b.Done(p, now, true)
	}
	if len(got) != 4 || got[0] > 2 || got[1] > 2 || got[2] < 3 || got[3] < 3 {
		t.Fatalf("tries of one request: %v, want both primaries, then both backups", got)
	}
	if g.Tries() != 4 {
		t.Fatalf("Tries %d, want 4", g.Tries())
	}
}

func TestAllDownIsBusyUntilFailTimeout(t *testing.T) {
	g := group(t, "server 10.0.0.1:1 fail_timeout=10s; server 10.0.0.1:2 fail_timeout=10s;")
	b := g.NewBalancer(1)
	now := time.Unix(1000, 0)
	pickFail(b, now)
	pickFail(b, now)
	// Every request within fail_timeout: no live upstreams, and nothing is reset.
	for i := 0; i < 20; i++ {
		if p := pickFail(b, now.Add(time.Duration(i)*400*time.Millisecond)); p != nil {
			t.Fatalf("request %d picked %v while every server rests", i, p.Addr)
		}
	}
	for _, p := range g.Peers {
		if p.Fails() != 1 {
			t.Fatalf("%v: fails %d, want 1 (no quick recovery)", p.Addr, p.Fails())
		}
	}
	// After fail_timeout each server gets one probe; a success brings it back.
	later := now.Add(11 * time.Second)
	var t1, t2, t3 Tried
	p1 := b.Pick(later, nil, netip.Addr{}, &t1)
	p2 := b.Pick(later, nil, netip.Addr{}, &t2)
	if p1 == nil || p2 == nil || p1 == p2 || b.Pick(later, nil, netip.Addr{}, &t3) != nil {
		t.Fatalf("probes after fail_timeout: %v %v, want each server once", p1, p2)
	}
	b.Done(p1, later, false)
	b.Done(p2, later, true)
	if p := pickFail(b, later); p != p1 {
		t.Fatalf("after one probe succeeded and one failed: %v, want %v", p, p1.Addr)
	}
}

func TestReleaseLeavesFailureStateAlone(t *testing.T) {
	g := group(t, "server 10.0.0.1:1 max_fails=2; server 10.0.0.1:2;")
	b := g.NewBalancer(1)
	now := time.Now()
	p := g.Peers[0]
	var tried Tried
	if b.Pick(now, nil, netip.Addr{}, &tried) != p {
		t.Fatal("the first pick is not the first server")
	}
	b.Done(p, now, true)
	tried.Reset()
	for i := 0; i < 5; i++ {
		q := b.Pick(now, nil, netip.Addr{}, &tried)
		b.Release(q)
		tried.Reset()
	}
	if p.Fails() != 1 || b.Conns(p) != 0 || b.Conns(g.Peers[1]) != 0 {
		t.Fatalf("fails %d, conns %d %d: Release changed the failure state or leaked", p.Fails(), b.Conns(p), b.Conns(g.Peers[1]))
	}
}

func TestTriesCountsServersNotDown(t *testing.T) {
	// nginx's peers->tries + backup->tries: servers not marked down.
	g := group(t, "server 10.0.0.1:1; server 10.0.0.1:2 down; server 10.0.0.1:3; server 10.0.0.1:4 backup; server 10.0.0.1:5 backup down;")
	if g.Tries() != 3 {
		t.Fatalf("Tries %d, want 3", g.Tries())
	}
	if g := group(t, "server 10.0.0.1:1;"); g.Tries() != 1 {
		t.Fatalf("one server: Tries %d", g.Tries())
	}
}

func TestFailuresCountWithinFailTimeout(t *testing.T) {
	g := group(t, "server 10.0.0.1:1 max_fails=2 fail_timeout=10s; server 10.0.0.1:2;")
	b := g.NewBalancer(1)
	p := g.Peers[0]
	try := func(at time.Time, failed bool) {
		t.Helper()
		var tried Tried
		tried.set(1) // only the first server
		if b.Pick(at, nil, netip.Addr{}, &tried) != p {
			t.Fatalf("at %v the first server is not available", at)
		}
		b.Done(p, at, failed)
	}
	now := time.Unix(1000, 0)
	try(now, true)
	try(now.Add(1*time.Second), false) // within fail_timeout: the count stays
	if p.Fails() != 1 {
		t.Fatalf("a success within fail_timeout of a failure cleared it: fails %d", p.Fails())
	}
	try(now.Add(2*time.Second), true)
	if p.Available(now.Add(3 * time.Second)) {
		t.Fatal("two failures within fail_timeout, a success between: the server does not rest")
	}

	// A success once fail_timeout has passed since the last failure clears it.
	g = group(t, "server 10.0.0.1:1 max_fails=2 fail_timeout=10s; server 10.0.0.1:2;")
	b, p = g.NewBalancer(1), g.Peers[0]
	try(now, true)
	try(now.Add(11*time.Second), false)
	if p.Fails() != 0 {
		t.Fatalf("a success after fail_timeout left fails at %d", p.Fails())
	}
	try(now.Add(12*time.Second), true)
	if !p.Available(now.Add(12 * time.Second)) {
		t.Fatal("one failure after the count was cleared rests the server")
	}
}
