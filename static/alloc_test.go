//go:build !race

package static

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/numaproxy/numaproxy/internal/testport"
)

// TestSteadyPathAllocs: files served through a real loop and the HTTP core (with
// and without sendfile and open_file_cache, an index redirect, try_files, expires
// and charset, a range, a regex location's alias with a capture) allocate nothing
// once pools and caches are warm. The race detector allocates, so this runs
// without it.
func TestSteadyPathAllocs(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"a.txt": "hello, world\n", "index.html": "<p>index</p>\n", "big.bin": string(bytes.Repeat([]byte("x"), 100<<10))} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := "127.0.0.1:" + strconv.Itoa(testport.Free(t))
	startWorker(t, addr, `
  server {
    listen `+addr+`;
    keepalive_requests 100000;
    root `+dir+`;
    location / { sendfile on; tcp_nopush on; }
    location /off/ { alias `+dir+`/; sendfile off; }
    location /c/ { alias `+dir+`/; open_file_cache max=10; expires 1h; charset utf-8; }
    location /tf/ { alias `+dir+`/; try_files $uri =404; }
    location ~ ^/re/(?<f>.+)$ { alias `+dir+`/$1; }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 256<<10)}
	reqs := [][]byte{
		[]byte("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET /off/a.txt HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET /off/big.bin HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET /c/a.txt HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET /tf/a.txt HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET /re/a.txt HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\n\r\n"),
	}
	for i := 0; i < 100; i++ {
		for _, r := range reqs {
			k.roundTrip(t, r)
		}
	}
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		for _, r := range reqs {
			if st := k.roundTrip(t, r); st != 200 && st != 206 {
				t.Fatalf("%q: status %d", r, st)
			}
		}
	}
	runtime.ReadMemStats(&after)
	got := after.Mallocs - before.Mallocs
	t.Logf("%d allocations for %d requests", got, n*len(reqs))
	if got > n*uint64(len(reqs))/50 {
		t.Fatalf("%d allocations for %d requests", got, n*len(reqs))
	}
}

// BenchmarkResponseReset is the per-request reset of a filled Response.
func BenchmarkResponseReset(b *testing.B) {
	var r Response
	r.Reset()
	ct, etag := []byte("text/html"), []byte(`"1-2"`)
	b.ReportAllocs()
	for range b.N {
		r.Status, r.ContentType, r.ETag, r.AcceptRanges = 200, ct, etag, true
		r.Body = append(r.Body, Part{Off: 0, Len: 100})
		r.Reset()
	}
}

// The per-loop memos of the last Content-Type lookup, ETag and Last-Modified
// answer each request as the tables and the file say, whatever came before.
func TestHandlerMemos(t *testing.T) {
	cfg := mustConf(t, `http { server {
		location /a/ { types { text/html html; text/css css; } default_type a/default; }
		location /b/ { types { text/plain html; } default_type b/default; }
	} }`)
	la, lb := ConfOf(cfg.HTTP.Servers[0].Locations[0]), ConfOf(cfg.HTTP.Servers[0].Locations[1])
	h := NewHandler()
	defer h.Close()
	for i, c := range []struct {
		lc   *LocConf
		uri  string
		want string
	}{
		{la, "/a/x.html", "text/html"},
		{la, "/a/y.html", "text/html"},
		{lb, "/b/x.html", "text/plain"}, // same extension, another table
		{la, "/a/x.HTML", "text/html"},
		{la, "/a/x.css", "text/css"},
		{la, "/a/x.png", "a/default"},
		{lb, "/b/x.png", "b/default"}, // not in either table: each location's default
		{la, "/a/x.averyveryverylongextension", "a/default"},
		{la, "/a/x.html", "text/html"},
		{la, "/a/noext", "a/default"},
	} {
		if got := string(h.contentType(c.lc, []byte(c.uri))); got != c.want {
			t.Errorf("%d: %s in %s: %q, want %q", i, c.uri, c.lc.Types.byExt, got, c.want)
		}
	}
	for _, f := range [][2]int64{{1, 2}, {1, 2}, {1, 3}, {0x6b0fb19a, 100}, {0x6b0fb19a, 100}, {2, 100}} {
		got := h.etag.appendETag([]byte("x"), f[0], f[1])
		if want := AppendETag([]byte("x"), f[0], f[1]); string(got) != string(want) {
			t.Errorf("etag of %v: %s, want %s", f, got, want)
		}
	}
	var m memoTime
	for _, at := range []int64{0, 0, 1, 784111777, 784111777, 1} {
		if got, want := m.appendTime([]byte("x"), at), AppendHTTPTime([]byte("x"), at); string(got) != string(want) {
			t.Errorf("time %d: %s, want %s", at, got, want)
		}
	}
}
