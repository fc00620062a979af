//go:build !race

package authrequest

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

	"github.com/numaproxy/numaproxy/access"
	"github.com/numaproxy/numaproxy/authbasic"
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/realip"
	"github.com/numaproxy/numaproxy/upstream"
)

// TestSteadyPathAllocs: a keep-alive request through realip, allow/deny, auth_basic
// ({PLAIN}), satisfy all, an auth_request subrequest proxied to a keep-alive SSO
// with auth_request_set, then proxied to the application, allocates nothing once
// pools and caches are warm. The race detector allocates, so this runs without it.
func TestSteadyPathAllocs(t *testing.T) {
	sso := rawUpstream(t, "HTTP/1.1 200 OK\r\nX-User: alice\r\nContent-Length: 2\r\n\r\nok")
	app := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("ann:{PLAIN}secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	src := `events {}
http {
  upstream sso { server ` + sso + `; keepalive 4; }
  upstream app { server ` + app + `; keepalive 4; }
  server {
    listen ` + addr + `;
    keepalive_requests 100000;
    set_real_ip_from 127.0.0.1; real_ip_header X-Forwarded-For; real_ip_recursive on;
    location = /auth { internal; proxy_pass http://sso; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_pass_request_body off; proxy_set_header Content-Length ""; proxy_set_header X-Original-URI $request_uri; }
    location / {
      allow 10.0.0.0/8; deny all;
      auth_basic "r"; auth_basic_user_file ` + users + `;
      auth_request /auth; auth_request_set $user $upstream_http_x_user;
      proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_set_header X-User $user; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}`
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := conf.MustRegistry(upstream.Module, httpcore.Module, realip.Module, access.Module, authbasic.Module, Module, proxy.Module)
	cfg, err := conf.Load(conf.Options{Registry: reg, Prefix: dir, File: file})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Error lines are off: a denied request writes one (as nginx), which allocates.
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))
	w := httpcore.NewWorker(snap, log, 0)
	l, err := eventloop.New(eventloop.Config{CPU: -1, Handler: w, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	w.SetLoop(l)
	lis, err := eventloop.ListenAddrPort(netip.MustParseAddrPort(addr), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddListener(lis); err != nil {
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
	defer c.Close()
	buf := make([]byte, 64<<10)
	req := []byte("GET /page?x=1 HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 10.1.2.3\r\nAuthorization: Basic YW5uOnNlY3JldA==\r\n\r\n")
	denied := []byte("GET /page HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 192.0.2.1\r\n\r\n")
	for i := 0; i < 200; i++ {
		if st := roundTrip(t, c, buf, req); st != 200 {
			t.Fatalf("status %d", st)
		}
		if st := roundTrip(t, c, buf, denied); st != 403 {
			t.Fatalf("status %d", st)
		}
	}
	const n = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		roundTrip(t, c, buf, req)
		roundTrip(t, c, buf, denied)
	}
	runtime.ReadMemStats(&after)
	if got := after.Mallocs - before.Mallocs; got > n/50 {
		t.Fatalf("%d allocations for %d checked requests and %d denied ones", got, n, n)
	}
}

// roundTrip sends req and reads one Content-Length response; it returns the status.
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
		length := 0
		if cl := bytes.Index(buf[:end], []byte("Content-Length: ")); cl >= 0 {
			for i := cl + len("Content-Length: "); buf[i] >= '0' && buf[i] <= '9'; i++ {
				length = length*10 + int(buf[i]-'0')
			}
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

// rawUpstream is a keep-alive upstream that answers every request head with
// response, allocation-free once running.
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
