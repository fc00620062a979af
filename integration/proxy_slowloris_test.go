package integration

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowlorisResult is what the dribbling clients and the normal client saw.
type slowlorisResult struct {
	closedAfter []time.Duration // per dribbling connection, when the server closed it
	open        int             // dribbling connections still open at the end
	got         map[string]int  // what the dribbling clients received before the close, counted
	normal      []time.Duration // round trips of the normal requests made meanwhile
	normalFail  int
}

// slowloris opens conns connections to addr that each send a request head one byte
// every interval, for at most wait, while a normal client does one request on a new
// connection every 100ms.
func slowloris(t *testing.T, addr string, conns int, interval, wait time.Duration) slowlorisResult {
	t.Helper()
	res := slowlorisResult{got: map[string]int{}}
	head := []byte("GET / HTTP/1.1\r\nHost: a\r\nX-Slow: ")
	var mu sync.Mutex
	var wg sync.WaitGroup
	began := time.Now()
	stop := make(chan struct{})
	for i := 0; i < conns; i++ {
		c, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if i%2 == 1 {
			// Every other connection does a whole request first: on a keep-alive
			// connection the timer starts with the next request's first byte.
			c.SetDeadline(time.Now().Add(ioTimeout))
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("first request on connection %d: %v", i, err)
			} else {
				io.Copy(io.Discard, resp.Body)
			}
			c.SetDeadline(time.Time{})
		}
		start := time.Now()
		wg.Add(2)
		go func() { // the dribble: the head, then one header byte per interval, never the end
			defer wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for n := 0; ; n++ {
				b := []byte{'x'}
				if n < len(head) {
					b = head[n : n+1]
				}
				if _, err := c.Write(b); err != nil {
					return
				}
				select {
				case <-tick.C:
				case <-stop:
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			c.SetReadDeadline(began.Add(wait))
			data, err := io.ReadAll(br)
			mu.Lock()
			defer mu.Unlock()
			if isTimeout(err) {
				res.open++
				return
			}
			res.closedAfter = append(res.closedAfter, time.Since(start))
			what := string(data)
			if err != nil && !errors.Is(err, io.EOF) {
				what += " [" + err.Error() + "]"
			}
			res.got[what]++
		}()
	}
	// A normal client meanwhile.
	for time.Since(began) < wait {
		t0 := time.Now()
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
			if err == nil {
				var line string
				line, err = bufio.NewReader(c).ReadString('\n')
				if err == nil && line != "HTTP/1.1 200 OK\r\n" {
					err = errors.New(line)
				}
			}
			c.Close()
		}
		if err != nil {
			res.normalFail++
		} else {
			res.normal = append(res.normal, time.Since(t0))
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait() // the readers end at their deadline at the latest
	sort.Slice(res.closedAfter, func(i, j int) bool { return res.closedAfter[i] < res.closedAfter[j] })
	return res
}

// TestProxySlowloris: client_header_timeout bounds the whole request head, from the
// accept (or from the first byte of a later request on a keep-alive connection), not
// each read: connections that send one header byte at a time (half of them after a
// first request) are closed when it runs out, as nginx does, with nothing sent (nginx logs "client timed out" and closes),
// and normal requests are answered meanwhile. Before the fix the timer restarted on
// every byte and none of them was ever closed.
func TestProxySlowloris(t *testing.T) {
	t.Parallel()
	const (
		conns    = 200
		interval = 300 * time.Millisecond
		wait     = 4500 * time.Millisecond
	)
	body := func(addr string) string {
		return `
  client_header_timeout 2s;
  server {
    listen ` + addr + `;
    location / { return 200 "ok"; }
  }`
	}
	ngAddr, addr := addrFor(t), addrFor(t)
	startNginx(t, body(ngAddr), ngAddr)
	in := startHTTP(t, body(addr), addr)

	var ng, np slowlorisResult
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ng = slowloris(t, ngAddr, conns, interval, wait) }()
	go func() { defer wg.Done(); np = slowloris(t, addr, conns, interval, wait) }()
	wg.Wait()

	report := func(name string, r slowlorisResult) {
		var maxNormal time.Duration
		for _, d := range r.normal {
			maxNormal = max(maxNormal, d)
		}
		first, last := time.Duration(0), time.Duration(0)
		if len(r.closedAfter) > 0 {
			first, last = r.closedAfter[0], r.closedAfter[len(r.closedAfter)-1]
		}
		t.Logf("%s: %d closed between %v and %v, %d still open; received %v; normal requests: %d answered (slowest %v), %d failed",
			name, len(r.closedAfter), first.Round(time.Millisecond), last.Round(time.Millisecond), r.open, r.got,
			len(r.normal), maxNormal.Round(time.Millisecond), r.normalFail)
	}
	report("nginx", ng)
	report("numaproxy", np)

	if np.open > 0 {
		t.Errorf("%d of %d dribbling connections still open after %v (client_header_timeout 2s)", np.open, conns, wait)
	}
	for _, d := range np.closedAfter {
		if d < 1500*time.Millisecond || d > 4*time.Second {
			t.Errorf("a dribbling connection was closed after %v, want ~2s", d)
			break
		}
	}
	// What the client sees must be what nginx shows it.
	for what := range np.got {
		if _, ok := ng.got[what]; !ok {
			t.Errorf("numaproxy sent %q to a dribbling client; nginx sent %v", what, ng.got)
		}
	}
	if !fileContains(in.path("logs/error.log"), "client timed out while reading client request headers") {
		t.Error("the timeouts were not logged (nginx: \"client timed out ... while reading client request headers\")")
	}
	if np.normalFail > 0 || len(np.normal) == 0 {
		t.Errorf("normal requests: %d answered, %d failed", len(np.normal), np.normalFail)
	}
	for _, d := range np.normal {
		if d > time.Second {
			t.Errorf("a normal request took %v", d)
			break
		}
	}
}

// TestProxyKeepaliveLocation: keepalive_timeout (both values) and keepalive_requests
// are the location's, as in nginx: the same requests on nginx and numaproxy get the
// same Connection and Keep-Alive headers and the connection is closed as soon.
func TestProxyKeepaliveLocation(t *testing.T) {
	t.Parallel()
	body := func(addr string) string {
		return `
  keepalive_timeout 10s;
  server {
    listen ` + addr + `;
    location / { return 200 "long"; }
    location /short { keepalive_timeout 1s 7; keepalive_requests 2; return 200 "short"; }
    location /off { keepalive_timeout 0; return 200 "off"; }
  }`
	}
	ngAddr, addr := addrFor(t), addrFor(t)
	startNginx(t, body(ngAddr), ngAddr)
	startHTTP(t, body(addr), addr)
	// exchange sends req on a new connection and returns what came back until the
	// close, without the Server and Date lines, and when the close came.
	exchange := func(addr, req string) (string, time.Duration) {
		c := dial(t, addr)
		defer c.Close()
		began := time.Now()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		raw, err := readToEOF(c)
		if err != nil {
			t.Fatalf("%q: %v (got %q)", req, err, raw)
		}
		var kept []string
		for _, line := range strings.SplitAfter(raw, "\r\n") {
			if !strings.HasPrefix(line, "Server: ") && !strings.HasPrefix(line, "Date: ") {
				kept = append(kept, line)
			}
		}
		return strings.Join(kept, ""), time.Since(began)
	}
	for _, tc := range []struct {
		req        string
		closeAfter time.Duration
	}{
		{"GET /short HTTP/1.1\r\nHost: a\r\n\r\n", time.Second},
		{"GET /off HTTP/1.1\r\nHost: a\r\n\r\n", 0},
		{"GET /short HTTP/1.1\r\nHost: a\r\n\r\nGET /short HTTP/1.1\r\nHost: a\r\n\r\n", 0},
	} {
		want, _ := exchange(ngAddr, tc.req)
		got, d := exchange(addr, tc.req)
		if got != want {
			t.Errorf("%q:\n got %q\nwant %q (nginx)", tc.req, got, want)
		}
		if d < tc.closeAfter-200*time.Millisecond || d > tc.closeAfter+2*time.Second {
			t.Errorf("%q: closed after %v, want ~%v", tc.req, d, tc.closeAfter)
		}
	}
}
