//go:build !race

package proxy

import (
	"net"
	"runtime"
	"strconv"
	"testing"

	"github.com/numaproxy/numaproxy/internal/dnstest"
)

// TestVariableTargetAllocs: proxy_pass made of variables costs no allocation on
// the steady path: to an upstream block it names (keep-alive), and to a name the
// loop's resolver has cached, which allocates no more than a proxy_pass to a
// fixed address (both open a connection per request: no keepalive without an
// upstream block, as nginx).
func TestVariableTargetAllocs(t *testing.T) {
	up := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, world\n")
	_, upPort, _ := net.SplitHostPort(up)
	ns := dnstest.Start(t)
	ns.Set("app.test", 3600, "127.0.0.1")
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(t))
	startWorker(t, addr, `
  upstream app { server `+up+`; keepalive 8; }
  resolver `+ns.Addr()+` ipv6=off;
  server {
    listen `+addr+`;
    keepalive_requests 100000;
    location /var/ {
      proxy_pass http://$http_x_backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
    location /fixed/ { proxy_pass http://`+up+`; }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	measure := func(req []byte) float64 {
		for i := 0; i < 200; i++ {
			if st := k.roundTrip(t, req); st != 200 {
				t.Fatalf("%q: status %d", req, st)
			}
		}
		const n = 500
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 0; i < n; i++ {
			k.roundTrip(t, req)
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / n
	}
	block := measure([]byte("GET /var/x HTTP/1.1\r\nHost: a\r\nX-Backend: app\r\n\r\n"))
	named := measure([]byte("GET /var/x HTTP/1.1\r\nHost: a\r\nX-Backend: app.test:" + upPort + "\r\n\r\n"))
	fixed := measure([]byte("GET /fixed/x HTTP/1.1\r\nHost: a\r\n\r\n"))
	t.Logf("allocations per request: upstream block by variable %.2f, cached name %.2f, fixed address %.2f", block, named, fixed)
	if block > 0.02 {
		t.Errorf("%.2f allocations per request to an upstream block by variable", block)
	}
	// A per-request allocation shows as 1 or more; a few hundredths come and go
	// with the runtime's own work while the loop runs.
	if named > fixed+0.1 {
		t.Errorf("%.2f allocations per request to a cached name, %.2f to a fixed address", named, fixed)
	}
}
