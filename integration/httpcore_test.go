package integration

import (
	"strings"
	"testing"
)

// TestInternalRedirectRunsServerRewrite: an error_page redirect to a URI serves the
// request again from the server rewrite phase, as nginx's ngx_http_internal_redirect
// does, so a server-level return answers the redirected request too (and, with
// recursive_error_pages off, gets the built-in page). Before the HTTP core ran
// phases, the redirect went straight to the location: "404 x reached", where nginx
// 1.22 answers its own 404 page (run side by side below).
func TestInternalRedirectRunsServerRewrite(t *testing.T) {
	conf := func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    return 404;
    error_page 404 /x;
    location /x { return 200 "x reached\n"; }
  }`
	}
	np, ng := addrFor(t), addrFor(t)
	startHTTP(t, conf(np), np)
	startNginx(t, conf(ng), ng)
	for _, a := range []string{np, ng} {
		raw, err := roundTripRaw(t, a, "GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(raw, "HTTP/1.1 404 ") || strings.Contains(raw, "x reached") || !strings.Contains(raw, "<center><h1>404 Not Found</h1></center>") {
			t.Errorf("%s answered %q", a, raw)
		}
	}
}

// TestChunkedResponseFramedAfresh: an upstream's chunked response reaches an
// HTTP/1.1 client as its data framed afresh by the core: the upstream's chunk
// extensions and trailer fields are not passed on, as nginx 1.22 does not (run side
// by side). Before, the proxy passed the upstream's chunked bytes through as they
// came, trailer included.
func TestChunkedResponseFramedAfresh(t *testing.T) {
	up := rawReply(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"+
		"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: secret\r\n\r\n", false)
	conf := func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location / { proxy_pass http://` + up.Addr + `; proxy_http_version 1.1; }
  }`
	}
	np, ng := addrFor(t), addrFor(t)
	startHTTP(t, conf(np), np)
	startNginx(t, conf(ng), ng)
	for _, a := range []string{np, ng} {
		raw, err := roundTripRaw(t, a, "GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		head, body, _ := strings.Cut(raw, "\r\n\r\n")
		if !strings.Contains(head, "Transfer-Encoding: chunked") || strings.Contains(body, "ext=") || strings.Contains(raw, "X-Trailer") ||
			!strings.HasSuffix(body, "0\r\n\r\n") || decodeChunks(body) != "hello world" {
			t.Errorf("%s answered %q", a, raw)
		}
	}
}

// decodeChunks returns the data of a chunked body (no extensions expected).
func decodeChunks(body string) string {
	var data strings.Builder
	for {
		line, rest, ok := strings.Cut(body, "\r\n")
		if !ok {
			return data.String()
		}
		var n int
		for _, c := range line {
			switch {
			case c >= '0' && c <= '9':
				n = n*16 + int(c-'0')
			case c >= 'a' && c <= 'f':
				n = n*16 + int(c-'a'+10)
			default:
				return data.String() + "<bad size " + line + ">"
			}
		}
		if n == 0 || len(rest) < n {
			return data.String()
		}
		data.WriteString(rest[:n])
		body = strings.TrimPrefix(rest[n:], "\r\n")
	}
}
