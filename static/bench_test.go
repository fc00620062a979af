package static

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/internal/testport"
)

// serveFixture is a location with an open_file_cache and the requests the cached
// path serves.
type serveFixture struct {
	h   *Handler
	lc  *LocConf
	req Request
	r   Response
}

func newServeFixture(tb testing.TB, cached bool) *serveFixture {
	dir := tb.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte(strings.Repeat("x", 5000)), 0o644)
	cache := ""
	if cached {
		cache = "open_file_cache max=100;"
	}
	cfg := mustConf(tb, `http { server {
		location / { root `+dir+`; `+cache+` expires 1h; charset utf-8; etag on; }
	} }`)
	fx := &serveFixture{h: NewHandler(), lc: ConfOf(cfg.HTTP.Servers[0].Locations[0])}
	tb.Cleanup(fx.h.Close)
	fx.req = Request{Method: []byte("GET"), URI: []byte("/a.txt"), Now: time.Now().Unix(),
		Redirect: &RedirectBase{Host: []byte("example.org"), Port: 8080}}
	return fx
}

func (fx *serveFixture) serve() {
	fx.h.Serve(&fx.req, fx.lc, &fx.r)
	fx.r.File.Close()
}

var servedVariants = []struct {
	name   string
	set    func(r *Request)
	status int
}{
	{"200", func(r *Request) {}, 200},
	{"304", func(r *Request) { r.IfNoneMatch = []byte("*") }, 304},
	{"206", func(r *Request) { r.Range = []byte("bytes=100-199") }, 206},
	{"206multi", func(r *Request) { r.Range = []byte("bytes=0-9,100-199,-5") }, 206},
	{"416", func(r *Request) { r.Range = []byte("bytes=9000-") }, 416},
}

// The decision path for a file in the open_file_cache allocates nothing, whatever
// the conditionals and ranges say.
func TestServeCachedAllocs(t *testing.T) {
	for _, v := range servedVariants {
		fx := newServeFixture(t, true)
		v.set(&fx.req)
		fx.serve()
		fx.serve()
		if fx.r.Status != v.status {
			t.Fatalf("%s: status %d", v.name, fx.r.Status)
		}
		if n := testing.AllocsPerRun(100, fx.serve); n != 0 {
			t.Errorf("%s: %.1f allocations per request", v.name, n)
		}
	}
}

func BenchmarkServeCached(b *testing.B) {
	for _, v := range servedVariants {
		b.Run(v.name, func(b *testing.B) {
			fx := newServeFixture(b, true)
			v.set(&fx.req)
			fx.serve()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				fx.serve()
			}
		})
	}
}

// Without the cache each request opens, fstats and closes the file.
func BenchmarkServeUncached(b *testing.B) {
	fx := newServeFixture(b, false)
	fx.serve()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fx.serve()
	}
}

// BenchmarkLoopSmallFile is the bench's static-small shape in one process: a
// 100-byte file through a real loop and the HTTP core on a keep-alive connection
// (sendfile on, tcp_nopush on, no open_file_cache: open, fstat, pread, writev,
// close per request). cpu-µs/op is the process's CPU, the client's included.
func BenchmarkLoopSmallFile(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "small.html"), []byte(strings.Repeat("x", 100)), 0o644); err != nil {
		b.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(testport.Free(b))
	startWorker(b, addr, `server { listen `+addr+`; keepalive_requests 100000000;
		location /static/ { alias `+dir+`/; sendfile on; tcp_nopush on; } }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	req := []byte("GET /static/small.html HTTP/1.1\r\nHost: x\r\nUser-Agent: wrk\r\n\r\n")
	for range 100 {
		k.roundTrip(b, req)
	}
	b.ReportAllocs()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for range b.N {
		if st := k.roundTrip(b, req); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/op")
}
