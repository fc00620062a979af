//go:build !race

package proxy

import (
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestCacheHitAllocs: cache hits through a real loop, a small body sent from the
// buffer its head was read into, a larger one with sendfile and one of a few KiB
// read with pread and sent with its head (WritevFile), allocate nothing once warm.
func TestCacheHitAllocs(t *testing.T) {
	small := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, world\n")
	mid := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6000\r\n\r\n"+strings.Repeat("y", 6000))
	big := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10000\r\n\r\n"+strings.Repeat("x", 10000))
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(t))
	startWorker(t, addr, `
  proxy_cache_path `+t.TempDir()+` levels=1:2 keys_zone=allocs:1m;
  server {
    listen `+addr+`;
    keepalive_requests 100000;
    proxy_cache allocs;
    proxy_cache_valid 200 1h;
    add_header X-Cache $upstream_cache_status;
    location /small { proxy_pass http://`+small+`; }
    location /big { proxy_pass http://`+big+`; }
    location /mid { proxy_pass http://`+mid+`; }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	reqs := [][]byte{
		[]byte("GET /small?id=42 HTTP/1.1\r\nHost: example.com\r\n\r\n"),
		[]byte("GET /big HTTP/1.1\r\nHost: example.com\r\n\r\n"),
		[]byte("GET /mid HTTP/1.1\r\nHost: example.com\r\n\r\n"),
	}
	for i := 0; i < 200; i++ {
		for _, r := range reqs {
			k.roundTrip(t, r)
			if i > 0 && !strings.Contains(string(k.buf[:512]), "X-Cache: HIT") {
				t.Fatalf("not a hit: %q", k.buf[:200])
			}
		}
	}
	k.fewAllocs(t, reqs, "cache hits")
}

// fewAllocs sends reqs 500 times over, each answered 200, and fails if the
// process allocated more than once per 50 rounds (what another goroutine may).
func (k *keepAliveConn) fewAllocs(t *testing.T, reqs [][]byte, what string) {
	t.Helper()
	const n = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		for _, r := range reqs {
			if st := k.roundTrip(t, r); st != 200 {
				t.Fatalf("status %d", st)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.Mallocs - before.Mallocs; got > n/50 {
		t.Fatalf("%d allocations for %d %s", got, len(reqs)*n, what)
	}
}

// BenchmarkCacheHit is one keep-alive hit of a small entry through a real loop
// (the bench's cache-small shape, one request at a time).
func BenchmarkCacheHit(b *testing.B) {
	up := rawUpstream(b, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, world\n")
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(b))
	startWorker(b, addr, `
  proxy_cache_path `+b.TempDir()+` levels=1:2 keys_zone=bench:1m;
  server {
    listen `+addr+`;
    keepalive_requests 1000000000;
    location /cached/ { proxy_pass http://`+up+`/; proxy_cache bench; proxy_cache_valid 200 1h; }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	req := []byte("GET /cached/ HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	for i := 0; i < 100; i++ {
		if st := k.roundTrip(b, req); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st := k.roundTrip(b, req); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
}
