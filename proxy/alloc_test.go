//go:build !race

package proxy

import (
	"net"
	"runtime"
	"strconv"
	"testing"
)

// TestSteadyPathAllocs: a proxied keep-alive request and a return, through a real
// loop, allocate nothing once pools, caches and the date are warm (the client and
// upstream of the test do not allocate either). The race detector allocates, so
// this runs without it.
func TestSteadyPathAllocs(t *testing.T) {
	up := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, world\n")
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(t))
	startWorker(t, addr, `
  upstream app { server `+up+`; keepalive 8; }
  server {
    listen `+addr+`;
    keepalive_requests 100000;
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      add_header X-Upstream $upstream_addr;
    }
    location /r { return 200 "$request_method $uri $arg_id\n"; }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	proxied := []byte("GET /api/items?id=42 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n\r\n")
	returned := []byte("GET /r?id=42 HTTP/1.1\r\nHost: example.com\r\n\r\n")
	for i := 0; i < 200; i++ {
		k.roundTrip(t, proxied)
		k.roundTrip(t, returned)
	}
	const n = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		if st := k.roundTrip(t, proxied); st != 200 {
			t.Fatalf("status %d", st)
		}
		if st := k.roundTrip(t, returned); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	runtime.ReadMemStats(&after)
	// A few allocations of the runtime itself may land in the window.
	if got := after.Mallocs - before.Mallocs; got > n/50 {
		t.Fatalf("%d allocations for %d proxied requests and %d returns", got, n, n)
	}
}
