package rewrite

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/varmap"
)

// startWorker loads an http block body (with map) whose server listens on addr and
// serves it from a real loop until the test ends.
func startWorker(tb testing.TB, src string) string {
	tb.Helper()
	l0, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l0.Addr().String()
	l0.Close()
	dir := tb.TempDir()
	file := filepath.Join(dir, "t.conf")
	body := "events {}\nhttp {\n" + bytes.NewBufferString(src).String() + "\n}\n"
	body = string(bytes.ReplaceAll([]byte(body), []byte("ADDR"), []byte(addr)))
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: conf.MustRegistry(httpcore.Module, Module, varmap.Module), Prefix: dir, File: file})
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
	return addr
}

// client is a keep-alive client that reads responses with a Content-Length.
type client struct {
	c   net.Conn
	buf []byte
}

func dialClient(tb testing.TB, addr string) *client {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return &client{c: c, buf: make([]byte, 64<<10)}
}

// roundTrip sends req and returns the response's status and body.
func (k *client) roundTrip(tb testing.TB, req []byte) (int, []byte) {
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
		return int(k.buf[9]-'0')*100 + int(k.buf[10]-'0')*10 + int(k.buf[11]-'0'), k.buf[end+4 : end+4+length]
	}
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
	k := dialClient(t, startWorker(t, steadyConf))
	req := []byte("GET /path?k=two HTTP/1.1\r\nHost: h\r\n\r\n")
	for i := 0; i < 200; i++ {
		k.roundTrip(t, req)
	}
	if st, body := k.roundTrip(t, req); st != 200 || string(body) != "changed yes 2\n" {
		t.Fatalf("%d %q", st, body)
	}
	const n = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		if st, _ := k.roundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	runtime.ReadMemStats(&after)
	// A few allocations of the runtime itself may land in the window.
	if got := after.Mallocs - before.Mallocs; got > n/50 {
		t.Fatalf("%d allocations for %d requests", got, n)
	}
}

func benchRequest(b *testing.B, src, req string, want string) {
	k := dialClient(b, startWorker(b, src))
	r := []byte(req)
	if _, body := k.roundTrip(b, r); string(body) != want {
		b.Fatalf("body %q, want %q", body, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k.roundTrip(b, r)
	}
}

// BenchmarkSteady: set, non-matching rewrites, ifs and a map lookup.
func BenchmarkSteady(b *testing.B) {
	benchRequest(b, steadyConf, "GET /path?k=two HTTP/1.1\r\nHost: h\r\n\r\n", "changed yes 2\n")
}

// BenchmarkCaptures: a rewrite with captures and a regex if with captures.
func BenchmarkCaptures(b *testing.B) {
	benchRequest(b, `
  server {
    listen ADDR;
    keepalive_requests 1000000000;
    location / {
      rewrite ^/old/(.*)$ /new/$1 last;
      if ($uri ~ ^/new/(?<rest>.+)$) { return 200 "$rest $1\n"; }
      return 404;
    }
  }`, "GET /old/abc HTTP/1.1\r\nHost: h\r\n\r\n", "abc abc\n")
}
