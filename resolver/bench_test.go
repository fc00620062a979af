package resolver

import (
	"net/netip"
	"testing"
)

// nopHandler is a Handler that keeps nothing.
type nopHandler struct{ n int }

func (h *nopHandler) Resolved(q *Query, res Result) { h.n += len(res.Addrs) }

// BenchmarkResolveCached is the steady request path: a name in the cache.
func BenchmarkResolveCached(b *testing.B) {
	srv := newTestServer(b)
	srv.set("cached.test", a("10.0.8.1", 3600), a("10.0.8.2", 3600), a("fd00::8", 3600))
	l := startLoop(b)
	r := newResolver(b, l, Config{Servers: []netip.AddrPort{srv.addr}})
	resolve(b, l, r, "cached.test")
	h := &nopHandler{}
	var q Query
	onLoop(b, l, func() {
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			r.Resolve(&q, "cached.test", h)
		}
		b.StopTimer()
	})
	if h.n != 3*b.N {
		b.Fatalf("%d addresses for %d lookups", h.n, b.N)
	}
}

// BenchmarkResolveCachedNXDOMAIN is a cached failure.
func BenchmarkResolveCachedNXDOMAIN(b *testing.B) {
	srv := newTestServer(b)
	srv.setRcode("gone.test", 3)
	l := startLoop(b)
	r := newResolver(b, l, Config{Servers: []netip.AddrPort{srv.addr}})
	resolve(b, l, r, "gone.test")
	h := &nopHandler{}
	var q Query
	onLoop(b, l, func() {
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			r.Resolve(&q, "gone.test", h)
		}
	})
}

// BenchmarkAnswer handles an answer with a CNAME and two addresses: the work of
// each response that arrives (parse, match, cache).
func BenchmarkAnswer(b *testing.B) {
	l := startLoop(b)
	srv := netip.MustParseAddrPort("127.0.0.1:53")
	r := newResolver(b, l, Config{Servers: []netip.AddrPort{srv}, NoIPv6: true})
	msg := buildAnswer(0x1234, "www.test", qtypes[famA], 0, false, []record{cname("cdn.test", 60),
		{owner: "cdn.test", typ: qtypes[famA], ttl: 60, addr: netip.MustParseAddr("10.0.9.1")},
		{owner: "cdn.test", typ: qtypes[famA], ttl: 60, addr: netip.MustParseAddr("10.0.9.2")}})
	var e *entry
	onLoop(b, l, func() {
		e = r.newEntry("www.test")
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			e.inflight, e.pending, e.ids[famA] = true, [2]bool{true}, 0x1234
			e.got[famA] = e.got[famA][:0]
			r.answer(e, msg, false, srv)
		}
	})
	if e.ans.n != 2 {
		b.Fatalf("%d addresses", e.ans.n)
	}
}
