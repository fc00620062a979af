//go:build !race

package proxy

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestUpstreamFieldsAllocs: with $upstream_http_* named in a template, the upstream
// head kept for the log phase (keepHead) allocates nothing once warm, for proxied
// responses and cache hits alike.
func TestUpstreamFieldsAllocs(t *testing.T) {
	up := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Cache: up\r\nContent-Length: 13\r\n\r\nhello, world\n")
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(t))
	startWorker(t, addr, `
  proxy_cache_path `+t.TempDir()+` keys_zone=upfields:1m;
  upstream app { server `+up+`; keepalive 8; }
  server {
    listen `+addr+`;
    keepalive_requests 100000;
    add_header X-Up "$upstream_http_x_cache $upstream_cookie_sid";
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /cached { proxy_pass http://app; proxy_cache upfields; proxy_cache_valid 200 1h; }
  }`)
	if !upstreamFieldsUsed.Load() {
		t.Fatal("$upstream_http_* compiled, the head is not kept")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	reqs := [][]byte{
		[]byte("GET /api HTTP/1.1\r\nHost: example.com\r\n\r\n"),
		[]byte("GET /cached HTTP/1.1\r\nHost: example.com\r\n\r\n"),
	}
	for i := 0; i < 200; i++ {
		for _, r := range reqs {
			k.roundTrip(t, r)
			if !strings.Contains(string(k.buf[:512]), "X-Up: up \r\n") {
				t.Fatalf("no X-Up: %q", k.buf[:200])
			}
		}
	}
	k.fewAllocs(t, reqs, "requests")
}
