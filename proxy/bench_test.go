package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
)

// rawUpstream is a keep-alive upstream on a plain socket that answers every request
// head with the same response, allocation-free once running.
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
	cfg := mustConf(tb, "events {}\nhttp {\n"+src+"\n}\n")
	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.Default()
	}
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
	return w
}

// keepAliveConn sends requests and reads Content-Length responses on one
// connection without allocating.
type keepAliveConn struct {
	c   net.Conn
	buf []byte
}

// roundTrip sends req and reads one response; it returns the status code.
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
		if have != end+4+length {
			tb.Fatalf("%d bytes after the response", have-end-4-length)
		}
		return int(k.buf[9]-'0')*100 + int(k.buf[10]-'0')*10 + int(k.buf[11]-'0')
	}
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
	for i := 0; i < b.N; i++ {
		if st := k.roundTrip(b, req); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
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
