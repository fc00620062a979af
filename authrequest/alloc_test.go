//go:build !race

package authrequest

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/numaproxy/numaproxy/access"
	"github.com/numaproxy/numaproxy/authbasic"
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/realip"
	"github.com/numaproxy/numaproxy/upstream"
)

// TestSteadyPathAllocs: a keep-alive request through realip, allow/deny, auth_basic
// ({PLAIN}), satisfy all, an auth_request subrequest proxied to a keep-alive SSO
// with auth_request_set, then proxied to the application, allocates nothing once
// pools and caches are warm. The race detector allocates, so this runs without it.
func TestSteadyPathAllocs(t *testing.T) {
	sso := looptest.Upstream(t, "HTTP/1.1 200 OK\r\nX-User: alice\r\nContent-Length: 2\r\n\r\nok")
	app := looptest.Upstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("ann:{PLAIN}secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := looptest.Addr(t)
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
	reg := conf.MustRegistry(upstream.Module, httpcore.Module, realip.Module, access.Module, authbasic.Module, Module, proxy.Module)
	cfg, _ := looptest.Load(t, reg, src)
	// Error lines are off: a denied request writes one (as nginx), which allocates.
	looptest.Start(t, cfg, slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1})), addr)

	k := looptest.Dial(t, addr)
	req := []byte("GET /page?x=1 HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 10.1.2.3\r\nAuthorization: Basic YW5uOnNlY3JldA==\r\n\r\n")
	denied := []byte("GET /page HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 192.0.2.1\r\n\r\n")
	for i := 0; i < 200; i++ {
		if st := k.RoundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
		if st := k.RoundTrip(t, denied); st != 403 {
			t.Fatalf("status %d", st)
		}
	}
	const n = 500
	got := looptest.Mallocs(n, func() {
		k.RoundTrip(t, req)
		k.RoundTrip(t, denied)
	})
	if got > n/50 {
		t.Fatalf("%d allocations for %d checked requests and %d denied ones", got, n, n)
	}
}
