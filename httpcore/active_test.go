package httpcore

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
)

var pickyKey = NewKey()

// pickyConf is the picky module's config at a level: picky on|off, inherited.
type pickyConf struct{ on, set bool }

// pickySeen is the picky module's request context: the request its rewrite
// handler ran for.
type pickySeen struct{ seq uint64 }

// picky is a test module active only where "picky on" holds (ActiveWhere): a
// rewrite handler, a header filter that adds X-Picky (and X-Picky-Rewrite when its
// handler ran for the request), a body filter that upper-cases, and a log handler
// that counts the requests it runs for.
var picky = &conf.Module{
	Name: "picky",
	Directives: []conf.Directive{{Name: "picky", Contexts: conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx, Args: conf.Flag,
		Set: func(c *conf.Cursor, s *conf.Stmt) error {
			pc := c.HTTPConf().(*pickyConf)
			pc.on, pc.set = s.Args[0].Value == "on", true
			return nil
		}}},
	NewHTTP: func() any { return &pickyConf{} },
	MergeHTTP: func(parent, child any) error {
		if c := child.(*pickyConf); !c.set {
			c.on = parent.(*pickyConf).on
		}
		return nil
	},
	Ctx: &Hooks{Key: pickyKey, Init: func(s *Setup) error {
		s.ActiveWhere(func(lc any) bool { return lc.(*pickyConf).on })
		s.AddHandler(RewritePhase, func(r *Request) Status {
			seen, _ := r.Ctx(pickyKey).(*pickySeen)
			if seen == nil {
				seen = &pickySeen{}
				r.SetCtx(pickyKey, seen)
			}
			seen.seq = r.Seq()
			return Declined
		})
		s.AddHeaderFilter(func(next HeaderFilter) HeaderFilter {
			return func(r *Request) {
				r.Header().Add([]byte("X-Picky"), []byte("1"))
				if seen, _ := r.Ctx(pickyKey).(*pickySeen); seen != nil && seen.seq == r.Seq() {
					r.Header().Add([]byte("X-Picky-Rewrite"), []byte("1"))
				}
				next(r)
			}
		})
		s.AddBodyFilter(func(next BodyFilter) BodyFilter {
			return func(r *Request, o *Out) {
				o.Data = bytes.ToUpper(o.Data)
				next(r, o)
			}
		})
		return s.AddHandler(LogPhase, func(r *Request) Status { pickyLogged++; return OK })
	}},
}

var pickyLogged int

// TestActiveWhere: a module's filters and location-phase handlers run only at the
// levels where its ActiveWhere holds, as the levels inherit it; its log handler
// runs for the requests that met them.
func TestActiveWhere(t *testing.T) {
	srv := serveWith(t, conf.MustRegistry(Module, picky), `
  picky on;
  server {
    listen ADDR;
    location /on/ { }
    location /off/ { picky off; }
    location /hop/ { error_page 404 /off/hop; }
    location /deep/ {
      picky off;
      location /deep/on/ { picky on; }
    }
  }`)
	for _, tc := range []struct {
		path string
		on   bool
	}{
		{"/on/a", true}, {"/off/a", false}, {"/on/b", true}, {"/deep/a", false}, {"/deep/on/a", true}, {"/off/b", false},
		{"/hop/a", false}, // met the module's handler, answered from /off/
	} {
		resp, body := srv.get(tc.path)
		picked := resp.Header.Get("X-Picky") == "1" && resp.Header.Get("X-Picky-Rewrite") == "1" && strings.Contains(body, "<HTML>")
		untouched := resp.Header.Get("X-Picky") == "" && resp.Header.Get("X-Picky-Rewrite") == "" && strings.Contains(body, "<html>")
		if resp.StatusCode != 404 || tc.on && !picked || !tc.on && !untouched {
			t.Errorf("%s: %d %v %q, want the module at work: %v", tc.path, resp.StatusCode, resp.Header, body, tc.on)
		}
	}
	ran := make(chan int)
	if err := srv.l.Run(func() { ran <- pickyLogged }); err != nil {
		t.Fatal(err)
	}
	if n := <-ran; n != 4 {
		t.Errorf("the log handler ran %d times for 4 requests that met the module (7 in all)", n)
	}
}

// served is a loop serving an http block, and one client connection to it.
type served struct {
	l  *eventloop.Loop
	c  net.Conn
	br *bufio.Reader
	t  *testing.T
}

// serveWith starts a loop on the http block's content (ADDR: its address) and
// connects to it.
func serveWith(t *testing.T, reg *conf.Registry, block string) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	snap, err := NewSnapshot(mustConfWith(t, reg, "events {}\nhttp {"+strings.ReplaceAll(block, "ADDR", addr)+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := NewWorker(snap, log, 0)
	l, err := eventloop.New(eventloop.Config{CPU: -1, Handler: w, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	w.SetLoop(l)
	lst, err := eventloop.ListenAddrPort(netip.MustParseAddrPort(addr), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddListener(lst); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Stop(); <-l.Done() })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &served{l: l, c: c, br: bufio.NewReader(c), t: t}
}

// get sends a GET of path on the connection and reads the response.
func (s *served) get(path string) (*http.Response, string) {
	s.t.Helper()
	io.WriteString(s.c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(s.br, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestSecondSnapshotKeepsLevels: a second snapshot of one configuration (a binary
// upgrade undone while the first one's loops finish) leaves the levels the first
// one set, which those loops read, and works with every module everywhere.
func TestSecondSnapshotKeepsLevels(t *testing.T) {
	cfg := mustConfWith(t, conf.MustRegistry(Module, picky), "events {}\nhttp { picky on; server { listen 127.0.0.1:1; location /off/ { picky off; } } }\n")
	first, err := NewSnapshot(cfg)
	if err != nil {
		t.Fatal(err)
	}
	off := LocationConf(cfg.HTTP.Servers[0].Locations[0])
	if off.mods == nil || off.mods.snap != first || off.mods.idle == 0 {
		t.Fatalf("first snapshot: /off/'s levels %+v, want picky idle there", off.mods)
	}
	levels := off.mods
	second, err := NewSnapshot(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if off.mods != levels {
		t.Fatal("the second snapshot replaced the levels the first one's loops read")
	}
	if second.all.idle != 0 {
		t.Fatalf("the second snapshot leaves modules out: %b", second.all.idle)
	}
}
