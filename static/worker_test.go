package static

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/internal/looptest"
)

// startWorker runs the HTTP core on one loop in this process with the http block
// src (the static module's tests need no binary).
func startWorker(tb testing.TB, addr, src string) {
	tb.Helper()
	looptest.Start(tb, mustConf(tb, "events {}\nhttp {\n"+src+"\n}\n"), nil, addr)
}

// keepAliveConn sends requests and reads Content-Length responses on one
// connection without allocating.
type keepAliveConn struct {
	c   net.Conn
	buf []byte
}

func (k *keepAliveConn) roundTrip(tb testing.TB, req []byte) int {
	st, _ := looptest.RoundTrip(tb, k.c, k.buf, req)
	return st
}

// $uri lives in the request when it is short and in a pool buffer when it is
// long, also after try_files makes a short one long; every such buffer goes back
// to the pool.
func TestURIBuffers(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(strings.Repeat("d", 120), strings.Repeat("e", 120), strings.Repeat("f", 100)+".txt")
	for name, body := range map[string]string{"a.txt": "short", long: "long"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := looptest.Addr(t)
	w := looptest.Start(t, mustConf(t, `events {}
http { server { listen `+addr+`; root `+dir+`;
	location / { }
	location /t/ { try_files /missing /`+long+`; }
} }`), nil, addr)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	for range 3 {
		for _, tc := range []struct{ path, body string }{
			{"/a.txt", "short"},
			{"/" + long, "long"},
			{"/t/x", "long"},
			{"/a.txt", "short"},
		} {
			st, body := looptest.RoundTrip(t, c, k.buf, []byte("GET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\n"))
			if st != 200 || string(body) != tc.body {
				t.Fatalf("%s: %d %q, want 200 %q", tc.path, st, body, tc.body)
			}
		}
	}
	c.Close()
	pool, ok := w.Loop().Pool().(*eventloop.HeapPool)
	if !ok {
		t.Skipf("the loop's pool is a %T", w.Loop().Pool())
	}
	deadline := time.Now().Add(5 * time.Second)
	for pool.Outstanding() > 1 { // the loop's read buffer
		if time.Now().After(deadline) {
			t.Fatalf("%d pool buffers out after the connection closed", pool.Outstanding())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
