package accesslog

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/upstream"
)

// startWorker runs one loop with the HTTP core, the proxy and this module on the
// http block body src, whose server listens on addr, in a prefix of its own; it
// returns the prefix.
func startWorker(tb testing.TB, addr, src string) string {
	tb.Helper()
	reg := conf.MustRegistry(upstream.Module, httpcore.Module, rewrite.Module, proxy.Module, Module)
	cfg, dir := looptest.Load(tb, reg, "events {}\nhttp {\n"+src+"\n}\n")
	looptest.Start(tb, cfg, nil, addr)
	return dir
}

// loggedHTTP logs every request four ways: combined unbuffered, a JSON format, the
// upstream timing variables with buffer=, and a condition.
func loggedHTTP(addr, up string) string {
	return `
  log_format json escape=json '{"a":"$remote_addr","r":"$request","s":$status,"b":$body_bytes_sent,"ua":"$http_user_agent","t":$request_time,"len":$request_length}';
  log_format timing '$time_iso8601 $msec $upstream_addr $upstream_status $upstream_connect_time $upstream_header_time $upstream_response_time $upstream_bytes_received $pipe';
  upstream app { server ` + up + `; keepalive 8; }
  server {
    listen ` + addr + `;
    keepalive_requests 1000000;
    access_log logs/access.log;
    access_log logs/json.log json;
    access_log logs/timing.log timing buffer=64k flush=1s;
    access_log logs/if.log combined if=$arg_id;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /r { return 200 "ok\n"; }
  }`
}

// testLoggedRequestAllocs: a proxied keep-alive request and a return, each written
// to four logs, allocate nothing on the steady path (the loop's formatting and
// hand-off, and the writer's writes). The race detector allocates: see
// alloc_norace_test.go.
func testLoggedRequestAllocs(t *testing.T) {
	up := looptest.Upstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
	addr := looptest.Addr(t)
	dir := startWorker(t, addr, loggedHTTP(addr, up))
	k := looptest.Dial(t, addr)
	proxied := []byte("GET /api/items?id=42 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t \"x\"\r\n\r\n")
	returned := []byte("GET /r HTTP/1.1\r\nHost: example.com\r\n\r\n")
	// Warm: the pool's free lists and the buffers out with the writer grow to
	// what the load needs.
	const warm = 2000
	for range warm {
		k.RoundTrip(t, proxied)
		k.RoundTrip(t, returned)
	}
	const n = 1000
	got := looptest.Mallocs(n, func() {
		if st := k.RoundTrip(t, proxied); st != 200 {
			t.Fatalf("status %d", st)
		}
		if st := k.RoundTrip(t, returned); st != 200 {
			t.Fatalf("status %d", st)
		}
	})
	t.Logf("%d allocations for %d logged proxied requests and %d returns", got, n, n)
	if got > n/50 {
		t.Fatalf("%d allocations for %d logged proxied requests and %d returns", got, n, n)
	}
	waitLines(t, filepath.Join(dir, "logs/access.log"), 2*(n+warm))
	// if=$arg_id: the proxied requests only (written after access.log's lines of
	// the same batch, so waited for too).
	waitLines(t, filepath.Join(dir, "logs/if.log"), n+warm)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func countLines(t *testing.T, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

func waitLines(t *testing.T, path string, n int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		got := strings.Count(string(data), "\n")
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			t.Fatalf("%s: %d lines, want %d", path, got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkLoggedRequest is a keep-alive request answered by the loop itself
// (return), logged in the combined format to a file, against the same request
// with access_log off: the difference is the log's cost on the loop (the writer
// works on another thread).
func BenchmarkLoggedRequest(b *testing.B) {
	for _, c := range []struct{ name, log string }{
		{"off", "access_log off;"},
		{"combined", "access_log logs/access.log;"},
		{"combined-buffer64k", "access_log logs/access.log combined buffer=64k;"},
	} {
		b.Run(c.name, func(b *testing.B) {
			addr := looptest.Addr(b)
			startWorker(b, addr, "server { listen "+addr+"; keepalive_requests 100000000; "+c.log+" location / { return 200 \"ok\\n\"; } }")
			k := looptest.Dial(b, addr)
			req := []byte("GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nReferer: http://example.com/\r\n\r\n")
			b.ReportAllocs()
			before := cpuTime()
			b.ResetTimer()
			for range b.N {
				k.RoundTrip(b, req)
			}
			b.StopTimer()
			// The process's CPU (client, loop and writer): the difference between the
			// variants is the log's cost, on the loop and on the writer.
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// TestLinesAcrossReopen: requests keep coming while the files are reopened (the
// loops flush, the writer syncs, the files are swapped); every line is written once
// and the counters add up. Run with -race, it checks the loop, the writer and Reopen
// against each other.
func TestLinesAcrossReopen(t *testing.T) {
	up := looptest.Upstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
	addr := looptest.Addr(t)
	dir := startWorker(t, addr, loggedHTTP(addr, up))
	k := looptest.Dial(t, addr)
	req := []byte("GET /api/x?id=1 HTTP/1.1\r\nHost: example.com\r\n\r\n")
	const n = 600
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			time.Sleep(20 * time.Millisecond)
			if err := Reopen(); err != nil {
				t.Error(err)
			}
		}
	}()
	for range n {
		if st := k.RoundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	<-done
	Flush()
	for _, name := range []string{"access.log", "json.log", "timing.log", "if.log"} {
		if got := countLines(t, filepath.Join(dir, "logs", name)); got != n {
			t.Errorf("%s: %d lines, want %d", name, got, n)
		}
	}
	for _, st := range DomainStats() {
		if st.Lines != st.Written+st.Dropped+st.Failed {
			t.Errorf("counters do not add up: %+v", st)
		}
	}
}
