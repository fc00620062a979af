package accesslog

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/upstream"
)

// onLog, when set, runs in the log phase (after this module's handler) on the
// request the loop just served: a benchmark's way to the real request.
var onLog atomic.Pointer[func(r *httpcore.Request)]

var onLogModule = &conf.Module{Name: "test_on_log", Ctx: &httpcore.Hooks{Init: func(s *httpcore.Setup) error {
	return s.AddHandler(httpcore.LogPhase, func(r *httpcore.Request) httpcore.Status {
		if f := onLog.Load(); f != nil {
			(*f)(r)
		}
		return httpcore.OK
	})
}}}

// benchRequest is a browser's request: query, user agent, referer.
const benchRequest = "GET /api/items?id=42&page=3 HTTP/1.1\r\nHost: example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\n" +
	"Referer: https://example.com/start?q=1\r\nAccept: */*\r\n\r\n"

// BenchmarkFormatLine is the log phase handler (logHandler, as the loop calls it)
// run b.N times on one proxied request, filled as it ends, logged in one format to
// a file with buffer=64k: formatting the line and putting it in the loop's buffer,
// without the writer's work (full buffers go to /dev/null). combined-bare is
// combined for the request wrk sends (make bench's log shapes): no User-Agent,
// no Referer.
func BenchmarkFormatLine(b *testing.B) {
	for _, bc := range []struct{ name, format, req string }{
		{"combined", "combined", benchRequest},
		{"combined-bare", "combined", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"},
		{"json", "json", benchRequest},
		{"timing", "timing", benchRequest},
	} {
		format := bc.format
		b.Run(bc.name, func(b *testing.B) {
			up := looptest.Upstream(b, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
			addr := looptest.Addr(b)
			reg := conf.MustRegistry(upstream.Module, httpcore.Module, rewrite.Module, proxy.Module, Module, onLogModule)
			cfg, _ := looptest.Load(b, reg, `events {}
http {
  log_format json escape=json '{"a":"$remote_addr","r":"$request","s":$status,"b":$body_bytes_sent,"ua":"$http_user_agent","t":$request_time,"len":$request_length}';
  log_format timing '$time_iso8601 $msec $upstream_addr $upstream_status $upstream_connect_time $upstream_header_time $upstream_response_time $upstream_bytes_received $pipe';
  upstream app { server `+up+`; keepalive 8; }
  server {
    listen `+addr+`;
    keepalive_requests 1000000;
    location / {
      proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection "";
      access_log /dev/null `+format+` buffer=64k;
    }
  }
}
`)
			looptest.Start(b, cfg, nil, addr)
			k := looptest.Dial(b, addr)
			// A first request starts the loop's state; its log phase may end after
			// its response went out.
			warm := make(chan struct{}, 1)
			w := func(*httpcore.Request) {
				select {
				case warm <- struct{}{}:
				default:
				}
			}
			onLog.Store(&w)
			k.RoundTrip(b, []byte(bc.req))
			<-warm
			var line []byte
			var cpu time.Duration
			done := make(chan struct{})
			f := func(r *httpcore.Request) {
				defer close(done)
				start := threadCPU()
				b.ResetTimer()
				for range b.N {
					logHandler(r)
				}
				b.StopTimer()
				cpu = threadCPU() - start
				line = append(line[:0], lastLine(r.Worker().State(key).(*loopState))...)
			}
			onLog.Store(&f)
			b.ReportAllocs()
			if st := k.RoundTrip(b, []byte(bc.req)); st != 200 {
				b.Fatalf("status %d", st)
			}
			<-done
			onLog.Store(nil)
			// The loop's thread's CPU time: wall time counts what other processes
			// take of the CPU.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/line")
			if b.N == 1 {
				b.Logf("%q", line)
			}
		})
	}
}

// threadCPU is the CPU time of the calling thread (a loop's goroutine is locked to
// its thread).
func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// lastLine is the last line a loop put in a buffer of a file log.
func lastLine(ls *loopState) []byte {
	for _, p := range ls.pend {
		if p != nil && len(p.buf) > 0 {
			b := p.buf[:len(p.buf)-1]
			return p.buf[bytes.LastIndexByte(b, '\n')+1:]
		}
	}
	return nil
}
