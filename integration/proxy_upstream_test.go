package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// named is a set of upstreams that write their name to the response and to one shared
// log, so a test sees the order in which the proxy picked them.
type named struct {
	mu    sync.Mutex
	order []string
	be    map[string]*backend
	hold  map[string]chan struct{} // requests to /hold wait on it
}

func newNamed(t *testing.T, names ...string) *named {
	n := &named{be: map[string]*backend{}, hold: map[string]chan struct{}{}}
	for _, name := range names {
		name := name
		n.hold[name] = make(chan struct{})
		n.be[name] = newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			n.mu.Lock()
			n.order = append(n.order, name)
			n.mu.Unlock()
			if r.URL.Path == "/hold" {
				<-n.hold[name]
			}
			io.WriteString(w, name)
		})
	}
	return n
}

func (n *named) addr(name string) string { return n.be[name].Addr }

func (n *named) take() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := strings.Join(n.order, " ")
	n.order = nil
	return s
}

func (n *named) waitOrder(t *testing.T, k int) {
	waitFor(t, fmt.Sprintf("%d upstream requests", k), 5*time.Second, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.order) >= k
	})
}

func TestProxyBalancing(t *testing.T) {
	n := newNamed(t, "a", "b", "c")
	// closer accepts and closes at once: a server that fails (and counts its tries).
	closer := newRawUpstream(t, func(c net.Conn) {})
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`
  upstream wrr { server %[1]s weight=5; server %[2]s; server %[3]s; }
  upstream fails { server %[4]s max_fails=1 fail_timeout=30s; server %[1]s; }
  upstream backup { server %[1]s; server %[2]s backup; }
  upstream backupdead { server %[4]s max_fails=1 fail_timeout=30s; server %[2]s backup; }
  upstream down { server %[1]s down; server %[2]s; }
  upstream maxconns { server %[1]s weight=100 max_conns=1; server %[2]s; }
  upstream leastconn { least_conn; server %[1]s; server %[2]s; }
  upstream iphash { ip_hash; server %[1]s; server %[2]s; server %[3]s; }
  upstream hash { hash $request_uri; server %[1]s; server %[2]s; }
  upstream ring3 { hash $arg_k consistent; server %[1]s; server %[2]s; server %[3]s; }
  upstream ring2 { hash $arg_k consistent; server %[1]s; server %[2]s; }
  upstream random2 { random two; server %[1]s; server %[2]s; }
  server {
    listen %[5]s;
    location / { return 404; }
    location /wrr/ { proxy_pass http://wrr/; }
    location /fails/ { proxy_pass http://fails/; }
    location /backup/ { proxy_pass http://backup/; }
    location /backupdead/ { proxy_pass http://backupdead/; }
    location /down/ { proxy_pass http://down/; }
    location /maxconns/ { proxy_pass http://maxconns/; }
    location /leastconn/ { proxy_pass http://leastconn/; }
    location /iphash/ { proxy_pass http://iphash/; }
    location /hash/ { proxy_pass http://hash/; }
    location /ring3/ { proxy_pass http://ring3/; }
    location /ring2/ { proxy_pass http://ring2/; }
    location /random2/ { proxy_pass http://random2/; }
  }`, n.addr("a"), n.addr("b"), n.addr("c"), closer.Addr, addr), addr)
	c := keepAliveClient(nil)
	url := "http://" + addr
	seq := func(path string, k int) string {
		t.Helper()
		n.take()
		for i := 0; i < k; i++ {
			if resp, _ := get(t, c, url+path); resp.StatusCode != 200 {
				t.Fatalf("%s: %d", path, resp.StatusCode)
			}
		}
		return n.take()
	}

	t.Run("smooth weighted round robin", func(t *testing.T) {
		if got := seq("/wrr/x", 14); got != "a a b a c a a a a b a c a a" {
			t.Fatalf("order %q", got)
		}
	})
	t.Run("max_fails", func(t *testing.T) {
		if got := seq("/fails/x", 5); got != "a a a a a" || closer.accepted.Load() != 1 {
			t.Fatalf("order %q, failing server tried %d times", got, closer.accepted.Load())
		}
	})
	t.Run("backup", func(t *testing.T) {
		if got := seq("/backup/x", 3); got != "a a a" {
			t.Fatalf("order %q", got)
		}
		if got := seq("/backupdead/x", 3); got != "b b b" || closer.accepted.Load() != 2 {
			t.Fatalf("order %q, failing server tried %d times", got, closer.accepted.Load())
		}
	})
	t.Run("down", func(t *testing.T) {
		if got := seq("/down/x", 3); got != "b b b" {
			t.Fatalf("order %q", got)
		}
	})
	t.Run("max_conns and least_conn", func(t *testing.T) {
		for _, path := range []string{"/maxconns/", "/leastconn/"} {
			n.take()
			done := make(chan string, 1)
			go func() {
				resp, err := keepAliveClient(nil).Get(url + path + "hold")
				if err != nil {
					done <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				done <- string(b)
			}()
			n.waitOrder(t, 1)
			// a holds a request: the others go to b.
			if got := seq(path+"x", 3); got != "b b b" {
				t.Errorf("%s: order %q while a is busy", path, got)
			}
			n.hold["a"] <- struct{}{}
			if got := <-done; got != "a" {
				t.Errorf("%s: held request answered %q", path, got)
			}
		}
	})
	t.Run("ip_hash", func(t *testing.T) {
		got := strings.Fields(seq("/iphash/x", 6))
		for _, s := range got {
			if s != got[0] {
				t.Fatalf("one client, several servers: %v", got)
			}
		}
	})
	t.Run("hash", func(t *testing.T) {
		spread := map[string]bool{}
		for i := 0; i < 20; i++ {
			path := fmt.Sprintf("/hash/k%d", i)
			first := seq(path, 1)
			if again := seq(path, 3); again != strings.Repeat(first+" ", 2)+first {
				t.Fatalf("%s: %q then %q", path, first, again)
			}
			spread[first] = true
		}
		if len(spread) != 2 {
			t.Fatalf("20 keys went to %v", spread)
		}
	})
	t.Run("hash consistent", func(t *testing.T) {
		moved, kept := 0, 0
		for i := 0; i < 40; i++ {
			k := fmt.Sprintf("k%d", i)
			three := seq("/ring3/x?k="+k, 1)
			two := seq("/ring2/x?k="+k, 1)
			switch {
			case three == "c":
				moved++
			case three != two:
				t.Errorf("key %s moved from %s to %s when c left", k, three, two)
			default:
				kept++
			}
		}
		if moved == 0 || kept == 0 {
			t.Fatalf("moved %d kept %d", moved, kept)
		}
	})
	t.Run("random two", func(t *testing.T) {
		got := seq("/random2/x", 40)
		if !strings.Contains(got, "a") || !strings.Contains(got, "b") {
			t.Fatalf("40 random picks: %q", got)
		}
	})
}

// TestProxyUpstreamKeepalive counts the TCP connections the upstream accepted.
func TestProxyUpstreamKeepalive(t *testing.T) {
	t.Parallel()
	ka := newBackend(t, nil)
	few := newBackend(t, nil)
	short := newBackend(t, nil)
	none := newBackend(t, nil)
	ka10 := newBackend(t, nil)
	addr := addrFor(t)
	startHTTP(t, `
  upstream ka { server `+ka.Addr+`; keepalive 4; }
  upstream few { server `+few.Addr+`; keepalive 4; keepalive_requests 3; }
  upstream short { server `+short.Addr+`; keepalive 4; keepalive_timeout 200ms; }
  upstream none { server `+none.Addr+`; }
  server {
    listen `+addr+`;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location /ka { proxy_pass http://ka; }
    location /few { proxy_pass http://few; }
    location /short { proxy_pass http://short; }
    location /none { proxy_pass http://none; }
    location /ka10 { proxy_pass http://`+ka10.Addr+`; proxy_http_version 1.0; }
  }`, addr)
	c := keepAliveClient(nil)
	url := "http://" + addr

	for i := 0; i < 50; i++ {
		get(t, c, url+"/ka")
	}
	if got := ka.conns.Load(); got != 1 {
		t.Fatalf("50 sequential requests used %d upstream connections", got)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := keepAliveClient(nil)
			for i := 0; i < 25; i++ {
				resp, err := cc.Get(url + "/ka")
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if got := ka.conns.Load(); got > 5 {
		t.Fatalf("4 clients × 25 requests used %d upstream connections", got)
	}
	if got := len(ka.requests()); got != 150 {
		t.Fatalf("the upstream saw %d requests", got)
	}
	// HTTP/1.0 to the upstream: a connection per request.
	for i := 0; i < 3; i++ {
		get(t, c, url+"/ka10")
	}
	if got := ka10.conns.Load(); got != 3 {
		t.Fatalf("3 HTTP/1.0 requests used %d connections", got)
	}

	for i := 0; i < 9; i++ {
		get(t, c, url+"/few")
	}
	if got := few.conns.Load(); got != 3 {
		t.Fatalf("keepalive_requests 3: 9 requests used %d connections", got)
	}

	get(t, c, url+"/short")
	waitFor(t, "the idle upstream connection to be closed after keepalive_timeout", 5*time.Second, func() bool { return short.closed.Load() == 1 })
	get(t, c, url+"/short")
	if got := short.conns.Load(); got != 2 {
		t.Fatalf("%d connections", got)
	}

	for i := 0; i < 3; i++ {
		get(t, c, url+"/none")
	}
	if got := none.conns.Load(); got != 3 {
		t.Fatalf("without keepalive: %d connections for 3 requests", got)
	}
}

// TestProxyUpstreamKeepaliveBurst: connections over keepalive that a burst left idle
// serve the next burst if it comes within a second, and are closed (the oldest,
// down to keepalive) once they stayed unused; nginx, on the same configuration,
// closes them as soon as they are released, and so connects again for the next burst.
func TestProxyUpstreamKeepaliveBurst(t *testing.T) {
	t.Parallel()
	const burst = 6
	conf := func(be, addr string) string {
		return `
  upstream ka { server ` + be + `; keepalive 2; }
  server {
    listen ` + addr + `;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / { proxy_pass http://ka; }
  }`
	}
	// twoBursts sends two bursts of requests to addr, one right after the other,
	// and returns how many connections be accepted for them.
	twoBursts := func(t *testing.T, start func(be, addr string)) (*backend, func()) {
		var mu sync.Mutex
		arrived, gate := 0, make(chan struct{})
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			// Hold every request of a burst until all of them arrived, so that
			// each needs a connection of its own.
			mu.Lock()
			g := gate
			if arrived++; arrived%burst == 0 {
				close(gate)
				gate = make(chan struct{})
			}
			mu.Unlock()
			<-g
			io.WriteString(w, "ok")
		})
		addr := addrFor(t)
		start(be.Addr, addr)
		clients := make([]*http.Client, burst)
		for i := range clients {
			clients[i] = keepAliveClient(nil)
		}
		run := func() {
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := c.Get("http://" + addr + "/")
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}()
			}
			wg.Wait()
		}
		run()
		run()
		return be, run
	}
	t.Run("nginx", func(t *testing.T) {
		t.Parallel()
		be, _ := twoBursts(t, func(be, addr string) { startNginx(t, conf(be, addr), addr) })
		if got := be.conns.Load(); got != 2*burst-2 {
			t.Fatalf("nginx: two bursts of %d requests used %d upstream connections, want %d", burst, got, 2*burst-2)
		}
	})
	t.Run("numaproxy", func(t *testing.T) {
		t.Parallel()
		be, run := twoBursts(t, func(be, addr string) { startHTTP(t, conf(be, addr), addr) })
		if got := be.conns.Load(); got != burst {
			t.Fatalf("two bursts of %d requests, one right after the other, used %d upstream connections, want %d", burst, got, burst)
		}
		waitFor(t, "the connections over keepalive 2 to be closed", 10*time.Second, func() bool { return be.closed.Load() == burst-2 })
		time.Sleep(500 * time.Millisecond)
		if got := be.closed.Load(); got != burst-2 {
			t.Fatalf("at rest, %d of %d upstream connections were closed, want %d (keepalive 2)", got, burst, burst-2)
		}
		run()
		if got := be.conns.Load(); got != 2*burst-2 {
			t.Fatalf("a third burst after the trim: %d upstream connections in all, want %d", got, 2*burst-2)
		}
	})
}
