package compress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/rewrite"
)

// observe runs in the header filter just below this module's, on the loop, with
// the state this module's filter left. Set it before the loop starts.
var observe func(r *httpcore.Request)

// observer is a module whose header filter sits below compress's (its Init runs
// first): what it sees of the request is what compress's filter made of it.
var observer = &conf.Module{Name: "compress_observer", Ctx: &httpcore.Hooks{Init: func(s *httpcore.Setup) error {
	s.AddHeaderFilter(func(next httpcore.HeaderFilter) httpcore.HeaderFilter {
		return func(r *httpcore.Request) {
			observe(r)
			next(r)
		}
	})
	return nil
}}}

// startIdle serves /gz/ compressed and /plain/ with compression off (gzip on in
// another location, as make bench's configuration) on a loop in this process.
func startIdle(tb testing.TB) net.Conn {
	tb.Helper()
	addr := looptest.Addr(tb)
	reg := conf.MustRegistry(httpcore.Module, rewrite.Module, observer, Module)
	cfg, _ := looptest.Load(tb, reg, `events {}
http {
  server {
    listen `+addr+`;
    location /gz/ { gzip on; gzip_types *; gzip_min_length 1; return 200 "compressed compressed compressed"; }
    location /plain/ { return 200 "plain"; }
  }
}`)
	looptest.Start(tb, cfg, nil, addr)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// TestIdleLocationUntouched: in a location where compression is off the filters
// are not in the chain (nginx's gzip filter returns at once under gzip off): no
// per-request state is made, and the state a compressed response left on the
// connection is neither reset nor taken for the next request's ($gzip_ratio).
func TestIdleLocationUntouched(t *testing.T) {
	defer func() { observe = nil }()
	const mark = -7 // a level no directive gives
	type seen struct {
		uri    string
		hasCtx bool
		mode   mode
		level  int
		ratio  string
	}
	seenc := make(chan seen, 8)
	observe = func(r *httpcore.Request) {
		s := seen{uri: string(r.URI())}
		if ctx, _ := r.Ctx(key).(*reqCtx); ctx != nil {
			s.hasCtx, s.mode, s.level = true, ctx.mode, ctx.level
			s.ratio = string(gzipRatio(nil, r, ""))
			if strings.HasPrefix(s.uri, "/plain/") {
				ctx.level = mark // left for the next response to find
			}
		}
		seenc <- s
	}
	c := startIdle(t)
	get := getter(t, c)

	if ce, body := get("/plain/a"); ce != "" || body != "plain" {
		t.Fatalf("/plain/a: Content-Encoding %q, body %q", ce, body)
	}
	if s := <-seenc; s.hasCtx {
		t.Errorf("%s: the compress filter made its per-request state in a location with compression off", s.uri)
	}
	if ce, _ := get("/gz/a"); ce != "gzip" {
		t.Fatalf("/gz/a: Content-Encoding %q, want gzip", ce)
	}
	if s := <-seenc; !s.hasCtx || s.mode != encoding {
		t.Fatalf("/gz/a: state %+v, want encoding", s)
	}
	// The compressed response's state stays as it was, but it is not the next
	// request's: its $gzip_ratio is empty.
	for _, uri := range []string{"/plain/b", "/plain/c"} {
		if ce, body := get(uri); ce != "" || body != "plain" {
			t.Fatalf("%s after /gz/a: Content-Encoding %q, body %q", uri, ce, body)
		}
		s := <-seenc
		if s.uri == "/plain/c" && s.level != mark || s.mode != encoding {
			t.Errorf("%s: level %d mode %d, want the mark %d and /gz/a's mode: the compress filter ran in a location with compression off", uri, s.level, s.mode, mark)
		}
		if s.ratio != "" {
			t.Errorf("%s: $gzip_ratio %q, /gz/a's", uri, s.ratio)
		}
	}
}

// getter sends GET uri with Accept-Encoding: gzip on c and returns the response's
// Content-Encoding and body.
func getter(tb testing.TB, c net.Conn) func(uri string) (string, string) {
	br := bufio.NewReader(c)
	return func(uri string) (string, string) {
		tb.Helper()
		if _, err := io.WriteString(c, "GET "+uri+" HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"); err != nil {
			tb.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			tb.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			tb.Fatal(err)
		}
		return resp.Header.Get("Content-Encoding"), string(b)
	}
}

// BenchmarkHeaderFilterIdle is the header filter for a response in a location
// with compression off (gzip on elsewhere), on a connection whose earlier
// response was compressed: run b.N times on the loop, inside a real request.
func BenchmarkHeaderFilterIdle(b *testing.B) {
	defer func() { observe = nil }()
	observe = func(r *httpcore.Request) {
		if string(r.URI()) != "/plain/bench" {
			return
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			headerFilter(r)
		}
		b.StopTimer()
	}
	c := startIdle(b)
	get := getter(b, c)
	get("/gz/a")
	get("/plain/a")
	if ce, body := get("/plain/bench"); ce != "" || body != "plain" {
		b.Fatalf("Content-Encoding %q, body %q", ce, body)
	}
}
