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

// TestAccessLogSentHTTPAfterBodyRead: $sent_http_* of a proxied response whose body
// comes in a later read than its head: the log line has the head's fields, as
// nginx's. (The fields pointed into the upstream read buffer, which the body's read
// overwrote: "ct=- xr=-" was logged; with 40 body bytes, "ct=- xr=abcdefgh".)
func TestAccessLogSentHTTPAfterBodyRead(t *testing.T) {
	sentAfterBodyReadLikeNginx(t, "HTTP/1.1 200 OK\r\nContent-Type: text/x-review\r\nX-Review: abcdefgh\r\n",
		"'$status ct=$sent_http_content_type xr=$sent_http_x_review'", "")
}

// TestAccessLogSentHTTPRewrittenAfterBodyRead: $sent_http_* of the fields the proxy
// rewrites (Location and Refresh through proxy_redirect, Set-Cookie through
// proxy_cookie_path) when the body comes in a later read than the head: the log
// line has them, as nginx's. Their values were built in the head's own buffer but
// their names still lay in the upstream read buffer that the body's read
// overwrote, so "loc=- ref=- ck=-" was logged.
func TestAccessLogSentHTTPRewrittenAfterBodyRead(t *testing.T) {
	sentAfterBodyReadLikeNginx(t, "HTTP/1.1 302 Found\r\nLocation: http://upstream.test/away/there\r\n"+
		"Refresh: 5; url=http://upstream.test/away/later\r\nSet-Cookie: s=1; Path=/away/\r\n",
		"'$status loc=$sent_http_location ref=$sent_http_refresh ck=$sent_http_set_cookie'",
		"proxy_redirect http://upstream.test/away/ http://front.test/here/; proxy_cookie_path /away/ /here/;")
}

// sentAfterBodyReadLikeNginx proxies one response whose head (head, without its
// end) comes 50 ms before its 400-byte body, through a location with the extra
// directives, and compares the line logged with format by numaproxy and by nginx.
func sentAfterBodyReadLikeNginx(t *testing.T, head, format, directives string) {
	up := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			io.WriteString(c, head+"Content-Length: 400\r\n\r\n")
			time.Sleep(50 * time.Millisecond)
			io.WriteString(c, strings.Repeat("Z", 400))
		}
	})
	httpBody := `
  log_format sent ` + format + `;
  server {
    listen %[1]s;
    access_log logs/sent.log sent;
    location / {
      proxy_pass http://%[2]s; proxy_http_version 1.1; proxy_set_header Connection "";
      ` + directives + `
    }
  }`
	np, ng := addrFor(t), addrFor(t)
	in := startHTTP(t, strings.ReplaceAll(strings.ReplaceAll(httpBody, "%[1]s", np), "%[2]s", up.Addr), np)
	ngi := startNginx(t, strings.ReplaceAll(strings.ReplaceAll(httpBody, "%[1]s", ng), "%[2]s", up.Addr), ng)
	for _, a := range []string{np, ng} {
		sendCounting(t, a, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n", 1)
	}
	a := readLines(t, in.path("logs/sent.log"), 1)
	b := readLines(t, filepath.Join(ngi.dir, "logs", "sent.log"), 1)
	t.Logf("numaproxy %q\nnginx     %q", a, b)
	if a[0] != b[0] {
		t.Errorf("numaproxy %q, nginx %q", a[0], b[0])
	}
}
