package proxy

import (
	"log/slog"
	"net"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
)

// rawUpstream is a keep-alive upstream on a plain socket that answers every request
// head with the same response, allocation-free once running.
func rawUpstream(tb testing.TB, response string) string {
	return looptest.Upstream(tb, response)
}

func freeBenchPort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startWorker loads src (an http block body with one server listening on addr),
// starts a loop with its worker and listener, and stops them at cleanup.
func startWorker(tb testing.TB, addr, src string) *httpcore.Worker {
	tb.Helper()
	var log *slog.Logger
	if testing.Verbose() {
		log = slog.Default()
	}
	return looptest.Start(tb, mustConf(tb, "events {}\nhttp {\n"+src+"\n}\n"), log, addr)
}

// keepAliveConn sends requests and reads Content-Length responses on one
// connection without allocating.
type keepAliveConn struct {
	c   net.Conn
	buf []byte
}

// roundTrip sends req and reads one response; it returns the status code.
func (k *keepAliveConn) roundTrip(tb testing.TB, req []byte) int {
	st, _ := looptest.RoundTrip(tb, k.c, k.buf, req)
	return st
}

// BenchmarkProxyRequest is one proxied keep-alive request through a real loop:
// client → worker → keep-alive upstream and back, all on loopback.
func BenchmarkProxyRequest(b *testing.B) {
	up := rawUpstream(b, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, world\n")
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(b))
	startWorker(b, addr, `
  upstream app { server `+up+`; keepalive 8; keepalive_requests 1000000000; }
  server {
    listen `+addr+`;
    keepalive_requests 1000000000;
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      add_header X-Upstream $upstream_addr;
    }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	req := []byte("GET /api/items?id=42 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	for i := 0; i < 100; i++ { // warm the pools, the idle cache and the date
		if st := k.roundTrip(b, req); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	user0, sys0 := rusage()
	for i := 0; i < b.N; i++ {
		if st := k.roundTrip(b, req); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
	// The process's CPU time (client, loop and upstream) per request: wall time on
	// a shared machine says little. The client and upstream parts are fixed, so a
	// change in the loop's code shows in user-ns/op.
	user1, sys1 := rusage()
	b.ReportMetric(float64(user1-user0)/float64(b.N), "user-ns/op")
	b.ReportMetric(float64(sys1-sys0)/float64(b.N), "sys-ns/op")
}

// rusage is the process's user and system CPU time so far, in ns.
func rusage() (user, sys int64) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano(), ru.Stime.Nano()
}

// BenchmarkReturn is one keep-alive request answered by return through a real loop.
func BenchmarkReturn(b *testing.B) {
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(b))
	startWorker(b, addr, `
  server {
    listen `+addr+`;
    keepalive_requests 1000000000;
    location / { return 200 "$request_method $uri $arg_id\n"; }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 64<<10)}
	req := []byte("GET /api/items?id=42 HTTP/1.1\r\nHost: example.com\r\n\r\n")
	for i := 0; i < 100; i++ {
		k.roundTrip(b, req)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st := k.roundTrip(b, req); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
}
