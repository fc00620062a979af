package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/numaproxy/numaproxy/internal/dnstest"
)

// echoOn is an upstream on ip:port (port 0: any) that answers with its own
// address, the request-target and Host it got, as "addr uri host".
func echoOn(t *testing.T, ip string, port int) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", ln.Addr(), r.RequestURI, r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestResolverProxyPassVariablesVsNginx runs the same http block through numaproxy
// and Debian's nginx: proxy_pass made of variables to a name the test's DNS server
// answers, to an upstream block, to an IP address, with a URI in the variable, and
// the failures (unknown name, server failure, no resolver, a bad port). Status,
// the upstream that answered, the URI and Host it got, and the error log's line
// must be nginx's.
func TestResolverProxyPassVariablesVsNginx(t *testing.T) {
	port := freePort(t)
	p := strconv.Itoa(port)
	b1 := echoOn(t, "127.0.0.1", port)
	b2 := echoOn(t, "127.0.0.2", port)
	blk := echoOn(t, "127.0.0.1", 0)
	ns := dnstest.Start(t)
	ns.Set("app.test", 300, "127.0.0.1")
	ns.Set("two.test", 300, "127.0.0.2")
	ns.Fail("broken.test", dns.RcodeServerFailure)
	body := func(listen string) string {
		return `
  upstream block { server ` + blk + `; }
  server {
    listen ` + listen + `;
    resolver ` + ns.Addr() + ` ipv6=off;
    location / { proxy_pass http://$http_x_backend; }
    location /arg/ { proxy_pass http://$arg_to; }
    location /full/ { proxy_pass http://$http_x_backend$request_uri; }
    location /fixed/ { proxy_pass http://$http_x_backend/fixed/; }
    location /bare/ { proxy_pass http://$http_x_backend?only; }
    location /host/ { proxy_set_header Host $host; proxy_pass http://$http_x_backend; }
    location /nores/ { resolver_timeout 2s; proxy_pass http://$http_x_backend; }
    location /set/ { set $upstream app.test:` + p + `; proxy_pass http://$upstream; }
  }
  server {
    listen ` + listen + `;
    server_name noresolver;
    location / { proxy_pass http://$http_x_backend; }
  }`
	}
	ours, theirs := addrFor(t), addrFor(t)
	in := startHTTP(t, body(ours), ours)
	ng := startNginx(t, body(theirs), theirs)
	c := keepAliveClient(nil)
	for _, tc := range []struct {
		target, backend, host string
		status                int
		body, log             string
	}{
		{"/a/b?c=d", "app.test:" + p, "", 200, b1 + " /a/b?c=d app.test:" + p, ""},
		{"/a/%7E?x", "APP.TEST:" + p, "", 200, b1 + " /a/%7E?x APP.TEST:" + p, ""},
		{"/x", "two.test:" + p, "", 200, b2 + " /x two.test:" + p, ""},
		{"/x", "127.0.0.2:" + p, "", 200, b2 + " /x 127.0.0.2:" + p, ""},
		{"/x", "block", "", 200, blk + " /x block", ""},
		{"/x", "BLOCK", "", 200, blk + " /x BLOCK", ""},
		{"/arg/x?to=app.test:" + p, "", "", 200, b1 + " /arg/x?to=app.test:" + p + " app.test:" + p, ""},
		{"/full/y?z=1", "two.test:" + p, "", 200, b2 + " /full/y?z=1 two.test:" + p, ""},
		{"/fixed/y?z=1", "two.test:" + p, "", 200, b2 + " /fixed/ two.test:" + p, ""},
		{"/bare/y?z=1", "two.test:" + p, "", 200, b2 + " /?only two.test:" + p, ""},
		{"/host/y", "two.test:" + p, "", 200, b2 + " /host/y " + "HOSTNAME", ""},
		{"/x", "two.test:80", "", 502, "", ""}, // nothing listens on 127.0.0.2:80
		{"/x", "nosuch.test:" + p, "", 502, "", "nosuch.test could not be resolved (3: Host not found)"},
		{"/x", "broken.test:" + p, "", 502, "", "broken.test could not be resolved (2: Server failure)"},
		{"/x", "app.test:" + p, "noresolver", 502, "", "no resolver defined to resolve app.test"},
		{"/x", "127.0.0.1:" + p, "noresolver", 200, b1 + " /x 127.0.0.1:" + p, ""},
		{"/x", "app.test:70000", "", 500, "", `invalid port in upstream "app.test:70000"`},
		{"/x", "", "", 500, "", `invalid URL prefix in "http://"`},
		{"/set/x", "", "", 200, b1 + " /set/x app.test:" + p, ""}, // the container idiom
	} {
		for _, side := range []struct {
			name, addr string
			log        func() string
		}{
			{"numaproxy", ours, func() string { d, _ := os.ReadFile(in.path("logs/error.log")); return string(d) }},
			{"nginx", theirs, ng.errorLog},
		} {
			hdr := []string{"X-Backend", tc.backend}
			host := tc.host
			if host == "" {
				host = "front.example"
			}
			hdr = append(hdr, "Host", host)
			resp, got := get(t, c, "http://"+side.addr+tc.target, hdr...)
			want := strings.ReplaceAll(tc.body, "HOSTNAME", host)
			if resp.StatusCode != tc.status || (tc.status == 200 && got != want) {
				t.Errorf("%s: %s via %q: %d %q, want %d %q", side.name, tc.target, tc.backend, resp.StatusCode, got, tc.status, want)
			}
			if tc.log != "" && !strings.Contains(side.log(), tc.log) {
				t.Errorf("%s: %s via %q: no %q in the error log", side.name, tc.target, tc.backend, tc.log)
			}
		}
	}
}

// TestResolverSilentServerVsNginx: a name server that never answers fails the
// lookup after resolver_timeout with nginx's 502 and log line, and the loop serves
// other requests meanwhile without waiting (measured).
func TestResolverSilentServerVsNginx(t *testing.T) {
	silent := dnstest.Start(t)
	silent.Silent(true)
	b := echoOn(t, "127.0.0.1", 0)
	body := func(listen string) string {
		return `
  server {
    listen ` + listen + `;
    resolver ` + silent.Addr() + ` ipv6=off;
    resolver_timeout 1s;
    location / { proxy_pass http://$http_x_backend; }
    location /other/ { proxy_pass http://` + b + `; }
  }`
	}
	ours, theirs := addrFor(t), addrFor(t)
	in := startHTTP(t, body(ours), ours)
	ng := startNginx(t, body(theirs), theirs)
	for _, side := range []struct {
		name, addr string
		log        func() string
	}{
		{"numaproxy", ours, func() string { d, _ := os.ReadFile(in.path("logs/error.log")); return string(d) }},
		{"nginx", theirs, ng.errorLog},
	} {
		var worst atomic.Int64
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // other requests while the lookup waits
			defer wg.Done()
			c := keepAliveClient(nil)
			for i := 0; i < 200; i++ {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				resp, _ := get(t, c, "http://"+side.addr+"/other/")
				if resp.StatusCode != 200 {
					t.Errorf("%s: other request %d", side.name, resp.StatusCode)
				}
				if d := int64(time.Since(start)); d > worst.Load() {
					worst.Store(d)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		start := time.Now()
		resp, _ := get(t, keepAliveClient(nil), "http://"+side.addr+"/", "X-Backend", "app.test:80")
		took := time.Since(start)
		close(done)
		wg.Wait()
		t.Logf("%s: %d after %v; slowest other request meanwhile %v", side.name, resp.StatusCode, took.Round(time.Millisecond), time.Duration(worst.Load()).Round(time.Microsecond))
		if resp.StatusCode != 502 || took < 900*time.Millisecond || took > 4*time.Second {
			t.Errorf("%s: %d after %v, want 502 after resolver_timeout 1s", side.name, resp.StatusCode, took)
		}
		if worst.Load() > int64(500*time.Millisecond) {
			t.Errorf("%s: a request took %v while a lookup waited", side.name, time.Duration(worst.Load()))
		}
		if want := "app.test could not be resolved (110: Operation timed out)"; !strings.Contains(side.log(), want) {
			t.Errorf("%s: no %q in the error log", side.name, want)
		}
	}
}

// TestResolverFollowsDNS: requests flow through proxy_pass http://$http_x_backend
// while the test's DNS server moves the name from one upstream to another; the
// proxy follows once the answer's TTL (1 s) has passed, without a reload and
// without an error. The figures are printed.
func TestResolverFollowsDNS(t *testing.T) {
	port := freePort(t)
	b1 := echoOn(t, "127.0.0.1", port)
	b2 := echoOn(t, "127.0.0.2", port)
	ns := dnstest.Start(t)
	ns.Set("app.test", 1, "127.0.0.1")
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    resolver `+ns.Addr()+` ipv6=off;
    location / { proxy_pass http://$http_x_backend; }
  }`, addr)
	c := keepAliveClient(nil)
	backend := "app.test:" + strconv.Itoa(port)
	var moved time.Time
	counts := map[string]int{}
	errors, queriesBefore := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
		if i == 100 {
			queriesBefore = ns.Asked("app.test")
			ns.Set("app.test", 1, "127.0.0.2")
			moved = time.Now()
		}
		resp, body := get(t, c, "http://"+addr+"/", "X-Backend", backend)
		if resp.StatusCode != 200 {
			errors++
			continue
		}
		from, _, _ := strings.Cut(body, " ")
		counts[from]++
		if from == b1 && !moved.IsZero() && time.Since(moved) > 3*time.Second {
			t.Fatalf("still sent to %s %v after the move (TTL 1 s)", b1, time.Since(moved))
		}
		if from == b2 && counts[b2] >= 100 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("requests: %d to the old address, %d to the new, %d errors; %d questions for the name before the move (1 s TTL)", counts[b1], counts[b2], errors, queriesBefore)
	if errors != 0 || counts[b1] < 100 || counts[b2] < 100 {
		t.Errorf("old %d new %d errors %d", counts[b1], counts[b2], errors)
	}
	// Cached for its TTL: not a question per request.
	if queriesBefore > 10 {
		t.Errorf("%d questions for 100 requests within about a TTL", queriesBefore)
	}
}

// countingEcho is echoOn that also counts the connections it accepted and saw
// closed, and answers /slow after a pause.
type countingEcho struct {
	addr           string
	opened, closed atomic.Int64
}

func newCountingEcho(t *testing.T, ip string, port int) *countingEcho {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	e := &countingEcho{addr: ln.Addr().String()}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				time.Sleep(1500 * time.Millisecond)
			}
			fmt.Fprintf(w, "%s %s %s", ln.Addr(), r.RequestURI, r.Host)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				e.opened.Add(1)
			case http.StateClosed:
				e.closed.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return e
}

// TestResolverUpstreamResolve: nginx 1.27.3's server name resolve in an upstream
// block with a zone. numaproxy starts although the name does not resolve yet and
// answers 502 until it does; then requests flow while the DNS server moves the
// name to another address: the group follows after the TTL without a reload and
// without an error, a request in flight on the old address finishes there, and
// the idle keep-alive connection to the old address is closed. The upstream's own
// resolver is used (the http level's never answers). Figures are printed.
func TestResolverUpstreamResolve(t *testing.T) {
	port := freePort(t)
	b1 := newCountingEcho(t, "127.0.0.1", port)
	b2 := newCountingEcho(t, "127.0.0.2", port)
	ns := dnstest.Start(t)
	silent := dnstest.Start(t)
	silent.Silent(true)
	addr := addrFor(t)
	in := startHTTP(t, `
  resolver `+silent.Addr()+`;
  upstream app {
    zone app 64k;
    resolver `+ns.Addr()+` ipv6=off valid=1s;
    resolver_timeout 2s;
    server app.test:`+strconv.Itoa(port)+` resolve;
    keepalive 4;
  }
  server {
    listen `+addr+`;
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }`, addr)
	c := keepAliveClient(nil)

	// Not resolvable at start: 502, then followed once it is (valid=1s caches the
	// failure for a second).
	resp, _ := get(t, c, "http://"+addr+"/")
	if resp.StatusCode != 502 {
		t.Fatalf("before the name exists: %d, want 502", resp.StatusCode)
	}
	in.waitLog("app.test could not be resolved (3: Host not found)")
	ns.Set("app.test", 1, "127.0.0.1")
	waitFor(t, "the name to resolve", 10*time.Second, func() bool {
		resp, _ := get(t, c, "http://"+addr+"/")
		return resp.StatusCode == 200
	})

	// A slow request on the old address while the name moves.
	slow := make(chan string, 1)
	go func() {
		resp, body := get(t, keepAliveClient(nil), "http://"+addr+"/slow")
		slow <- fmt.Sprint(resp.StatusCode, " ", body)
	}()
	time.Sleep(200 * time.Millisecond)
	ns.Set("app.test", 1, "127.0.0.2")
	moved := time.Now()
	counts := map[string]int{}
	errs := 0
	for i := 0; i < 2000 && time.Since(moved) < 10*time.Second; i++ {
		resp, body := get(t, c, "http://"+addr+"/")
		if resp.StatusCode != 200 {
			errs++
			continue
		}
		from, _, _ := strings.Cut(body, " ")
		counts[from]++
		if from == b1.addr && time.Since(moved) > 4*time.Second {
			t.Fatalf("still sent to %s %v after the move (TTL 1 s)", b1.addr, time.Since(moved))
		}
		if from == b2.addr && counts[b2.addr] >= 50 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := <-slow
	t.Logf("after the move: %d requests to the old address, %d to the new, %d errors; the one in flight: %s; old address connections %d opened %d closed",
		counts[b1.addr], counts[b2.addr], errs, got, b1.opened.Load(), b1.closed.Load())
	if errs != 0 || counts[b2.addr] < 50 {
		t.Errorf("old %d new %d errors %d", counts[b1.addr], counts[b2.addr], errs)
	}
	if !strings.HasPrefix(got, "200 "+b1.addr+" /slow") {
		t.Errorf("the request in flight got %q", got)
	}
	waitFor(t, "the old address's keep-alive connections to close", 5*time.Second, func() bool {
		return b1.closed.Load() == b1.opened.Load()
	})

	// The name goes away: 502 (nginx removes the servers of a name that does not
	// exist), until it comes back.
	ns.Fail("app.test", dns.RcodeNameError)
	waitFor(t, "502 once the name is gone", 10*time.Second, func() bool {
		resp, _ := get(t, c, "http://"+addr+"/")
		return resp.StatusCode == 502
	})
	ns.Set("app.test", 1, "127.0.0.1")
	waitFor(t, "200 once the name is back", 10*time.Second, func() bool {
		resp, body := get(t, c, "http://"+addr+"/")
		return resp.StatusCode == 200 && strings.HasPrefix(body, b1.addr)
	})
	if n := silent.Asked("app.test"); n != 0 {
		t.Errorf("the http level's resolver was asked %d times", n)
	}
}

// TestResolverUpstreamReload: a reload under load keeps a group whose server
// follows DNS answering: the new configuration's group finds the names in the
// loop's resolver cache (no question to the DNS server within the TTL, no request
// waits) and the keep-alive connections to its addresses stay.
func TestResolverUpstreamReload(t *testing.T) {
	b := newCountingEcho(t, "127.0.0.1", 0)
	_, port, _ := net.SplitHostPort(b.addr)
	ns := dnstest.Start(t)
	ns.Set("app.test", 300, "127.0.0.1")
	addr := addrFor(t)
	body := func(header string) string {
		return `
  resolver ` + ns.Addr() + ` ipv6=off;
  upstream app { zone app 64k; server app.test:` + port + ` resolve; keepalive 4; }
  server {
    listen ` + addr + `;
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      add_header X-Config ` + header + `;
    }
  }`
	}
	in := startHTTP(t, body("one"), addr)
	c := keepAliveClient(nil)
	if resp, _ := get(t, c, "http://"+addr+"/"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	asked := ns.Asked("app.test")
	if err := os.WriteFile(in.path("conf/numaproxy.conf"), []byte("error_log logs/error.log info;\nworker_processes 1;\nevents { }\nhttp {\n"+body("two")+"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.signal("reload")
	in.waitLog("configuration reloaded")
	errs, seenTwo := 0, false
	for i := 0; i < 200; i++ {
		resp, _ := get(t, c, "http://"+addr+"/")
		if resp.StatusCode != 200 {
			errs++
		}
		seenTwo = seenTwo || resp.Header.Get("X-Config") == "two"
		if seenTwo && i > 50 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("errors %d; questions for the name before the reload %d, after %d; upstream connections opened %d", errs, asked, ns.Asked("app.test"), b.opened.Load())
	if errs != 0 || !seenTwo {
		t.Errorf("errors %d, new configuration seen %v", errs, seenTwo)
	}
	if ns.Asked("app.test") != asked {
		t.Errorf("the name was asked again within its TTL: %d, then %d", asked, ns.Asked("app.test"))
	}
	if b.opened.Load() != 1 {
		t.Errorf("%d upstream connections, want the one kept alive", b.opened.Load())
	}
}
