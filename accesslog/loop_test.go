package accesslog

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/upstream"
)

// startWorker runs one loop with the HTTP core, the proxy and this module on the
// http block body src, in a prefix of its own; it returns the prefix.
func startWorker(tb testing.TB, src string) string {
	tb.Helper()
	dir := tb.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte("events {}\nhttp {\n"+src+"\n}\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	reg := conf.MustRegistry(upstream.Module, httpcore.Module, rewrite.Module, proxy.Module, Module)
	cfg, err := conf.Load(conf.Options{Registry: reg, Prefix: dir, File: file})
	if err != nil {
		tb.Fatal(err)
	}
	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := httpcore.NewWorker(snap, log, 0)
	l, err := eventloop.New(eventloop.Config{CPU: -1, Handler: w, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	w.SetLoop(l)
	for _, a := range snap.Routes.Addrs() {
		ln, err := eventloop.ListenAddrPort(a.Addr, 0)
		if err != nil {
			tb.Fatal(err)
		}
		if err := l.AddListener(ln); err != nil {
			tb.Fatal(err)
		}
	}
	if err := l.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		l.Stop()
		<-l.Done()
	})
	return dir
}

func freePort(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// rawUpstream answers every request head on a connection with response.
func rawUpstream(tb testing.TB, response string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	resp := []byte(response)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				have := 0
				for {
					n, err := c.Read(buf[have:])
					if err != nil {
						return
					}
					have += n
					for {
						end := bytes.Index(buf[:have], []byte("\r\n\r\n"))
						if end < 0 {
							break
						}
						c.Write(resp)
						have = copy(buf, buf[end+4:have])
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// keepAliveConn sends requests and reads Content-Length responses on one
// connection without allocating.
type keepAliveConn struct {
	c   net.Conn
	buf []byte
}

func dialKeepAlive(tb testing.TB, addr string) *keepAliveConn {
	var c net.Conn
	var err error
	for range 50 {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
}

func (k *keepAliveConn) roundTrip(tb testing.TB, req []byte) int {
	if _, err := k.c.Write(req); err != nil {
		tb.Fatal(err)
	}
	have := 0
	for {
		n, err := k.c.Read(k.buf[have:])
		if err != nil {
			tb.Fatal(err)
		}
		have += n
		end := bytes.Index(k.buf[:have], []byte("\r\n\r\n"))
		if end < 0 {
			continue
		}
		cl := bytes.Index(k.buf[:end], []byte("Content-Length: "))
		if cl < 0 {
			tb.Fatalf("no Content-Length in %q", k.buf[:end])
		}
		i := cl + len("Content-Length: ")
		length := 0
		for ; k.buf[i] >= '0' && k.buf[i] <= '9'; i++ {
			length = length*10 + int(k.buf[i]-'0')
		}
		for have < end+4+length {
			n, err := k.c.Read(k.buf[have:])
			if err != nil {
				tb.Fatal(err)
			}
			have += n
		}
		return int(k.buf[9]-'0')*100 + int(k.buf[10]-'0')*10 + int(k.buf[11]-'0')
	}
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
	up := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
	addr := freePort(t)
	dir := startWorker(t, loggedHTTP(addr, up))
	k := dialKeepAlive(t, addr)
	proxied := []byte("GET /api/items?id=42 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t \"x\"\r\n\r\n")
	returned := []byte("GET /r HTTP/1.1\r\nHost: example.com\r\n\r\n")
	// Warm: the pool's free lists and the buffers out with the writer grow to
	// what the load needs.
	const warm = 2000
	for range warm {
		k.roundTrip(t, proxied)
		k.roundTrip(t, returned)
	}
	const n = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if st := k.roundTrip(t, proxied); st != 200 {
			t.Fatalf("status %d", st)
		}
		if st := k.roundTrip(t, returned); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	runtime.ReadMemStats(&after)
	got := after.Mallocs - before.Mallocs
	t.Logf("%d allocations for %d logged proxied requests and %d returns", got, n, n)
	if got > n/50 {
		t.Fatalf("%d allocations for %d logged proxied requests and %d returns", got, n, n)
	}
	waitLines(t, filepath.Join(dir, "logs/access.log"), 2*(n+warm))
	if got := countLines(t, filepath.Join(dir, "logs/if.log")); got != n+warm {
		t.Errorf("if=$arg_id: %d lines, want %d", got, n+warm)
	}
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
			addr := freePort(b)
			startWorker(b, "server { listen "+addr+"; keepalive_requests 100000000; "+c.log+" location / { return 200 \"ok\\n\"; } }")
			k := dialKeepAlive(b, addr)
			req := []byte("GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nReferer: http://example.com/\r\n\r\n")
			b.ReportAllocs()
			before := cpuTime()
			b.ResetTimer()
			for range b.N {
				k.roundTrip(b, req)
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
	up := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
	addr := freePort(t)
	dir := startWorker(t, loggedHTTP(addr, up))
	k := dialKeepAlive(t, addr)
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
		if st := k.roundTrip(t, req); st != 200 {
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
