package integration

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAccessLogUpstreamHTTPLikeNginx: $upstream_http_*, $upstream_cookie_* and
// $upstream_status in the access log, and $upstream_http_* in add_header (logged as
// $sent_http_x_up), against nginx: a response whose body comes in a later read than
// its head, a retry after an upstream closed without answering and after a 502
// (proxy_next_upstream) and one whose every try failed, an intercepted 404
// (error_page to a return), a proxy_cache MISS then HIT, a pipelined keep-alive pair.
// (The fields were read from the upstream's read buffer, gone by the log phase:
// every $upstream_http_* was logged "-".)
func TestAccessLogUpstreamHTTPLikeNginx(t *testing.T) {
	answer := func(head string) func(c net.Conn) {
		return func(c net.Conn) {
			br := bufio.NewReader(c)
			for {
				if _, err := readHead(br); err != nil {
					return
				}
				io.WriteString(c, head+"Content-Length: 40\r\n\r\n")
				time.Sleep(50 * time.Millisecond) // the body comes in a later read
				io.WriteString(c, strings.Repeat("Z", 40))
			}
		}
	}
	slow := newRawUpstream(t, answer("HTTP/1.1 200 OK\r\nContent-Type: text/x-slow\r\nX-Cache: slow-1\r\nSet-Cookie: sid=abc; Path=/\r\n"))
	good := newRawUpstream(t, answer("HTTP/1.1 200 OK\r\nContent-Type: text/x-good\r\nX-Cache: good\r\n"))
	origin := newRawUpstream(t, answer("HTTP/1.1 200 OK\r\nContent-Type: text/x-origin\r\nX-Cache: origin\r\nCache-Control: max-age=600\r\n"))
	closes := newRawUpstream(t, func(c net.Conn) {
		readHead(bufio.NewReader(c))
		c.Close()
	})
	bad := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/x-bad\r\nX-Cache: bad\r\nContent-Length: 3\r\n\r\nbad")
		}
	})
	notFound := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Type: text/x-nf\r\nX-Cache: nf\r\nSet-Cookie: sid=gone\r\nContent-Length: 3\r\n\r\nnf\n")
		}
	})
	httpBody := `
  log_format up '$uri $status x=$upstream_http_x_cache ct=$upstream_http_content_type '
      'us=$upstream_status sid=$upstream_cookie_sid cs=$upstream_cache_status sent=$sent_http_x_up';
  proxy_cache_path cache keys_zone=z:1m;
  upstream closes { server ` + closes.Addr + `; server ` + good.Addr + ` backup; }
  upstream bad { server ` + bad.Addr + `; server ` + good.Addr + ` backup; }
  upstream allbad { server ` + closes.Addr + `; server ` + bad.Addr + ` backup; }
  server {
    listen %[1]s;
    access_log logs/up.log up;
    add_header X-Up $upstream_http_x_cache;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location /slow/ { proxy_pass http://` + slow.Addr + `; }
    location /closes/ { proxy_pass http://closes; }
    location /bad/ { proxy_pass http://bad; proxy_next_upstream error http_502; }
    location /cached/ { proxy_pass http://` + origin.Addr + `; proxy_cache z; }
    location /allbad/ { proxy_pass http://allbad; proxy_next_upstream error http_502; }
    location /down/ { proxy_pass http://` + closes.Addr + `; }
    location /icpt/ { proxy_pass http://` + notFound.Addr + `; proxy_intercept_errors on; error_page 404 /own; }
    location /own { return 200 "own\n"; }
  }`
	requests := []struct {
		raw string
		n   int
	}{
		{"GET /slow/a HTTP/1.1\r\nHost: t\r\n\r\n", 1},
		{"GET /closes/a HTTP/1.1\r\nHost: t\r\n\r\n", 1},
		{"GET /bad/a HTTP/1.1\r\nHost: t\r\n\r\n", 1},
		{"GET /cached/a HTTP/1.1\r\nHost: t\r\n\r\n", 1},
		{"GET /cached/a HTTP/1.1\r\nHost: t\r\n\r\n", 1},
		{"GET /allbad/a HTTP/1.1\r\nHost: t\r\n\r\n", 1},
		{"GET /down/a HTTP/1.1\r\nHost: t\r\n\r\n", 1},
		{"GET /icpt/a HTTP/1.1\r\nHost: t\r\n\r\n", 1},
		{"GET /slow/b HTTP/1.1\r\nHost: t\r\n\r\nGET /own HTTP/1.1\r\nHost: t\r\n\r\n", 2},
	}
	np, ng := addrFor(t), addrFor(t)
	in := startHTTP(t, strings.ReplaceAll(httpBody, "%[1]s", np), np)
	ngi := startNginx(t, strings.ReplaceAll(httpBody, "%[1]s", ng), ng)
	lines := 0
	for _, a := range []string{np, ng} {
		lines = 0
		for _, rq := range requests {
			sendCounting(t, a, rq.raw, rq.n)
			lines += rq.n
		}
	}
	a := readLines(t, in.path("logs/up.log"), lines)
	b := readLines(t, filepath.Join(ngi.dir, "logs", "up.log"), lines)
	if len(a) != len(b) {
		t.Fatalf("numaproxy %q\nnginx     %q", a, b)
	}
	for i := range a {
		t.Logf("numaproxy %s\nnginx     %s", a[i], b[i])
		if a[i] != b[i] {
			t.Errorf("line %d: numaproxy %q, nginx %q", i+1, a[i], b[i])
		}
	}
}

// TestAccessLogUpstreamHTTPRevalidatedLikeNginx: $upstream_http_* of a cached
// response revalidated with a 304 (proxy_cache_revalidate), as nginx logs it.
func TestAccessLogUpstreamHTTPRevalidatedLikeNginx(t *testing.T) {
	up := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			head, err := readHead(br)
			if err != nil {
				return
			}
			if strings.Contains(strings.ToLower(head), "if-modified-since:") {
				io.WriteString(c, "HTTP/1.1 304 Not Modified\r\nX-Cache: v304\r\nLast-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n")
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/x-v1\r\nX-Cache: v1\r\n"+
				"Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 3\r\n\r\nv1\n")
		}
	})
	httpBody := `
  log_format up '$uri $status x=$upstream_http_x_cache ct=$upstream_http_content_type us=$upstream_status cs=$upstream_cache_status';
  proxy_cache_path cache keys_zone=z:1m;
  server {
    listen %[1]s;
    access_log logs/up.log up;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / { proxy_pass http://` + up.Addr + `; proxy_cache z; proxy_cache_valid 200 1s; proxy_cache_revalidate on; }
  }`
	np, ng := addrFor(t), addrFor(t)
	in := startHTTP(t, strings.ReplaceAll(httpBody, "%[1]s", np), np)
	ngi := startNginx(t, strings.ReplaceAll(httpBody, "%[1]s", ng), ng)
	for _, a := range []string{np, ng} {
		sendCounting(t, a, "GET /r HTTP/1.1\r\nHost: t\r\n\r\n", 1)
	}
	time.Sleep(2100 * time.Millisecond) // the entry expires
	for _, a := range []string{np, ng} {
		sendCounting(t, a, "GET /r HTTP/1.1\r\nHost: t\r\n\r\n", 1)
	}
	a := readLines(t, in.path("logs/up.log"), 2)
	b := readLines(t, filepath.Join(ngi.dir, "logs", "up.log"), 2)
	for i := range b {
		t.Logf("numaproxy %s\nnginx     %s", a[i], b[i])
		if a[i] != b[i] {
			t.Errorf("line %d: numaproxy %q, nginx %q", i+1, a[i], b[i])
		}
	}
}
