package metrics

import (
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/internal/looptest"
)

// BenchmarkCount is what the log phase adds to a request with metrics on: the
// loop's figures and two zones', plain stores on the loop's own memory.
func BenchmarkCount(b *testing.B) {
	front, app := &zone{name: "front", id: zoneID("front")}, &zone{name: "app", id: zoneID("app")}
	for _, bc := range []struct {
		name     string
		srv, loc *zone
	}{{"loop", nil, nil}, {"loop+2zones", front, app}} {
		b.Run(bc.name, func(b *testing.B) {
			st := newLoop(nil).(*loopState)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				st.count(200, 310, 540, time.Duration(i&0xffff)*time.Microsecond, bc.srv, bc.loc)
			}
		})
	}
}

// roundTrip sends req on k and fails the test unless the answer is a 200.
func roundTrip(tb testing.TB, k *looptest.Conn, req []byte) {
	if st := k.RoundTrip(tb, req); st != 200 {
		tb.Fatalf("status %d", st)
	}
}

// requestConfigs are the same server without and with metrics (a metrics location
// and zones at both levels, so that every request is counted three times).
var requestConfigs = []struct{ name, src string }{
	{"off", `server { listen ADDR; keepalive_requests 1000000000; location / { return 200 "ok\n"; } }`},
	{"on", `server { listen ADDR; keepalive_requests 1000000000; status_zone front;
  location = /metrics { metrics; }
  location / { status_zone app; return 200 "ok\n"; } }`},
}

// dialWarm connects to addr and sends a few requests (pools, caches, the date).
func dialWarm(tb testing.TB, addr string) *looptest.Conn {
	k := looptest.Dial(tb, addr)
	for i := 0; i < 200; i++ {
		roundTrip(tb, k, benchRequest)
	}
	return k
}

var benchRequest = []byte("GET /api/items?id=42 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\n\r\n")

// BenchmarkRequest is one keep-alive request through a real loop, with metrics off
// and on: the difference is the module's cost per request, lost in loopback's noise
// (BenchmarkCount measures it alone).
func BenchmarkRequest(b *testing.B) {
	for _, rc := range requestConfigs {
		b.Run(rc.name, func(b *testing.B) {
			_, addr := startServer(b, rc.src)
			k := dialWarm(b, addr)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				roundTrip(b, k, benchRequest)
			}
		})
	}
}

// TestRequestPathAllocs: with metrics on, a keep-alive request answered by return
// and one proxied to a keep-alive upstream (its figures counted too) allocate
// nothing.
func TestRequestPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	up := looptest.Upstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
	_, addr := startServerMain(t, "worker_processes 1;\n", `upstream app { server `+up+`; keepalive 4; }
server { listen ADDR; keepalive_requests 1000000000; status_zone front;
  location = /metrics { metrics; }
  location /up/ { status_zone app; proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
  location / { return 200 "ok\n"; } }`)
	k := dialWarm(t, addr)
	proxied := []byte("GET /up/x HTTP/1.1\r\nHost: example.com\r\n\r\n")
	for i := 0; i < 200; i++ {
		roundTrip(t, k, proxied)
	}
	const n = 500
	got := looptest.Mallocs(n, func() {
		roundTrip(t, k, benchRequest)
		roundTrip(t, k, proxied)
	})
	// A few allocations of the runtime itself may land in the window.
	if got > n/50 {
		t.Fatalf("%d allocations for %d requests", got, 2*n)
	}
}
