package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rssKiB is a process's resident set (VmRSS) in KiB.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// pipelineAttack is what a flood of pipelined requests from clients that never read
// did to a server.
type pipelineAttack struct {
	baseKiB, peakKiB int64
	closedAfter      []time.Duration // per attacking client: when its writes failed (the server closed)
	sent             atomic.Int64    // bytes the attacking clients got written
	aborted          bool            // the memory bound was hit and the attack called off
	latencies        []time.Duration // round trips of a normal keep-alive client meanwhile
	latencyErr       error
}

// attackPipeline has clients clients write total bytes of pipelined small GETs to addr
// and never read, while a normal keep-alive client does a GET every 20ms; it samples
// pid's RSS and calls the attack off when it grows by more than limitKiB. It ends
// when every attacking connection was closed by the server, or after wait.
func attackPipeline(t *testing.T, addr string, pid int, clients, total int, limitKiB int64, wait time.Duration) *pipelineAttack {
	t.Helper()
	res := &pipelineAttack{baseKiB: rssKiB(t, pid)}
	res.peakKiB = res.baseKiB
	block := bytes.Repeat([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), (1<<20)/27)
	began := time.Now()
	conns := make([]net.Conn, clients)
	for i := range conns {
		conns[i] = dial(t, addr)
		conns[i].(*net.TCPConn).SetReadBuffer(64 << 10) // small, and never read
		defer conns[i].Close()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetWriteDeadline(began.Add(wait))
			for sent := 0; sent < total/clients; sent += len(block) {
				n, err := c.Write(block)
				res.sent.Add(int64(n))
				if err != nil {
					if !isTimeout(err) {
						mu.Lock()
						res.closedAfter = append(res.closedAfter, time.Since(began))
						mu.Unlock()
					}
					return
				}
			}
			// Everything was taken: wait for the close, probing with empty lines.
			for time.Since(began) < wait {
				if _, err := c.Write([]byte("\r\n")); err != nil {
					mu.Lock()
					res.closedAfter = append(res.closedAfter, time.Since(began))
					mu.Unlock()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// The normal client.
	var stopNormal atomic.Bool
	normalDone := make(chan struct{})
	go func() {
		defer close(normalDone)
		c, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			res.latencyErr = err
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for !stopNormal.Load() {
			t0 := time.Now()
			c.SetDeadline(t0.Add(ioTimeout))
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
				res.latencyErr = err
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
			}
			if err != nil {
				res.latencyErr = err
				return
			}
			res.latencies = append(res.latencies, time.Since(t0))
			time.Sleep(20 * time.Millisecond)
		}
	}()

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
sample:
	for {
		select {
		case <-done:
			break sample
		case <-tick.C:
		}
		rss := rssKiB(t, pid)
		res.peakKiB = max(res.peakKiB, rss)
		if rss-res.baseKiB > limitKiB && !res.aborted {
			res.aborted = true // before the machine runs out of memory
			for _, c := range conns {
				c.Close()
			}
		}
	}
	stopNormal.Store(true)
	<-normalDone
	return res
}

func (a *pipelineAttack) String() string {
	var worst, sum time.Duration
	for _, d := range a.latencies {
		worst = max(worst, d)
		sum += d
	}
	avg := time.Duration(0)
	if len(a.latencies) > 0 {
		avg = sum / time.Duration(len(a.latencies))
	}
	return fmt.Sprintf("RSS %d MiB -> peak %d MiB (+%d MiB); attackers wrote %d KiB, closed after %v; aborted: %v; normal client: %d requests, avg %v, slowest %v, error %v",
		a.baseKiB>>10, a.peakKiB>>10, (a.peakKiB-a.baseKiB)>>10, a.sent.Load()>>10, a.closedAfter, a.aborted,
		len(a.latencies), avg.Round(time.Microsecond), worst.Round(time.Microsecond), a.latencyErr)
}

// TestProxyPipelineFlood: clients that pipeline 48 MB of small GETs to a location
// answering 4,000 bytes and never read must not make the server buffer without
// bound: it stops reading while output is blocked (as nginx does) and closes them
// after send_timeout, and another client keeps being answered meanwhile. Before the
// fix numaproxy kept reading and serving: its RSS grew by hundreds of MiB in a
// second and the connections lived on far past send_timeout.
func TestProxyPipelineFlood(t *testing.T) {
	const (
		clients  = 2
		total    = 48 << 20
		limitKiB = 64 << 10
		wait     = 15 * time.Second
	)
	body := func(addr string) string {
		return `
  send_timeout 2s;
  keepalive_requests 1000000;
  server {
    listen ` + addr + `;
    location / { return 200 "` + strings.Repeat("x", 4000) + `"; }
  }`
	}
	ngAddr := addrFor(t)
	ng := startNginx(t, body(ngAddr), ngAddr)
	ngRes := attackPipeline(t, ngAddr, ng.worker(t), clients, total, limitKiB, wait)
	t.Logf("nginx:     %v", ngRes)

	addr := addrFor(t)
	in := startHTTP(t, body(addr), addr)
	res := attackPipeline(t, addr, in.cmd.Process.Pid, clients, total, limitKiB, wait)
	t.Logf("numaproxy: %v", res)

	if res.aborted || res.peakKiB-res.baseKiB > limitKiB {
		t.Errorf("RSS grew by %d MiB (bound %d MiB)", (res.peakKiB-res.baseKiB)>>10, limitKiB>>10)
	}
	if len(res.closedAfter) != clients {
		t.Errorf("%d of %d flooding connections closed within %v (send_timeout 2s)", len(res.closedAfter), clients, wait)
	}
	for _, d := range res.closedAfter {
		if d > 8*time.Second {
			t.Errorf("a flooding connection was closed after %v (send_timeout 2s)", d)
		}
	}
	if !fileContains(in.path("logs/error.log"), "client timed out while sending response to client") {
		t.Error("the send_timeout closes were not logged (nginx: \"client timed out ... while sending response to client\")")
	}
	if res.latencyErr != nil || len(res.latencies) == 0 {
		t.Errorf("normal client: %d answers, %v", len(res.latencies), res.latencyErr)
	}
	for _, d := range res.latencies {
		if d > time.Second {
			t.Errorf("a normal request took %v during the flood", d)
			break
		}
	}
}

// TestProxyPipelineOrder: a client that pipelines thousands of requests (proxied,
// answered locally, with bodies) while reading gets every answer, in order.
func TestProxyPipelineOrder(t *testing.T) {
	t.Parallel()
	be := echoBackend(t)
	addr := addrFor(t)
	startHTTP(t, `
  upstream app { server `+be+`; keepalive 4; }
  server {
    listen `+addr+`;
    keepalive_requests 100000;
    location /p/ { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /r/ { return 200 "$uri"; }
  }`, addr)
	const n = 6000
	var reqs bytes.Buffer
	var want []string
	var methods []string
	for i := 0; i < n; i++ {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&reqs, "GET /p/%d HTTP/1.1\r\nHost: a\r\n\r\n", i)
			want, methods = append(want, fmt.Sprintf("/p/%d", i)), append(methods, "GET")
		case 1:
			fmt.Fprintf(&reqs, "GET /r/%d HTTP/1.1\r\nHost: a\r\nX-Pad: %s\r\n\r\n", i, strings.Repeat("p", i%200))
			want, methods = append(want, fmt.Sprintf("/r/%d", i)), append(methods, "GET")
		case 2:
			b := fmt.Sprintf("body-%d", i)
			fmt.Fprintf(&reqs, "POST /p/%d HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s", i, len(b), b)
			want, methods = append(want, fmt.Sprintf("/p/%d%s", i, b)), append(methods, "POST")
		}
	}
	c := dial(t, addr)
	defer c.Close()
	writeErr := make(chan error, 1)
	go func() {
		_, err := c.Write(reqs.Bytes()) // all at once: the server must pace itself
		writeErr <- err
	}()
	br := bufio.NewReader(c)
	for i := range want {
		c.SetReadDeadline(time.Now().Add(ioTimeout))
		resp, err := http.ReadResponse(br, &http.Request{Method: methods[i]})
		if err != nil {
			t.Fatalf("response %d of %d: %v", i+1, n, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || string(body) != want[i] {
			t.Fatalf("response %d: %d %q %v, want %q", i+1, resp.StatusCode, body, err, want[i])
		}
	}
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
}

// TestProxyKeepAliveAfterLargeUpload: a request body that was more than the
// upstream connection took at once (a chunked body, read whole first for an
// HTTP/1.0 upstream, then written while the connection was still being made) paused
// reading the client; the connection reads the next request after the response.
// Before the fix it was never read again.
func TestProxyKeepAliveAfterLargeUpload(t *testing.T) {
	t.Parallel()
	be := echoBackend(t)
	addr := addrFor(t)
	startHTTP(t, `
  client_max_body_size 0;
  server {
    listen `+addr+`;
    location / { proxy_pass http://`+be+`; }
  }`, addr)
	cl := newClient(t, addr)
	const size = 1 << 20
	cl.send("PUT /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(size, 16) + "\r\n" + strings.Repeat("u", size) + "\r\n0\r\n\r\n")
	if resp, body := cl.read("PUT"); resp.StatusCode != 200 || body != "/up"+strings.Repeat("u", size) {
		t.Fatalf("%d %d bytes", resp.StatusCode, len(body))
	}
	cl.send("GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, body := cl.read("GET"); resp.StatusCode != 200 || body != "/next" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

// echoBackend is an upstream that answers with the request URI followed by the body.
func echoBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.RequestURI+string(body))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
