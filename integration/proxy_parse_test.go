package integration

import (
	"strings"
	"testing"
	"time"
)

// TestProxyParseStrictness sends malformed requests through a raw socket: each gets
// the status nginx would send, with Connection: close, the connection is then closed
// cleanly (EOF, not a reset), and nothing reaches the upstream.
func TestProxyParseStrictness(t *testing.T) {
	be := newBackend(t, nil)
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    location / { proxy_pass http://`+be.Addr+`; }
    location /v11 { proxy_pass http://`+be.Addr+`; proxy_http_version 1.1; }
  }`, addr)

	long := strings.Repeat("a", 9000)
	tests := []struct {
		name   string
		req    string
		status int
	}{
		{"content-length and chunked", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"chunked and content-length", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400},
		{"invalid content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5x\r\n\r\nhello", 400},
		{"negative content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400},
		{"repeated different content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400},
		{"content-length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\nhello!", 400},
		{"gzip coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"chunked not last", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400},
		{"chunked in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},
		{"control character in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\n\r\n", 400},
		{"control character in name", "GET / HTTP/1.1\r\nHost: a\r\nX\x02A: b\r\n\r\n", 400},
		{"bare LF line", "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", 400},
		{"no Host in HTTP/1.1", "GET / HTTP/1.1\r\nX: y\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"bad version", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		{"garbage request line", "GARBAGE\r\n\r\n", 400},
		{"over-long request line", "GET /" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		{"over-long header line", "GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + long + "\r\n\r\n", 400},
		{"head over 4x8k", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-L: "+strings.Repeat("b", 8000)+"\r\n", 5) + "\r\n", 400},
		{"bad chunk size", "POST /v11 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400},
		{"chunk without CRLF", "POST /v11 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", 400},
		{"CONNECT", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 405},
		{"TRACE", "TRACE / HTTP/1.1\r\nHost: a\r\n\r\n", 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := be.count()
			resp := wantClosedResponse(t, addr, tc.req, tc.status)
			if got := resp.Header.Get("Server"); !strings.HasPrefix(got, "numaproxy") {
				t.Errorf("Server %q", got)
			}
			if tc.name == "over-long header line" && !strings.Contains(bodyOf(resp), "Request Header Or Cookie Too Large") {
				t.Errorf("page %q lacks nginx's reason", bodyOf(resp))
			}
			if tc.name != "bad chunk size" && tc.name != "chunk without CRLF" && be.count() != before {
				t.Errorf("the upstream received the request: %+v", be.last(t))
			}
		})
	}
}

// TestProxyHeadTimeouts: a head that does not arrive within client_header_timeout
// gets no answer, the connection is closed (nginx 1.22 sends nothing either; its 408
// is only logged); an idle keep-alive connection is closed silently after
// keepalive_timeout; a connection that never sends anything is closed after
// client_header_timeout without a response.
func TestProxyHeadTimeouts(t *testing.T) {
	t.Parallel()
	addr := addrFor(t)
	startHTTP(t, `
  client_header_timeout 300ms;
  keepalive_timeout 400ms;
  server {
    listen `+addr+`;
    location / { return 200 "hi"; }
  }`, addr)

	t.Run("partial head", func(t *testing.T) {
		began := time.Now()
		raw, err := roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n")
		if err != nil || raw != "" {
			t.Fatalf("got %q, %v; want a silent close", raw, err)
		}
		if d := time.Since(began); d < 250*time.Millisecond || d > 3*time.Second {
			t.Errorf("closed after %v, want ~300ms", d)
		}
	})
	t.Run("nothing sent", func(t *testing.T) {
		raw, err := roundTripRaw(t, addr, "")
		if err != nil || raw != "" {
			t.Fatalf("got %q, %v; want a silent close", raw, err)
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t, addr)
		defer c.Close()
		began := time.Now()
		c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
		raw, err := readToEOF(c)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		resp := parseResponses(t, raw, "GET")[0]
		if resp.StatusCode != 200 || bodyOf(resp) != "hi" || resp.Close {
			t.Fatalf("%q", raw)
		}
		if d := time.Since(began); d < 350*time.Millisecond || d > 3*time.Second {
			t.Errorf("closed after %v, want ~400ms", d)
		}
	})
}
