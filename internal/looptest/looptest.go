// Package looptest runs the HTTP core on one event loop inside a test process and
// drives it with keep-alive requests on real connections, so that a module's tests
// can count what its request path allocates without building the binary. The
// client and the upstreams here allocate nothing once running: what a window of
// requests allocates is the loop's.
//
// It imports httpcore, so httpcore's own tests cannot use it (an import cycle).
// For tests only.
package looptest

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/conftest"
	"github.com/numaproxy/numaproxy/internal/testport"
)

// Addr returns a free address on 127.0.0.1 for a server to listen on.
func Addr(tb testing.TB) string {
	tb.Helper()
	return "127.0.0.1:" + strconv.Itoa(testport.Free(tb))
}

// Load writes src to t.conf in a prefix of its own and loads it with reg; it
// returns the configuration and the prefix.
func Load(tb testing.TB, reg *conf.Registry, src string) (*conf.Config, string) {
	tb.Helper()
	cfg, dir, err := conftest.LoadDir(tb, reg, src)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, dir
}

// Start runs cfg's HTTP core on one loop (not pinned) listening on addr, until
// the test ends. log is the loop's and worker's logger; nil discards.
func Start(tb testing.TB, cfg *conf.Config, log *slog.Logger, addr string) *httpcore.Worker {
	tb.Helper()
	return start(tb, cfg, log, addr, false)
}

// StartHoldP is Start with the loop as numaproxy runs it: holding its P in
// epoll_wait (eventloop.Config.HoldP), which sets GOMAXPROCS.
func StartHoldP(tb testing.TB, cfg *conf.Config, log *slog.Logger, addr string) *httpcore.Worker {
	tb.Helper()
	return start(tb, cfg, log, addr, true)
}

func start(tb testing.TB, cfg *conf.Config, log *slog.Logger, addr string, holdP bool) *httpcore.Worker {
	tb.Helper()
	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := httpcore.NewWorker(snap, log, 0)
	l, err := eventloop.New(eventloop.Config{CPU: -1, Handler: w, Logger: log, HoldP: holdP})
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

// Upstream is a keep-alive upstream on a plain socket that answers every request
// head with response; it returns its address.
func Upstream(tb testing.TB, response string) string {
	return Serve(tb, "\r\n\r\n", response, nil)
}

// Serve is an upstream that answers every request, which ends at the first end
// after the previous one, with response; seen, if not nil, is called with each
// request's bytes (valid during the call only), from the connection's goroutine.
func Serve(tb testing.TB, end, response string, seen func(req []byte)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	resp, sep := []byte(response), []byte(end)
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
						i := bytes.Index(buf[:have], sep)
						if i < 0 {
							break
						}
						if seen != nil {
							seen(buf[:i+len(sep)])
						}
						have = copy(buf, buf[i+len(sep):have])
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

// RoundTrip sends req on c and reads one response with a Content-Length into
// buf; it returns the status and the body (valid until buf is used again). A
// response without Content-Length, or bytes after the response, fail the test.
func RoundTrip(tb testing.TB, c net.Conn, buf, req []byte) (int, []byte) {
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
		if have != end+4+length {
			tb.Fatalf("%d bytes after the response", have-end-4-length)
		}
		return int(buf[9]-'0')*100 + int(buf[10]-'0')*10 + int(buf[11]-'0'), buf[end+4 : end+4+length]
	}
}

// Conn is a keep-alive client connection with a 64 KiB buffer for responses.
type Conn struct {
	c    net.Conn
	buf  []byte
	body []byte
}

// Dial connects to addr; the connection is closed when the test ends.
func Dial(tb testing.TB, addr string) *Conn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return &Conn{c: c, buf: make([]byte, 64<<10)}
}

// RoundTrip sends req and reads its response (see the function RoundTrip); it
// returns the status.
func (k *Conn) RoundTrip(tb testing.TB, req []byte) int {
	st, body := RoundTrip(tb, k.c, k.buf, req)
	k.body = body
	return st
}

// Body is the last response's body, valid until the next RoundTrip.
func (k *Conn) Body() []byte { return k.body }

// Mallocs calls f n times and returns how many heap allocations the process made
// meanwhile: a few of the runtime's own may land in the window, so tests allow
// some.
func Mallocs(n int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// FewestMallocs is the fewest allocations of rounds windows of Mallocs(n, f):
// what a test's other goroutines (earlier tests' loops winding down, timers)
// allocate lands in some windows, what f allocates in every one.
func FewestMallocs(rounds, n int, f func()) uint64 {
	fewest := Mallocs(n, f)
	for range rounds - 1 {
		fewest = min(fewest, Mallocs(n, f))
	}
	return fewest
}
