//go:build !race

package limit

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/internal/looptest"
)

// startWorker runs one loop with the core and this module on the http block body
// src, whose server listens on addr.
func startWorker(tb testing.TB, addr, src string) {
	tb.Helper()
	cfg, err := loadConf(tb, "events {}\nhttp {\n"+src+"\n}\n")
	if err != nil {
		tb.Fatal(err)
	}
	looptest.Start(tb, cfg, nil, addr)
}

// limitedConf has a location with limit_req and limit_conn that never limit, and
// one without; the core answers both with its 404 after the preaccess phase.
func limitedConf(addr string) string {
	return `
  limit_req_zone $binary_remote_addr zone=big:64m rate=1000000r/s;
  limit_conn_zone $binary_remote_addr zone=conns:1m;
  server {
    listen ` + addr + `;
    keepalive_requests 1000000000;
    location /limited { limit_req zone=big burst=1000 nodelay; limit_conn conns 100; }
    location /free { }
  }`
}

// TestModuleSteadyPathAllocs: a keep-alive request through limit_req and
// limit_conn allocates no more than one without them once warm (the core's 404
// page, which both get, allocates on its own).
func TestModuleSteadyPathAllocs(t *testing.T) {
	addr := looptest.Addr(t)
	startWorker(t, addr, limitedConf(addr))
	k := looptest.Dial(t, addr)
	allocs := func(path string) uint64 {
		req := []byte("GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n")
		for i := 0; i < 200; i++ {
			k.RoundTrip(t, req)
		}
		return looptest.Mallocs(1000, func() {
			if st := k.RoundTrip(t, req); st != 404 {
				t.Fatalf("status %d", st)
			}
		})
	}
	free, limited := allocs("/free"), allocs("/limited")
	// A few allocations of the runtime itself may land in a window.
	if limited > free+20 {
		t.Fatalf("%d allocations for 1000 limited requests, %d without limits", limited, free)
	}
}

// BenchmarkModule is a keep-alive request through a real loop, with limit_req and
// limit_conn (every request accounted, none limited) and without: the difference
// is the module's cost on the request path.
func BenchmarkModule(b *testing.B) {
	addr := looptest.Addr(b)
	startWorker(b, addr, limitedConf(addr))
	for _, path := range []string{"/free", "/limited"} {
		b.Run(path[1:], func(b *testing.B) {
			k := looptest.Dial(b, addr)
			req := []byte("GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n")
			b.ReportAllocs()
			cpu0 := cpuTime(unix.RUSAGE_SELF)
			for b.Loop() {
				k.RoundTrip(b, req)
			}
			// The process's CPU time (client and loop) per request: wall time on a
			// shared machine says little.
			b.ReportMetric(float64(cpuTime(unix.RUSAGE_SELF)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
