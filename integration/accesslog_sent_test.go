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
	up := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/x-review\r\nX-Review: abcdefgh\r\nContent-Length: 400\r\n\r\n")
			time.Sleep(50 * time.Millisecond)
			io.WriteString(c, strings.Repeat("Z", 400))
		}
	})
	httpBody := `
  log_format sent '$status ct=$sent_http_content_type xr=$sent_http_x_review';
  server {
    listen %[1]s;
    access_log logs/sent.log sent;
    location / { proxy_pass http://%[2]s; proxy_http_version 1.1; proxy_set_header Connection ""; }
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
