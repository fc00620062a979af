package resolver

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/numaproxy/numaproxy/eventloop"
)

func startLoop(t testing.TB) *eventloop.Loop {
	t.Helper()
	l, err := eventloop.New(eventloop.Config{CPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.Stop()
		<-l.Done()
	})
	return l
}

// onLoop runs fn on the loop's thread and waits for it.
func onLoop(t testing.TB, l *eventloop.Loop, fn func()) {
	t.Helper()
	done := make(chan struct{})
	if err := l.Run(func() { defer close(done); fn() }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the loop")
	}
}

func newResolver(t testing.TB, l *eventloop.Loop, cfg Config) *Resolver {
	t.Helper()
	r, err := New(l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Run(r.Close) })
	return r
}

type result struct {
	addrs []netip.Addr
	ttl   time.Duration
	err   error
	at    time.Time
}

// results is a Handler that hands results to the test goroutine.
type results chan result

func (c results) Resolved(q *Query, res Result) {
	c <- result{addrs: slices.Clone(res.Addrs), ttl: res.TTL, err: res.Err, at: time.Now()}
}

func (c results) next(t testing.TB) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for a lookup")
	}
	panic("unreachable")
}

// resolve looks name up on the loop and waits for the outcome.
func resolve(t testing.TB, l *eventloop.Loop, r *Resolver, name string) result {
	t.Helper()
	ch := make(results, 1)
	q := new(Query)
	onLoop(t, l, func() { r.Resolve(q, name, ch) })
	return ch.next(t)
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func sameSet(a, b []netip.Addr) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, netip.Addr.Compare)
	slices.SortFunc(b, netip.Addr.Compare)
	return slices.Equal(a, b)
}

func countType(qs []seen, typ dnsmessage.Type) int {
	n := 0
	for _, q := range qs {
		if q.typ == typ {
			n++
		}
	}
	return n
}

func TestAnswerCachedForTTLThenFollowed(t *testing.T) {
	srv := newTestServer(t)
	srv.set("www.test", a("10.0.0.1", 1), a("10.0.0.2", 1), a("fd00::1", 1))
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}})

	res := resolve(t, l, r, "www.test")
	if res.err != nil || !slices.Equal(res.addrs[2:], addrs("fd00::1")) || !sameSet(res.addrs[:2], addrs("10.0.0.1", "10.0.0.2")) {
		t.Fatalf("first lookup: %v %v (IPv4 first)", res.addrs, res.err)
	}
	if res.ttl <= 0 || res.ttl > time.Second {
		t.Errorf("TTL %v, want up to 1s", res.ttl)
	}
	srv.set("www.test", a("10.0.0.3", 1))
	if res := resolve(t, l, r, "WWW.test."); res.err != nil || !sameSet(res.addrs, addrs("10.0.0.1", "10.0.0.2", "fd00::1")) {
		t.Fatalf("within the TTL, in another case and with the final dot: %v %v, want the cached answer", res.addrs, res.err)
	}
	if n := len(srv.queries("www.test")); n != 2 {
		t.Errorf("%d queries within the TTL, want 2 (A and AAAA)", n)
	}
	time.Sleep(1100 * time.Millisecond)
	// The new zone has no AAAA: still an answer, from A.
	if res := resolve(t, l, r, "www.test"); res.err != nil || !slices.Equal(res.addrs, addrs("10.0.0.3")) {
		t.Fatalf("after the TTL: %v %v, want the new address", res.addrs, res.err)
	}
	if n := len(srv.queries("www.test")); n != 4 {
		t.Errorf("%d queries after the TTL, want 4", n)
	}
}

func TestValidOverridesTTL(t *testing.T) {
	srv := newTestServer(t)
	srv.set("long.test", a("10.0.1.1", 3600))
	srv.set("zero.test", a("10.0.1.2", 0))
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, Valid: 500 * time.Millisecond, NoIPv6: true})

	if res := resolve(t, l, r, "long.test"); res.ttl > 500*time.Millisecond || !slices.Equal(res.addrs, addrs("10.0.1.1")) {
		t.Fatalf("valid= must override a TTL of an hour: %v ttl %v", res.addrs, res.ttl)
	}
	resolve(t, l, r, "zero.test")
	srv.set("long.test", a("10.0.1.9", 3600))
	srv.set("zero.test", a("10.0.1.8", 0))
	resolve(t, l, r, "zero.test")
	if n := len(srv.queries("zero.test")); n != 1 {
		t.Errorf("a TTL of 0 with valid=500ms: %d queries, want 1 (cached)", n)
	}
	time.Sleep(600 * time.Millisecond)
	if res := resolve(t, l, r, "long.test"); !slices.Equal(res.addrs, addrs("10.0.1.9")) {
		t.Errorf("after valid= passed: %v, want the new address", res.addrs)
	}
	if got := countType(srv.queries(""), dnsmessage.TypeAAAA); got != 0 {
		t.Errorf("ipv6=off sent %d AAAA queries", got)
	}
}

// timeoutProbe runs a 10ms ticker on the loop and reports how late it fired at worst.
func timeoutProbe(t *testing.T, l *eventloop.Loop) (stop func() time.Duration) {
	var tm eventloop.Timer
	var worst time.Duration
	var due time.Time
	const tick = 10 * time.Millisecond
	onLoop(t, l, func() {
		l.InitTimer(&tm, func(tm *eventloop.Timer) {
			worst = max(worst, time.Since(due))
			due = time.Now().Add(tick)
			tm.Reset(tick)
		})
		due = time.Now().Add(tick)
		tm.Reset(tick)
	})
	return func() time.Duration {
		var w time.Duration
		onLoop(t, l, func() { tm.Stop(); w = worst })
		return w
	}
}

func TestTimeoutWhileTheLoopKeepsServing(t *testing.T) {
	// Nothing listening (ICMP port unreachable), and a server that never answers.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	_ = pc.Close()
	silent := newTestServer(t)
	silent.setSilent(true)

	for _, tc := range []struct {
		name   string
		server netip.AddrPort
	}{{"nothing listening", closed}, {"never answers", silent.addr}} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLoop(t)
			const timeout = time.Second
			r := newResolver(t, l, Config{Servers: []netip.AddrPort{tc.server}, Timeout: timeout})
			stop := timeoutProbe(t, l)
			start := time.Now()
			res := resolve(t, l, r, "slow.test")
			took := res.at.Sub(start)
			worst := stop()
			want := "slow.test could not be resolved (110: Operation timed out)"
			if res.err == nil || res.err.Error() != want {
				t.Fatalf("error %v, want %q", res.err, want)
			}
			if took < timeout || took > timeout+2*time.Second {
				t.Errorf("timed out after %v, want resolver_timeout %v", took, timeout)
			}
			// A loop blocked in the lookup would have held the timer for a second.
			if worst > 300*time.Millisecond {
				t.Errorf("a 10ms timer on the same loop fired up to %v late during the lookup", worst)
			}
			t.Logf("timed out after %v; a 10ms timer on the loop was at worst %v late", took, worst)
		})
	}
}

func TestConcurrentLookupsShareOneQuery(t *testing.T) {
	srv := newTestServer(t)
	srv.set("shared.test", a("10.0.2.1", 60), a("fd00::2", 60))
	srv.with(func() { srv.delay = 100 * time.Millisecond })
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}})
	const n = 20
	ch := make(results, n)
	qs := make([]Query, n)
	onLoop(t, l, func() {
		for i := range qs {
			r.Resolve(&qs[i], "shared.test", ch)
		}
	})
	for range n {
		if res := ch.next(t); res.err != nil || !sameSet(res.addrs, addrs("10.0.2.1", "fd00::2")) {
			t.Fatalf("%v %v", res.addrs, res.err)
		}
	}
	qsSeen := srv.queries("shared.test")
	if countType(qsSeen, dnsmessage.TypeA) != 1 || countType(qsSeen, dnsmessage.TypeAAAA) != 1 {
		t.Errorf("%d lookups at once sent %d queries, want one A and one AAAA", n, len(qsSeen))
	}
}

func TestCNAME(t *testing.T) {
	srv := newTestServer(t)
	// The usual answer: the chain and the addresses together.
	srv.set("alias.test", cname("mid.test", 60), record{owner: "mid.test", typ: dnsmessage.TypeCNAME, ttl: 30, cname: "real.test"},
		record{owner: "real.test", typ: dnsmessage.TypeA, ttl: 60, addr: netip.MustParseAddr("10.0.3.1")},
		// not in the chain: must not be taken
		record{owner: "other.test", typ: dnsmessage.TypeA, ttl: 60, addr: netip.MustParseAddr("6.6.6.6")})
	// A CNAME alone: the target is looked up next.
	srv.set("only.test", cname("target.test", 60))
	srv.set("target.test", a("10.0.3.2", 60))
	// A loop.
	srv.set("loop1.test", cname("loop2.test", 60))
	srv.set("loop2.test", cname("loop1.test", 60))
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, NoIPv6: true})

	res := resolve(t, l, r, "alias.test")
	if res.err != nil || !slices.Equal(res.addrs, addrs("10.0.3.1")) {
		t.Errorf("chain in one answer: %v %v", res.addrs, res.err)
	}
	if res.ttl > 30*time.Second {
		t.Errorf("TTL %v, want the chain's smallest, 30s", res.ttl)
	}
	res = resolve(t, l, r, "only.test")
	if res.err != nil || !slices.Equal(res.addrs, addrs("10.0.3.2")) {
		t.Errorf("CNAME only: %v %v", res.addrs, res.err)
	}
	if n := len(srv.queries("target.test")); n != 1 {
		t.Errorf("%d queries for the CNAME's target, want 1", n)
	}
	res = resolve(t, l, r, "loop1.test")
	if want := "loop1.test could not be resolved (3: Host not found)"; res.err == nil || res.err.Error() != want {
		t.Errorf("a CNAME loop: %v, want %q", res.err, want)
	}
}

func TestFailuresAreCached(t *testing.T) {
	srv := newTestServer(t)
	srv.setRcode("gone.test", dnsmessage.RCodeNameError)
	srv.setRcode("broken.test", dnsmessage.RCodeServerFailure)
	srv.set("half.test", a("10.0.4.1", 60))
	srv.setRcode("half.test/AAAA", dnsmessage.RCodeServerFailure)
	srv.set("empty.test") // NOERROR, no records
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}})

	for _, tc := range []struct{ name, want string }{
		{"gone.test", "gone.test could not be resolved (3: Host not found)"},
		{"broken.test", "broken.test could not be resolved (2: Server failure)"},
		// nginx fails the lookup when either family fails
		{"half.test", "half.test could not be resolved (2: Server failure)"},
		{"empty.test", "empty.test could not be resolved (3: Host not found)"},
	} {
		for i := range 2 {
			res := resolve(t, l, r, tc.name)
			if res.err == nil || res.err.Error() != tc.want {
				t.Errorf("%s, lookup %d: %v %v, want %q", tc.name, i+1, res.addrs, res.err, tc.want)
			}
			if i == 1 && (res.ttl <= 9*time.Second || res.ttl > 10*time.Second) {
				t.Errorf("%s: failure cached for %v, want 10s as nginx reports it", tc.name, res.ttl)
			}
		}
		if n := len(srv.queries(tc.name)); n != 2 {
			t.Errorf("%s: %d queries for two lookups, want 2 (one A, one AAAA: the failure is cached)", tc.name, n)
		}
	}

	// valid= sets how long a failure stays, too.
	r2 := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, Valid: 300 * time.Millisecond, NoIPv6: true})
	resolve(t, l, r2, "gone.test")
	time.Sleep(400 * time.Millisecond)
	resolve(t, l, r2, "gone.test")
	if n := len(srv.queries("gone.test")); n != 4 {
		t.Errorf("valid=300ms: %d queries in all, want 4", n)
	}
}

func TestTruncatedAnswerAskedAgainOverTCP(t *testing.T) {
	srv := newTestServer(t)
	var many []record
	var want []netip.Addr
	for i := range 60 {
		ip := fmt.Sprintf("10.0.5.%d", i+1)
		many = append(many, a(ip, 60))
		want = append(want, netip.MustParseAddr(ip))
	}
	srv.set("big.test", many...)
	srv.with(func() { srv.trunc["big.test"] = true })
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, NoIPv6: true})

	res := resolve(t, l, r, "big.test")
	if res.err != nil || !sameSet(res.addrs, want) {
		t.Fatalf("%d addresses, err %v; want the 60 of the TCP answer", len(res.addrs), res.err)
	}
	qs := srv.queries("big.test")
	if len(qs) != 2 || qs[0].tcp || !qs[1].tcp {
		t.Errorf("queries %+v, want one over UDP then one over TCP", qs)
	}
	var st Stats
	onLoop(t, l, func() { st = r.Stats() })
	if st.TCP != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestSpoofedAnswersIgnored(t *testing.T) {
	srv := newTestServer(t)
	srv.set("bank.test", a("10.0.6.1", 60))
	spoofer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer spoofer.Close()
	evil := []record{a("6.6.6.6", 60)}
	spoof := func(q seen, fromServer func([]byte)) {
		// From another address, all else right: the kernel drops it (connected socket).
		_, _ = spoofer.WriteToUDPAddrPort(buildAnswer(q.id, q.name, q.typ, 0, false, evil), q.from)
		// From the server: a wrong ID, then the right ID for another name.
		fromServer(buildAnswer(q.id+1, q.name, q.typ, 0, false, evil))
		fromServer(buildAnswer(q.id, "other.test", q.typ, 0, false, evil))
		// A truncated answer with the wrong ID must not switch to TCP either.
		fromServer(buildAnswer(q.id^0x8000, q.name, q.typ, 0, true, nil))
	}
	srv.with(func() { srv.hook, srv.delay = spoof, 50*time.Millisecond }) // the real answer comes last
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, NoIPv6: true})

	res := resolve(t, l, r, "bank.test")
	if res.err != nil || !slices.Equal(res.addrs, addrs("10.0.6.1")) {
		t.Fatalf("got %v %v, want the server's real answer", res.addrs, res.err)
	}
	var st Stats
	onLoop(t, l, func() { st = r.Stats() })
	if st.Ignored != 3 || st.TCP != 0 {
		t.Errorf("stats %+v: want 3 answers from the server ignored (the one from elsewhere never arrives), no TCP", st)
	}
	// Two lookups, two sockets: the source port changes.
	srv.set("bank2.test", a("10.0.6.2", 60))
	resolve(t, l, r, "bank2.test")
	if p1, p2 := srv.queries("bank.test")[0].from.Port(), srv.queries("bank2.test")[0].from.Port(); p1 == p2 {
		t.Errorf("two queries from the same source port %d", p1)
	}
}

func TestNextServerAfterResend(t *testing.T) {
	dead := newTestServer(t)
	dead.setSilent(true)
	good := newTestServer(t)
	good.set("rr.test", a("10.0.7.1", 60))
	good.set("rr2.test", a("10.0.7.2", 60))
	l := startLoop(t)
	const resend = 200 * time.Millisecond
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{dead.addr, good.addr}, Resend: resend, NoIPv6: true})

	start := time.Now()
	res := resolve(t, l, r, "rr.test")
	if res.err != nil || !slices.Equal(res.addrs, addrs("10.0.7.1")) {
		t.Fatalf("%v %v", res.addrs, res.err)
	}
	if took := res.at.Sub(start); took < resend {
		t.Errorf("answered after %v: the first server never answers, the second is asked after %v", took, resend)
	}
	if len(dead.queries("rr.test")) != 1 || len(good.queries("rr.test")) != 1 {
		t.Errorf("queries: first server %d, second %d; want 1 and 1", len(dead.queries("rr.test")), len(good.queries("rr.test")))
	}
	// The next lookup starts at the next server.
	start = time.Now()
	if res := resolve(t, l, r, "rr2.test"); res.err != nil || res.at.Sub(start) >= resend {
		t.Errorf("second lookup: %v after %v, want an answer from the second server at once", res.err, res.at.Sub(start))
	}
}

func TestCancelAndClose(t *testing.T) {
	srv := newTestServer(t)
	srv.setSilent(true)
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, Timeout: 200 * time.Millisecond})
	ch := make(results, 4)
	var q1, q2 Query
	onLoop(t, l, func() {
		r.Resolve(&q1, "x.test", ch)
		r.Resolve(&q2, "y.test", ch)
		q1.Cancel()
		if q1.Pending() || !q2.Pending() {
			t.Error("Pending after Cancel")
		}
	})
	res := ch.next(t)
	if res.err == nil || !res.err.(*Error).Timeout() || !strings.HasPrefix(res.err.Error(), "y.test ") {
		t.Fatalf("got %v, want y.test's timeout", res.err)
	}
	select {
	case res := <-ch:
		t.Fatalf("a cancelled lookup was answered: %v", res.err)
	case <-time.After(300 * time.Millisecond):
	}
	onLoop(t, l, func() { r.Resolve(&q1, "z.test", ch); r.Close() })
	if res := ch.next(t); res.err == nil || res.err.Error() != "z.test could not be resolved (125: Operation canceled)" {
		t.Fatalf("after Close: %v", res.err)
	}
}

func TestAddressesAndBadNames(t *testing.T) {
	srv := newTestServer(t)
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}})
	for _, tc := range []struct {
		name string
		want []netip.Addr
		err  string
	}{
		{"10.1.2.3", addrs("10.1.2.3"), ""},
		{"::1", addrs("::1"), ""},
		{"a..test", nil, "a..test could not be resolved (3: Host not found)"},
		{"", nil, " could not be resolved (3: Host not found)"},
		{strings.Repeat("x", 64) + ".test", nil, "could not be resolved (3: Host not found)"},
	} {
		res := resolve(t, l, r, tc.name)
		if !slices.Equal(res.addrs, tc.want) || (res.err == nil) != (tc.err == "") || res.err != nil && !strings.HasSuffix(res.err.Error(), tc.err) {
			t.Errorf("%q: %v %v, want %v %q", tc.name, res.addrs, res.err, tc.want, tc.err)
		}
	}
	if n := len(srv.queries("")); n != 0 {
		t.Errorf("%d queries sent for addresses and bad names", n)
	}
}

// reresolver looks its name up again from inside its handler, once.
type reresolver struct {
	r    *Resolver
	q2   Query
	out  results
	done bool
}

func (h *reresolver) Resolved(q *Query, res Result) {
	h.out.Resolved(q, res)
	if !h.done {
		h.done = true
		h.r.Resolve(&h.q2, q.Name(), h.out)
	}
}

func TestHandlerResolvingAgainDuringDelivery(t *testing.T) {
	srv := newTestServer(t)
	srv.set("ttl0.test", a("10.0.10.1", 0)) // expired as soon as answered: the lookup inside the handler sends a new query
	srv.with(func() { srv.delay = 20 * time.Millisecond })
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, NoIPv6: true})
	out := make(results, 4)
	h := &reresolver{r: r, out: out}
	var q1, q2 Query
	onLoop(t, l, func() {
		r.Resolve(&q1, "ttl0.test", h)
		r.Resolve(&q2, "ttl0.test", out)
	})
	for i := range 3 {
		if res := out.next(t); res.err != nil || !slices.Equal(res.addrs, addrs("10.0.10.1")) {
			t.Errorf("result %d: %v %v", i+1, res.addrs, res.err)
		}
	}
}

func countFds(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitFds polls until the process has want fds open.
func waitFds(t testing.TB, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for countFds(t) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d fds open, want %d", what, countFds(t), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSocketsClosedAfterLookups(t *testing.T) {
	srv := newTestServer(t)
	srv.set("ok.test", a("10.0.11.1", 60))
	srv.set("tc.test", a("10.0.11.2", 60))
	srv.with(func() { srv.trunc["tc.test"] = true })
	dead := newTestServer(t)
	dead.setSilent(true)
	l := startLoop(t)
	before := countFds(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, Resend: 100 * time.Millisecond})
	rdead := newResolver(t, l, Config{Servers: []netip.AddrPort{dead.addr}, Resend: 100 * time.Millisecond, Timeout: 150 * time.Millisecond})
	resolve(t, l, r, "ok.test")
	resolve(t, l, r, "tc.test")
	if res := resolve(t, l, rdead, "late.test"); res.err == nil {
		t.Fatal("a server that never answers answered")
	}
	// The abandoned query's sockets go at its next resend.
	waitFds(t, before, "after the lookups ended")

	ch := make(results, 1)
	var q Query
	onLoop(t, l, func() { rdead.Resolve(&q, "pending.test", ch) })
	onLoop(t, l, rdead.Close)
	ch.next(t)
	waitFds(t, before, "after Close")
}

func TestIPv4Off(t *testing.T) {
	srv := newTestServer(t)
	srv.set("dual.test", a("10.0.12.1", 60), a("fd00::12", 60))
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{srv.addr}, NoIPv4: true})
	if res := resolve(t, l, r, "dual.test"); res.err != nil || !slices.Equal(res.addrs, addrs("fd00::12")) {
		t.Errorf("ipv4=off: %v %v, want the IPv6 address alone", res.addrs, res.err)
	}
	if qs := srv.queries("dual.test"); len(qs) != 1 || qs[0].typ != dnsmessage.TypeAAAA {
		t.Errorf("ipv4=off sent %+v, want one AAAA query", qs)
	}
}
