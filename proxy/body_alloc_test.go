//go:build !race

package proxy

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/numaproxy/numaproxy/internal/looptest"
)

// chunkedUpstream is a keep-alive upstream that answers each chunked request once its
// last chunk arrived; it keeps a copy of what the first request looked like on the
// wire. It allocates nothing once running.
func chunkedUpstream(tb testing.TB, response string) (addr string, first func() []byte) {
	var mu sync.Mutex
	var seen []byte
	addr = looptest.Serve(tb, "\r\n0\r\n\r\n", response, func(req []byte) {
		mu.Lock()
		if seen == nil {
			seen = append([]byte(nil), req...)
		}
		mu.Unlock()
	})
	return addr, func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// TestChunkedUploadAllocs: a chunked body streamed to a keep-alive HTTP/1.1 upstream
// is framed afresh (the data of one read in one chunk, no extension, no trailer) and
// costs no allocation.
func TestChunkedUploadAllocs(t *testing.T) {
	up, first := chunkedUpstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(t))
	startWorker(t, addr, `
  upstream app { server `+up+`; keepalive 8; }
  server {
    listen `+addr+`;
    keepalive_requests 100000;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_request_buffering off; }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	req := []byte("POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5;name=value\r\nhello\r\n1\r\n,\r\n6\r\n world\r\n0\r\nX-Auth-User: admin\r\n\r\n")
	for i := 0; i < 200; i++ {
		if st := k.roundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	got := string(first())
	if want := "\r\n\r\nc\r\nhello, world\r\n0\r\n\r\n"; !bytes.HasSuffix([]byte(got), []byte(want)) || bytes.Contains([]byte(got), []byte("X-Auth-User")) {
		t.Fatalf("upstream saw %q, want the body as %q", got, want)
	}
	const n = 500
	if got := looptest.Mallocs(n, func() {
		if st := k.roundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
	}); got > n/50 {
		t.Fatalf("%d allocations for %d chunked uploads", got, n)
	}
}
