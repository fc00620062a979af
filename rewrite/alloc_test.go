package rewrite

import (
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/varmap"
)

// startWorker loads an http block body (with map) whose server listens on ADDR and
// serves it from a real loop until the test ends; it returns the address.
func startWorker(tb testing.TB, src string) string {
	tb.Helper()
	addr := looptest.Addr(tb)
	src = "events {}\nhttp {\n" + strings.ReplaceAll(src, "ADDR", addr) + "\n}\n"
	cfg, _ := looptest.Load(tb, conf.MustRegistry(httpcore.Module, Module, varmap.Module), src)
	looptest.Start(tb, cfg, nil, addr)
	return addr
}

// steadyConf has the directives whose steady path must not allocate: set with a
// constant, rewrites that do not match, if with = and a variable alone, a map of
// exact keys, and set and map values used by return's text.
const steadyConf = `
  map $arg_k $mapped { default none; one 1; two 2; }
  server {
    listen ADDR;
    keepalive_requests 1000000000;
    location / {
      set $a constant;
      set $b "";
      rewrite ^/old/(.*)$ /new/$1 last;
      rewrite ^/never$ /x;
      if ($arg_k = two) { set $b yes; }
      if ($b) { set $a changed; }
      return 200 "$a $b $mapped\n";
    }
  }`

// TestSteadyPathAllocs: a request through set, non-matching rewrites, ifs and a map
// allocates nothing once warm. The race detector allocates, so it is skipped under it.
func TestSteadyPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	k := looptest.Dial(t, startWorker(t, steadyConf))
	req := []byte("GET /path?k=two HTTP/1.1\r\nHost: h\r\n\r\n")
	for i := 0; i < 200; i++ {
		k.RoundTrip(t, req)
	}
	if st := k.RoundTrip(t, req); st != 200 || string(k.Body()) != "changed yes 2\n" {
		t.Fatalf("%d %q", st, k.Body())
	}
	const n = 1000
	got := looptest.Mallocs(n, func() {
		if st := k.RoundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
	})
	// A few allocations of the runtime itself may land in the window.
	if got > n/50 {
		t.Fatalf("%d allocations for %d requests", got, n)
	}
}

func benchRequest(b *testing.B, src, req string, want string) {
	k := looptest.Dial(b, startWorker(b, src))
	r := []byte(req)
	if k.RoundTrip(b, r); string(k.Body()) != want {
		b.Fatalf("body %q, want %q", k.Body(), want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k.RoundTrip(b, r)
	}
}

// BenchmarkSteady: set, non-matching rewrites, ifs and a map lookup.
func BenchmarkSteady(b *testing.B) {
	benchRequest(b, steadyConf, "GET /path?k=two HTTP/1.1\r\nHost: h\r\n\r\n", "changed yes 2\n")
}

// capturesConf has the regex captures of a request's steady path: a location ~
// with a named group, a rewrite with captures that fires, an if with a regex with
// groups, a map regex key with captures in its value, all used by return's text.
// Debian's nginx 1.22 answers "new abc bot-2" to capturesReq on it too (with "$1"
// before "$agent" in the text it gives the map's $1: its two passes over the text).
const capturesConf = `
  map $http_user_agent $agent { default other; ~*(?<bot>bot|spider)/(\d+) "$bot-$2"; }
  server {
    listen ADDR;
    keepalive_requests 1000000000;
    location ~ ^/(?<section>old|new)/ {
      rewrite ^/old/(.*)$ /new/$1 last;
      if ($uri ~ ^/new/(?<rest>.+)$) { return 200 "$section $rest $agent\n"; }
      return 404;
    }
  }`

const capturesReq = "GET /old/abc HTTP/1.1\r\nHost: h\r\nUser-Agent: Googlebot/2.1\r\n\r\n"

// TestCapturesAllocs: a request whose location, rewrite, if and map match regexes
// with groups allocates nothing once warm.
func TestCapturesAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	k := looptest.Dial(t, startWorker(t, capturesConf))
	req := []byte(capturesReq)
	for i := 0; i < 200; i++ {
		k.RoundTrip(t, req)
	}
	if st := k.RoundTrip(t, req); st != 200 || string(k.Body()) != "new abc bot-2\n" {
		t.Fatalf("%d %q", st, k.Body())
	}
	const n = 1000
	got := looptest.Mallocs(n, func() {
		if st := k.RoundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
	})
	if got > n/50 {
		t.Fatalf("%d allocations for %d requests", got, n)
	}
}

// BenchmarkCaptures: capturesConf's request.
func BenchmarkCaptures(b *testing.B) {
	benchRequest(b, capturesConf, capturesReq, "new abc bot-2\n")
}
