//go:build !race

package limit

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/testport"
)

// startWorker runs one loop with the core and this module on the http block body
// src, whose server listens on addr.
func startWorker(tb testing.TB, addr, src string) {
	tb.Helper()
	cfg, err := loadConf(tb, "events {}\nhttp {\n"+src+"\n}\n")
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
	ln, err := eventloop.ListenAddrPort(netip.MustParseAddrPort(addr), 0)
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.AddListener(ln); err != nil {
		tb.Fatal(err)
	}
	if err := l.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		l.Stop()
		<-l.Done()
	})
}

// roundTrip sends req on c and reads one Content-Length response into buf; it
// returns the status.
func roundTrip(tb testing.TB, c net.Conn, buf, req []byte) int {
	if _, err := c.Write(req); err != nil {
		tb.Fatal(err)
	}
	have := 0
	for {
		n, err := c.Read(buf[have:])
		if err != nil {
			tb.Fatal(err)
		}
		have += n
		end := bytes.Index(buf[:have], []byte("\r\n\r\n"))
		if end < 0 {
			continue
		}
		cl := bytes.Index(buf[:end], []byte("Content-Length: "))
		if cl < 0 {
			tb.Fatalf("no Content-Length in %q", buf[:end])
		}
		i, length := cl+len("Content-Length: "), 0
		for ; buf[i] >= '0' && buf[i] <= '9'; i++ {
			length = length*10 + int(buf[i]-'0')
		}
		for have < end+4+length {
			n, err := c.Read(buf[have:])
			if err != nil {
				tb.Fatal(err)
			}
			have += n
		}
		return int(buf[9]-'0')*100 + int(buf[10]-'0')*10 + int(buf[11]-'0')
	}
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
	addr := "127.0.0.1:" + strconv.Itoa(testport.Free(t))
	startWorker(t, addr, limitedConf(addr))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	allocs := func(path string) uint64 {
		req := []byte("GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n")
		for i := 0; i < 200; i++ {
			roundTrip(t, c, buf, req)
		}
		const n = 1000
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 0; i < n; i++ {
			if st := roundTrip(t, c, buf, req); st != 404 {
				t.Fatalf("status %d", st)
			}
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
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
	addr := "127.0.0.1:" + strconv.Itoa(testport.Free(b))
	startWorker(b, addr, limitedConf(addr))
	for _, path := range []string{"/free", "/limited"} {
		b.Run(path[1:], func(b *testing.B) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 64<<10)
			req := []byte("GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n")
			b.ReportAllocs()
			cpu0 := cpuTime(unix.RUSAGE_SELF)
			for b.Loop() {
				roundTrip(b, c, buf, req)
			}
			// The process's CPU time (client and loop) per request: wall time on a
			// shared machine says little.
			b.ReportMetric(float64(cpuTime(unix.RUSAGE_SELF)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
