//go:build !race

package proxy

import (
	"net"
	"runtime"
	"strconv"
	"testing"
)

// TestSecurityPathsAllocs: what the security fixes added to a request allocates
// nothing once warm: a decoded, re-escaped path after a proxy_pass URI part, fields
// dropped by name (with the rules following Host, as the servers of the address
// differ), X-Forwarded-For fields joined, a Host with a trailing dot, a header value
// from $uri with control characters escaped.
func TestSecurityPathsAllocs(t *testing.T) {
	up := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(t))
	startWorker(t, addr, `
  upstream app { server `+up+`; keepalive 8; }
  server {
    listen `+addr+`;
    server_name a.test;
    keepalive_requests 100000;
    location /uri/ {
      proxy_pass http://app/base/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-URI $uri;
      proxy_set_header X-Var $http_x_custom;
    }
  }
  server { listen `+addr+`; server_name u.test; underscores_in_headers on; }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	req := []byte("GET /uri/a%2Fb/%2e%2E/c%20d%0D%0A/%E2%82%AC?x=1 HTTP/1.1\r\nX_Before: 1\r\nHost: A.test.\r\n" +
		"X_Forwarded_For: 6.6.6.6\r\nX.Dot: 1\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2\r\nX-Custom: c\r\n\r\n")
	for i := 0; i < 200; i++ {
		k.roundTrip(t, req)
	}
	const n = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		if st := k.roundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.Mallocs - before.Mallocs; got > n/50 {
		t.Fatalf("%d allocations for %d requests", got, n)
	}
}
