package metrics

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"time"
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

// keepAlive sends one request at a time on a connection and reads its
// Content-Length response, without allocating.
type keepAlive struct {
	c   net.Conn
	buf []byte
}

func (k *keepAlive) roundTrip(tb testing.TB, req []byte) {
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
		if !bytes.HasPrefix(k.buf, []byte("HTTP/1.1 200")) {
			tb.Fatalf("response %q", k.buf[:end])
		}
		// The bodies of these tests are 3 bytes long.
		for have < end+4+3 {
			n, err := k.c.Read(k.buf[have:])
			if err != nil {
				tb.Fatal(err)
			}
			have += n
		}
		return
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
func dialWarm(tb testing.TB, addr string) *keepAlive {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	k := &keepAlive{c: c, buf: make([]byte, 16<<10)}
	for i := 0; i < 200; i++ {
		k.roundTrip(tb, benchRequest)
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
				k.roundTrip(b, benchRequest)
			}
		})
	}
}

// keepAliveUpstream is an upstream on a plain socket that answers every request
// head with "ok\n", allocation-free once running.
func keepAliveUpstream(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 16<<10)
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
						have = copy(buf, buf[end+4:have])
						if _, err := c.Write(resp); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRequestPathAllocs: with metrics on, a keep-alive request answered by return
// and one proxied to a keep-alive upstream (its figures counted too) allocate
// nothing.
func TestRequestPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	_, addr := startServerMain(t, "worker_processes 1;\n", `upstream app { server `+keepAliveUpstream(t)+`; keepalive 4; }
server { listen ADDR; keepalive_requests 1000000000; status_zone front;
  location = /metrics { metrics; }
  location /up/ { status_zone app; proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
  location / { return 200 "ok\n"; } }`)
	k := dialWarm(t, addr)
	proxied := []byte("GET /up/x HTTP/1.1\r\nHost: example.com\r\n\r\n")
	for i := 0; i < 200; i++ {
		k.roundTrip(t, proxied)
	}
	const n = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		k.roundTrip(t, benchRequest)
		k.roundTrip(t, proxied)
	}
	runtime.ReadMemStats(&after)
	// A few allocations of the runtime itself may land in the window.
	if got := after.Mallocs - before.Mallocs; got > n/50 {
		t.Fatalf("%d allocations for %d requests", got, 2*n)
	}
}
