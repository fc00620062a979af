package integration

import (
	"crypto/md5"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// flakyBackend is an upstream whose life an operator's deploy drives: healthy,
// draining (its /health fails, requests still served), sick (every request
// answered 503, as an application whose database went away), dead (nothing
// listens), warming (listening, every request answered 503 until it is ready).
type flakyBackend struct {
	t     *testing.T
	Addr  string
	name  string
	state atomic.Int32
	mu    sync.Mutex
	srv   *http.Server
	hits  atomic.Int64
}

const (
	stHealthy = iota
	stDraining
	stSick
	stDead
	stWarming
)

func newFlakyBackend(t *testing.T, name string) *flakyBackend {
	b := &flakyBackend{t: t, Addr: addrFor(t), name: name}
	b.listen()
	t.Cleanup(func() { b.mu.Lock(); b.srv.Close(); b.mu.Unlock() })
	return b
}

func (b *flakyBackend) listen() {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", b.Addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		b.t.Errorf("backend %s: %v", b.name, err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(b.serve)}
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
	go srv.Serve(ln)
}

func (b *flakyBackend) serve(w http.ResponseWriter, r *http.Request) {
	st := b.state.Load()
	if r.URL.Path == "/health" {
		if st == stHealthy {
			io.WriteString(w, "ok")
		} else {
			w.WriteHeader(503)
		}
		return
	}
	b.hits.Add(1)
	if st == stWarming || st == stSick {
		w.WriteHeader(503)
		return
	}
	io.WriteString(w, b.name)
}

func (b *flakyBackend) set(st int32) {
	old := b.state.Swap(st)
	switch {
	case st == stDead && old != stDead:
		b.mu.Lock()
		b.srv.Close()
		b.mu.Unlock()
	case st != stDead && old == stDead:
		b.listen()
	}
}

// loadResult is what a steady stream of requests saw.
type loadResult struct {
	requests, errors int
	byBody           map[string]int
}

// steadyLoad sends requests to url from workers goroutines until stop closes.
func steadyLoad(url string, workers int, stop <-chan struct{}) *loadResult {
	res := &loadResult{byBody: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get(url)
				body := ""
				ok := err == nil && resp.StatusCode == 200
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					body = string(b)
				}
				mu.Lock()
				res.requests++
				if !ok {
					res.errors++
				} else {
					res.byBody[body]++
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	go func() { wg.Wait() }()
	<-stop
	wg.Wait()
	return res
}

// deployScenario runs steady load through the proxy at addr while backend b goes
// through a bad deploy: draining (its health endpoint fails first, as a
// readiness probe), sick, dead, warming, healthy again. It returns what the
// clients saw.
func deployScenario(t *testing.T, addr string, b *flakyBackend) *loadResult {
	stop := make(chan struct{})
	done := make(chan *loadResult)
	go func() { done <- steadyLoad("http://"+addr+"/", 2, stop) }()
	time.Sleep(1500 * time.Millisecond)
	b.set(stDraining)
	time.Sleep(time.Second) // ten probe intervals: margin for a loaded machine
	b.set(stSick)
	time.Sleep(1000 * time.Millisecond)
	b.set(stDead)
	time.Sleep(1000 * time.Millisecond)
	b.set(stWarming)
	time.Sleep(1000 * time.Millisecond)
	b.set(stHealthy)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	return <-done
}

func healthHTTP(addr, a, b, upstreamExtra, locExtra string) string {
	return fmt.Sprintf(`upstream be { zone be 64k; server %s; server %s; %s }
server { listen %s; location / { proxy_pass http://be; %s } }`, a, b, upstreamExtra, addr, locExtra)
}

// TestHealthCheckDeployUnderLoad: an upstream drains, turns sick, dies and warms
// up again under a steady stream of requests. With active health checks no
// client sees an error; with passive checks only (numaproxy's max_fails, and
// nginx's, which has no active checks) the sick server's 503s reach clients (a
// 503 is not a failure for proxy_next_upstream's default).
func TestHealthCheckDeployUnderLoad(t *testing.T) {
	type run struct {
		name  string
		start func(addr, a, b string)
	}
	results := map[string]*loadResult{}
	for _, r := range []run{
		{"numaproxy health_check", func(addr, a, b string) {
			startHTTP(t, healthHTTP(addr, a, b, "", "health_check uri=/health interval=100ms passes=2;"), addr)
		}},
		{"numaproxy passive", func(addr, a, b string) { startHTTP(t, healthHTTP(addr, a, b, "", ""), addr) }},
		{"nginx passive", func(addr, a, b string) {
			startNginx(t, strings.Replace(healthHTTP(addr, a, b, "", ""), "zone be 64k;", "", 1), addr)
		}},
	} {
		A, B := newFlakyBackend(t, "A"), newFlakyBackend(t, "B")
		addr := addrFor(t)
		r.start(addr, A.Addr, B.Addr)
		time.Sleep(300 * time.Millisecond)
		res := deployScenario(t, addr, B)
		results[r.name] = res
		t.Logf("%-24s requests %5d  client errors %4d  served by %v", r.name, res.requests, res.errors, res.byBody)
		if res.byBody["B"] == 0 {
			t.Errorf("%s: B never served: %v", r.name, res.byBody)
		}
	}
	if n := results["numaproxy health_check"].errors; n != 0 {
		t.Errorf("with health checks: %d client errors, want 0", n)
	}
	if results["numaproxy passive"].errors == 0 || results["nginx passive"].errors == 0 {
		t.Errorf("the passive runs saw no errors: the scenario does not exercise what checks add")
	}
}

// TestHealthCheckMatch: match's status, header and body tests decide; a failing
// server is skipped and comes back after passes successes, with NGINX Plus's log
// lines.
func TestHealthCheckMatch(t *testing.T) {
	var bad atomic.Bool
	mk := func(name string, flaky bool) *backend {
		return newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hc" {
				w.Header().Set("Content-Type", "text/html")
				w.Header().Set("X-Role", "primary")
				if flaky && bad.Load() {
					io.WriteString(w, "degraded")
					return
				}
				io.WriteString(w, "<p>all ok</p>")
				return
			}
			io.WriteString(w, name)
		})
	}
	A, B := mk("A", false), mk("B", true)
	addr := addrFor(t)
	in := startHTTP(t, fmt.Sprintf(`
match good { status 200-299; status ! 204; header Content-Type = text/html; header X-Role ~ "^prim"; header ! X-Broken; body ~ "all ok"; body !~ "degraded"; }
upstream be { zone be 64k; server %s; server %s; }
server { listen %s; location = /metrics { metrics; } location / { proxy_pass http://be; health_check uri=/hc interval=100ms fails=2 passes=3 match=good; } }`, A.Addr, B.Addr, addr), addr)
	healthMetric := func() string {
		_, body := get(t, &http.Client{}, "http://"+addr+"/metrics")
		for _, l := range strings.Split(body, "\n") {
			if strings.Contains(l, "upstream_peer_healthy") && strings.Contains(l, B.Addr) {
				return l
			}
		}
		return ""
	}
	c := &http.Client{}
	count := func(n int) map[string]int {
		m := map[string]int{}
		for i := 0; i < n; i++ {
			_, body := get(t, c, "http://"+addr+"/")
			m[body]++
		}
		return m
	}
	time.Sleep(300 * time.Millisecond)
	if m := count(20); m["A"] == 0 || m["B"] == 0 {
		t.Fatalf("both healthy: %v", m)
	}
	bad.Store(true)
	in.waitLog(`peer is unhealthy while checking body, health check "good" of peer ` + B.Addr + ` in upstream "be"`)
	if m := count(20); m["B"] != 0 {
		t.Errorf("unhealthy B still served: %v", m)
	}
	if l := healthMetric(); !strings.HasSuffix(l, " 0") {
		t.Errorf("metric of unhealthy B: %q", l)
	}
	bad.Store(false)
	in.waitLog(`peer is healthy while checking status code, health check "good" of peer ` + B.Addr + ` in upstream "be"`)
	if m := count(20); m["B"] == 0 {
		t.Errorf("B did not come back: %v", m)
	}
	if l := healthMetric(); !strings.HasSuffix(l, " 1") {
		t.Errorf("metric of healthy B: %q", l)
	}
}

// TestHealthCheckMatchTests checks each kind of test of match on its own.
func TestHealthCheckMatchTests(t *testing.T) {
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		io.WriteString(w, "hello world")
	})
	for _, tc := range []struct {
		match string
		pass  bool
	}{
		{"status 201;", true},
		{"status 200;", false},
		{"status ! 500-599;", true},
		{"status ! 201 202;", false},
		{"header Content-Type = text/plain;", true},
		{"header Content-Type != text/plain;", false},
		{`header Content-Type ~ "^text/";`, true},
		{`header Content-Type !~ "^text/";`, false},
		{"header X-Missing;", false},
		{"header ! X-Missing;", true},
		{`body ~ "wor.d";`, true},
		{`body !~ "wor.d";`, false},
	} {
		addr := addrFor(t)
		// A second server that always passes keeps the group answering.
		in := startHTTP(t, fmt.Sprintf(`match m { %s }
upstream be { zone be 64k; server %s; }
server { listen %s; location / { proxy_pass http://be; health_check interval=100ms mandatory match=m; } }`, tc.match, up.Addr, addr), addr)
		want := 201 // the upstream's answer
		if !tc.pass {
			want = 502
		}
		var code int
		waitFor(t, tc.match, 3*time.Second, func() bool {
			resp, _ := get(t, &http.Client{}, "http://"+addr+"/")
			code = resp.StatusCode
			return code == want
		})
		// and it stays so
		time.Sleep(250 * time.Millisecond)
		if resp, _ := get(t, &http.Client{}, "http://"+addr+"/"); resp.StatusCode != want {
			t.Errorf("match { %s }: status %d, want %d", tc.match, resp.StatusCode, want)
		}
		_ = in
	}
}

// TestHealthCheckMandatory: with mandatory a server takes no request before its
// first check passes; without it, it is healthy at once.
func TestHealthCheckMandatory(t *testing.T) {
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hc" {
			w.WriteHeader(500)
			return
		}
		io.WriteString(w, "up")
	})
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`upstream be { zone be 64k; server %s; }
server { listen %s; location / { proxy_pass http://be; health_check uri=/hc interval=1h mandatory; } }`, up.Addr, addr), addr)
	for i := 0; i < 5; i++ {
		if resp, _ := get(t, &http.Client{}, "http://"+addr+"/"); resp.StatusCode != 502 {
			t.Fatalf("mandatory, failing check: status %d, want 502", resp.StatusCode)
		}
	}
	// A server whose check has not run yet (interval 1h, first check at start,
	// a slow answer) is "checking" with mandatory: nothing reaches it.
	var release = make(chan struct{})
	slow := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hc" {
			<-release
		}
		io.WriteString(w, "slow")
	})
	defer close(release)
	addr2 := addrFor(t)
	startHTTP(t, fmt.Sprintf(`upstream be { zone be 64k; server %s; }
server { listen %s; location / { proxy_pass http://be; health_check uri=/hc interval=1h mandatory; } }`, slow.Addr, addr2), addr2)
	if resp, _ := get(t, &http.Client{}, "http://"+addr2+"/"); resp.StatusCode != 502 {
		t.Errorf("mandatory, check pending: status %d, want 502", resp.StatusCode)
	}
	addr3 := addrFor(t)
	startHTTP(t, fmt.Sprintf(`upstream be { zone be 64k; server %s; }
server { listen %s; location / { proxy_pass http://be; health_check uri=/hc interval=1h; } }`, slow.Addr, addr3), addr3)
	if resp, body := get(t, &http.Client{}, "http://"+addr3+"/"); resp.StatusCode != 200 || body != "slow" {
		t.Errorf("without mandatory, check pending: status %d %q, want 200", resp.StatusCode, body)
	}
}

// TestHealthCheckSlowStart: a server that comes back gets a growing share of the
// requests over slow_start.
func TestHealthCheckSlowStart(t *testing.T) {
	var down atomic.Bool
	mk := func(name string, flaky bool) *backend {
		return newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hc" && flaky && down.Load() {
				w.WriteHeader(503)
				return
			}
			io.WriteString(w, name)
		})
	}
	A, B := mk("A", false), mk("B", true)
	addr := addrFor(t)
	down.Store(true)
	in := startHTTP(t, fmt.Sprintf(`upstream be { zone be 64k; server %s weight=10; server %s weight=10 slow_start=4s; }
server { listen %s; location / { proxy_pass http://be; health_check uri=/hc interval=100ms mandatory; } }`, A.Addr, B.Addr, addr), addr)
	_ = in
	time.Sleep(300 * time.Millisecond)
	down.Store(false)
	in.waitLog("peer is healthy")
	c := &http.Client{}
	var shares []float64
	for sec := 0; sec < 5; sec++ {
		m := map[string]int{}
		end := time.Now().Add(time.Second)
		for time.Now().Before(end) {
			_, body := get(t, c, "http://"+addr+"/")
			m[body]++
			time.Sleep(2 * time.Millisecond)
		}
		shares = append(shares, float64(m["B"])/float64(m["A"]+m["B"]))
	}
	t.Logf("B's share of requests, second by second after it came back (slow_start=4s): %.2f", shares)
	if !(shares[0] < shares[2] && shares[2] < shares[4]) || shares[0] > 0.25 || shares[4] < 0.4 {
		t.Errorf("B's share does not ramp up: %.2f", shares)
	}
}

// TestHealthCheckOneProber: four loops send one probe per server and interval
// between them, not four; after a reload the old configuration's probes stop.
func TestHealthCheckOneProber(t *testing.T) {
	var probes atomic.Int64
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hc" {
			probes.Add(1)
		}
		io.WriteString(w, "ok")
	})
	addr := addrFor(t)
	in := startMain(t, "worker_processes 4;\n", fmt.Sprintf(`upstream be { zone be 64k; server %s; }
server { listen %s; location / { proxy_pass http://be; health_check uri=/hc interval=100ms; } }`, up.Addr, addr), addr)
	measure := func() int64 {
		probes.Store(0)
		time.Sleep(2 * time.Second)
		return probes.Load()
	}
	n := measure()
	t.Logf("probes in 2s at interval=100ms with 4 loops: %d", n)
	if n < 5 || n > 30 {
		t.Errorf("probes in 2s: %d, want about 20", n)
	}
	in.signal("reload")
	time.Sleep(500 * time.Millisecond)
	n = measure()
	t.Logf("after a reload: %d", n)
	if n < 5 || n > 30 {
		t.Errorf("probes in 2s after a reload: %d, want about 20", n)
	}
}

// TestStickyCookie: the first response names its server in the cookie (the MD5
// of its address, or its route=), requests with it keep to that server, and
// when it is down they go to another, which the response then names.
func TestStickyCookie(t *testing.T) {
	mk := func(name string) *backend {
		return newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) })
	}
	A, B := mk("A"), mk("B")
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`upstream be { zone be 64k; server %s; server %s route=b1;
  sticky cookie srv_id expires=1h domain=.example.com path=/ httponly samesite=lax secure; }
server { listen %s; location / { proxy_pass http://be; proxy_next_upstream error; } }`, A.Addr, B.Addr, addr), addr)
	c := &http.Client{}
	md5A := fmt.Sprintf("%x", md5.Sum([]byte(A.Addr)))
	route := map[string]string{"A": md5A, "B": "b1"}
	resp, body := get(t, c, "http://"+addr+"/")
	sc := resp.Header.Get("Set-Cookie")
	t.Logf("first response from %s: Set-Cookie: %s", body, sc)
	want := "srv_id=" + route[body] + "; expires="
	if !strings.HasPrefix(sc, want) || !strings.HasSuffix(sc, "; max-age=3600; domain=.example.com; path=/; httponly; samesite=lax; secure") {
		t.Fatalf("Set-Cookie %q, want %s...", sc, want)
	}
	for name, other := range map[string]string{"A": "B", "B": "A"} {
		for i := 0; i < 6; i++ {
			resp, got := get(t, c, "http://"+addr+"/", "Cookie", "x=1; srv_id="+route[name])
			if got != name {
				t.Fatalf("cookie for %s: served by %s", name, got)
			}
			if sc := resp.Header.Get("Set-Cookie"); sc != "" {
				t.Errorf("a bound request got Set-Cookie %q", sc)
			}
		}
		_ = other
	}
	// The cookie's server goes away: another answers and the cookie moves.
	B.srv.Close()
	for i := 0; i < 3; i++ {
		resp, got := get(t, c, "http://"+addr+"/", "Cookie", "srv_id=b1")
		if got != "A" || !strings.HasPrefix(resp.Header.Get("Set-Cookie"), "srv_id="+md5A+";") {
			t.Errorf("sticky server down: served by %q, Set-Cookie %q", got, resp.Header.Get("Set-Cookie"))
		}
	}
	// An unknown value is a client without a cookie.
	if resp, got := get(t, c, "http://"+addr+"/", "Cookie", "srv_id=nonsense"); got != "A" || resp.Header.Get("Set-Cookie") == "" {
		t.Errorf("unknown cookie: served by %q, Set-Cookie %q", got, resp.Header.Get("Set-Cookie"))
	}
}

// TestStickyCookieHealthCheck: a bound client whose server fails its health
// checks goes to another server without a single error, under steady load.
func TestStickyCookieHealthCheck(t *testing.T) {
	A, B := newFlakyBackend(t, "A"), newFlakyBackend(t, "B")
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`upstream be { zone be 64k; server %s; server %s route=b; sticky cookie srv; }
server { listen %s; location / { proxy_pass http://be; health_check uri=/health interval=100ms; } }`, A.Addr, B.Addr, addr), addr)
	time.Sleep(300 * time.Millisecond)
	stop := make(chan struct{})
	var errs, toA, toB atomic.Int64
	go func() {
		c := &http.Client{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
			req.Header.Set("Cookie", "srv=b")
			resp, err := c.Do(req)
			if err != nil {
				errs.Add(1)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode != 200:
				errs.Add(1)
			case string(b) == "A":
				toA.Add(1)
			default:
				toB.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second)
	B.set(stDraining)
	time.Sleep(time.Second)
	B.set(stSick)
	time.Sleep(time.Second)
	bBefore := toB.Load()
	B.set(stHealthy)
	time.Sleep(time.Second)
	close(stop)
	t.Logf("bound to B: %d to B, %d to A while B was out, %d errors", toB.Load(), toA.Load(), errs.Load())
	if errs.Load() != 0 || toA.Load() == 0 || toB.Load() == bBefore {
		t.Errorf("bound client: errors %d, to A %d, B after recovery %d", errs.Load(), toA.Load(), toB.Load()-bBefore)
	}
}

// TestHealthStickyConfigErrors: what numaproxy does not do is refused with the
// file and line, and NGINX Plus's rules are checked.
func TestHealthStickyConfigErrors(t *testing.T) {
	for _, tc := range []struct{ http, want string }{
		{"upstream be { server 127.0.0.1:1; }\nserver { location / { proxy_pass http://be;\nhealth_check; } }",
			`health check requires upstream "be" to be in shared memory in %s:7`},
		{"server { location / {\nhealth_check; } }",
			`"health_check" requires "proxy_pass" to an upstream group in the same location in %s:6`},
		{"upstream be { zone be 64k; server 127.0.0.1:1; }\nserver { location / { proxy_pass http://be;\nhealth_check match=nope; } }",
			`match "nope" not found in %s:7`},
		{"upstream be { zone be 64k; server 127.0.0.1:1; }\nserver { location / { proxy_pass http://be;\nhealth_check type=grpc; } }",
			`health_check parameter "type=grpc" is not supported by numaproxy in %s:7`},
		{"match m {\nrequire $x; }",
			`"require" in match is not supported by numaproxy in %s:6`},
		{"match m {\nstatus 700; }",
			`invalid value "700" in "status" directive in %s:6`},
		{"upstream be { zone be 64k; server 127.0.0.1:1;\nsticky route $a $b; }",
			`"sticky route" is not supported by numaproxy (only "sticky cookie") in %s:6`},
		{"upstream be { zone be 64k; server 127.0.0.1:1;\nsticky learn create=$x lookup=$y zone=z:1m; }",
			`"sticky learn" is not supported by numaproxy (only "sticky cookie") in %s:6`},
		{"upstream be { zone be 64k; server 127.0.0.1:1;\nsticky cookie s samesite=odd; }",
			`invalid parameter "samesite=odd" in %s:6`},
	} {
		dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "error_log logs/error.log;\nevents { }\nhttp {\n\n" + tc.http + "\n}\n"})
		r := run(t, "-p", dir, "-t")
		want := fmt.Sprintf(tc.want, dir+"/conf/numaproxy.conf")
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.http, r.stderr, want)
		}
	}
}

// TestHealthCheckStateAcrossReload: a reload keeps each server's state (its
// first check under the new configuration may take long); with mandatory only
// persistent keeps it, else the server waits for its check.
func TestHealthCheckStateAcrossReload(t *testing.T) {
	for _, tc := range []struct {
		params    string
		firstOK   bool   // B's first check passes; later ones hang
		wantAfter string // who serves after the reload
	}{
		{"", false, "A"},                     // unhealthy stays out
		{"mandatory persistent", true, "AB"}, // healthy stays in
		{"mandatory", true, "A"},             // checking again
	} {
		var checks atomic.Int64
		release := make(chan struct{})
		A := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "A") })
		B := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hc" {
				if checks.Add(1) > 1 {
					<-release
				}
				if !tc.firstOK {
					w.WriteHeader(503)
				}
				return
			}
			io.WriteString(w, "B")
		})
		addr := addrFor(t)
		cfg := fmt.Sprintf(`upstream be { zone be 64k; server %s; server %s; }
server { listen %s; location / { proxy_pass http://be; health_check uri=/hc interval=1h %s; } }`, A.Addr, B.Addr, addr, tc.params)
		in := startHTTP(t, cfg, addr)
		waitFor(t, "first check", 5*time.Second, func() bool { return checks.Load() == 1 })
		time.Sleep(100 * time.Millisecond)
		in.signal("reload")
		in.waitLog("configuration reloaded")
		waitFor(t, "second check", 5*time.Second, func() bool { return checks.Load() == 2 })
		served := map[string]bool{}
		for i := 0; i < 10; i++ {
			_, body := get(t, &http.Client{}, "http://"+addr+"/")
			served[body] = true
		}
		got := ""
		for _, s := range []string{"A", "B"} {
			if served[s] {
				got += s
			}
		}
		if got != tc.wantAfter {
			t.Errorf("health_check %q, first check ok %v: after a reload served by %q, want %q", tc.params, tc.firstOK, got, tc.wantAfter)
		}
		close(release)
	}
}
