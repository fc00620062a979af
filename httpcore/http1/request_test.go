package http1

import (
	"math/rand/v2"
	"strings"
	"testing"
)

type requestCase struct {
	name   string
	head   string // the head; a body may follow
	body   string
	status int // 0: accepted
	reason string
	check  func(t *testing.T, r *Request)
	limits Limits
}

const browserHead = "GET /static/app.js?v=1234&lang=en HTTP/1.1\r\n" +
	"Host: www.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\n" +
	"Referer: https://www.example.com/index.html\r\n" +
	"Connection: keep-alive\r\n" +
	"Cookie: session=0123456789abcdef0123456789abcdef; theme=dark; consent=yes\r\n" +
	"Upgrade-Insecure-Requests: 1\r\n" +
	"Sec-Fetch-Dest: script\r\n" +
	"\r\n"

func wantStr(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if string(got) != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

var requestCases = []requestCase{
	{name: "browser", head: browserHead, check: func(t *testing.T, r *Request) {
		wantStr(t, "method", r.Method(), "GET")
		wantStr(t, "target", r.Target(), "/static/app.js?v=1234&lang=en")
		wantStr(t, "path", r.Path(), "/static/app.js")
		q, ok := r.Query()
		wantStr(t, "query", q, "v=1234&lang=en")
		wantStr(t, "host", r.Host(), "www.example.com")
		if !ok || r.Len() != 10 || r.ProtoMinor() != 1 || !r.KeepAlive() || r.Framing() != BodyNone ||
			r.ContentLength() != -1 || r.Upgrade() || r.ExpectContinue() || r.TargetForm() != OriginForm {
			t.Errorf("facts: len %d minor %d keepalive %v framing %v", r.Len(), r.ProtoMinor(), r.KeepAlive(), r.Framing())
		}
		v, _ := r.Get("cookie")
		wantStr(t, "cookie", v, "session=0123456789abcdef0123456789abcdef; theme=dark; consent=yes")
		wantStr(t, "name 1", r.Name(1), "User-Agent")
	}},
	{name: "http10 no host", head: "GET / HTTP/1.0\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.KeepAlive() || len(r.Host()) != 0 || r.ProtoMinor() != 0 {
			t.Error("HTTP/1.0 default must close and have no host")
		}
	}},
	{name: "http10 keep-alive", head: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", check: func(t *testing.T, r *Request) {
		if !r.KeepAlive() {
			t.Error("want keep-alive")
		}
	}},
	{name: "http11 close", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.KeepAlive() || !r.ConnectionClose() {
			t.Error("want close")
		}
	}},
	{name: "close wins over keep-alive", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: x, CLOSE\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.KeepAlive() {
			t.Error("want close")
		}
	}},
	{name: "content-length body", head: "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", body: "hello", check: func(t *testing.T, r *Request) {
		if r.ContentLength() != 5 || r.Framing() != BodyContentLength || r.Chunked() {
			t.Errorf("cl %d framing %v", r.ContentLength(), r.Framing())
		}
	}},
	{name: "content-length leading zeros", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.ContentLength() != 7 {
			t.Errorf("cl %d", r.ContentLength())
		}
	}},
	{name: "content-length zero", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.ContentLength() != 0 || r.Framing() != BodyNone {
			t.Errorf("cl %d framing %v", r.ContentLength(), r.Framing())
		}
	}},
	{name: "chunked", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", body: "0\r\n\r\n", check: func(t *testing.T, r *Request) {
		if !r.Chunked() || r.Framing() != BodyChunked || r.ContentLength() != -1 {
			t.Errorf("framing %v", r.Framing())
		}
	}},
	{name: "absolute form", head: "GET http://Example.com:8080/p/q?x=1 HTTP/1.1\r\nHost: other\r\n\r\n", check: func(t *testing.T, r *Request) {
		wantStr(t, "host", r.Host(), "Example.com:8080")
		wantStr(t, "path", r.Path(), "/p/q")
		q, _ := r.Query()
		wantStr(t, "query", q, "x=1")
		if r.TargetForm() != AbsoluteForm {
			t.Error("form")
		}
	}},
	{name: "absolute form no path", head: "GET HTTPS://h?q HTTP/1.1\r\nHost: h\r\n\r\n", check: func(t *testing.T, r *Request) {
		wantStr(t, "host", r.Host(), "h")
		wantStr(t, "path", r.Path(), "")
		q, ok := r.Query()
		wantStr(t, "query", q, "q")
		if !ok {
			t.Error("no query")
		}
	}},
	{name: "asterisk", head: "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", check: func(t *testing.T, r *Request) {
		wantStr(t, "target", r.Target(), "*")
		if r.TargetForm() != AsteriskForm || len(r.Path()) != 0 {
			t.Error("form")
		}
	}},
	{name: "websocket upgrade", head: "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n", check: func(t *testing.T, r *Request) {
		if !r.Upgrade() {
			t.Error("want upgrade")
		}
		for i := 0; i < r.Len(); i++ {
			if name := string(r.Name(i)); r.IsHopByHop(i) != (name != "Host") {
				t.Errorf("hop-by-hop %s = %v", name, r.IsHopByHop(i))
			}
		}
	}},
	{name: "upgrade without connection option", head: "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.Upgrade() {
			t.Error("upgrade needs Connection: upgrade")
		}
	}},
	{name: "connection-listed field is hop-by-hop", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: x-private\r\nX-Private: 1\r\nX-Public: 2\r\n\r\n", check: func(t *testing.T, r *Request) {
		if !r.IsHopByHop(2) || r.IsHopByHop(3) || r.IsHopByHop(0) {
			t.Error("hop-by-hop by Connection option")
		}
	}},
	{name: "expect 100-continue", head: "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n", check: func(t *testing.T, r *Request) {
		if !r.ExpectContinue() {
			t.Error("want expect")
		}
	}},
	{name: "expect ignored for http10", head: "PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.ExpectContinue() {
			t.Error("HTTP/1.0 expect must be ignored")
		}
	}},
	{name: "leading empty lines", head: "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", check: func(t *testing.T, r *Request) {
		wantStr(t, "method", r.Method(), "GET")
	}},
	{name: "value whitespace trimmed", head: "GET / HTTP/1.1\r\nHost:a\r\nX: \t a b \t\r\nY:\r\n\r\n", check: func(t *testing.T, r *Request) {
		wantStr(t, "x", r.Value(1), "a b")
		wantStr(t, "y", r.Value(2), "")
		wantStr(t, "host", r.Host(), "a")
	}},
	{name: "obs-text in value and target", head: "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n"},
	{name: "http/1.2 treated as 1.x", head: "GET / HTTP/1.2\r\nHost: a\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.ProtoMinor() != 2 || !r.KeepAlive() {
			t.Error("minor")
		}
	}},
	{name: "odd query bytes", head: "GET /a?b=%zz&c=|{}\"<> HTTP/1.1\r\nHost: a\r\n\r\n"},
	{name: "escaped path", head: "GET /a%20b/%2F HTTP/1.1\r\nHost: a\r\n\r\n"},
	{name: "asterisk with extension method", head: "M-SEARCH * HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "extension method origin", head: "PROPFIND /x HTTP/1.1\r\nHost: a\r\n\r\n"},
	{name: "ipv6 host", head: "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"},
	{name: "host with empty port", head: "GET / HTTP/1.1\r\nHost: a:\r\n\r\n"},
	{name: "tchar field name", head: "GET / HTTP/1.1\r\nHost: a\r\nX-!#$%&'*+-.^_`|~: 1\r\n\r\n"},

	// Host (RFC 9112 §3.2)
	{name: "missing host", head: "GET / HTTP/1.1\r\n\r\n", status: 400, reason: "HTTP/1.1 request without Host header"},
	{name: "duplicate host", head: "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", status: 400, reason: "duplicate Host header"},
	{name: "empty host", head: "GET / HTTP/1.1\r\nHost: \r\n\r\n", status: 400, reason: "invalid Host header"},
	{name: "host with space", head: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", status: 400},
	{name: "host with slash", head: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", status: 400},
	{name: "host with dot dot", head: "GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", status: 400},
	{name: "host only a dot", head: "GET / HTTP/1.1\r\nHost: .:80\r\n\r\n", status: 400},
	{name: "absolute form host only a dot", head: "GET http://./ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "host with trailing dot", head: "GET / HTTP/1.1\r\nHost: a.b.:80\r\n\r\n"},
	{name: "host port only", head: "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", status: 400},
	{name: "host bad port", head: "GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", status: 400},
	{name: "host userinfo", head: "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", status: 400},
	{name: "host bad literal", head: "GET / HTTP/1.1\r\nHost: [zz]\r\n\r\n", status: 400},

	// Content-Length and Transfer-Encoding (RFC 9112 §6)
	{name: "cl and te", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400, reason: "Content-Length and Transfer-Encoding headers at the same time"},
	{name: "te and cl", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", status: 400},
	{name: "cl plus", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", status: 400, reason: "invalid Content-Length header"},
	{name: "cl negative", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", status: 400},
	{name: "cl list", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", status: 400},
	{name: "cl empty", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", status: 400},
	{name: "cl inner space", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", status: 400},
	{name: "cl hex", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", status: 400},
	{name: "cl overflow", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", status: 400},
	{name: "cl max", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n", check: func(t *testing.T, r *Request) {
		if r.ContentLength() != 1<<63-1 {
			t.Error("max int64")
		}
	}},
	{name: "cl max plus one", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", status: 400},
	// fasthttp and nginx refuse even identical duplicates, so we do too.
	{name: "cl duplicate same", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", status: 400, reason: "duplicate Content-Length header"},
	{name: "cl duplicate different", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", status: 400},
	{name: "te gzip chunked", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 501, reason: "unknown Transfer-Encoding"},
	{name: "te chunked gzip", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", status: 400, reason: "chunked is not the final transfer coding"},
	{name: "te identity", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", status: 501},
	{name: "te gzip", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", status: 501},
	{name: "te empty", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", status: 501},
	{name: "te trailing comma", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked ,\r\n\r\n", status: 400},
	{name: "te chunked twice", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", status: 400},
	{name: "te duplicate", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400, reason: "duplicate Transfer-Encoding header"},
	{name: "te http10", head: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400, reason: "HTTP/1.0 request with Transfer-Encoding header"},

	// Field lines (RFC 9112 §5, RFC 9110 §5.5)
	{name: "obs-fold", head: "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n", status: 400, reason: "obsolete line folding"},
	{name: "obs-fold tab", head: "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n", status: 400},
	{name: "space before first field", head: "GET / HTTP/1.1\r\n Host: a\r\n\r\n", status: 400},
	{name: "space before colon", head: "GET / HTTP/1.1\r\nHost: a\r\nX : b\r\n\r\n", status: 400, reason: "whitespace between field name and colon"},
	{name: "tab before colon", head: "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", status: 400},
	{name: "empty name", head: "GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", status: 400, reason: "empty field name"},
	{name: "no colon", head: "GET / HTTP/1.1\r\nHost: a\r\nX\r\n\r\n", status: 400, reason: "invalid character in field name"},
	{name: "bad name char", head: "GET / HTTP/1.1\r\nHost: a\r\nX(: b\r\n\r\n", status: 400},
	{name: "non-ascii name", head: "GET / HTTP/1.1\r\nHost: a\r\nX\xc3\xa9: b\r\n\r\n", status: 400},
	{name: "ctl in value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", status: 400, reason: "invalid character in field value"},
	{name: "del in value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n", status: 400},
	{name: "nul in value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", status: 400},
	{name: "bare cr in value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", status: 400},
	{name: "bare cr ends field", head: "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", status: 400},
	{name: "bare lf everywhere", head: "GET / HTTP/1.1\nHost: a\n\n", status: 400, reason: "line ends in bare LF"},
	{name: "bare lf field", head: "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", status: 400},
	{name: "bare lf end", head: "GET / HTTP/1.1\r\nHost: a\r\n\n", status: 400},
	{name: "lf cr", head: "GET / HTTP/1.1\r\nHost: a\r\n\n\r", status: 400},

	// Request line (RFC 9112 §3)
	{name: "double space", head: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "space before version", head: "GET /  HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "trailing space", head: "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", status: 400},
	{name: "tab separator", head: "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "leading space", head: " GET / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "method only", head: "GET\r\n\r\n", status: 400, reason: "invalid request line"},
	{name: "bad method", head: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400, reason: "invalid method"},
	{name: "relative target", head: "GET x HTTP/1.1\r\nHost: a\r\n\r\n", status: 400, reason: "invalid request target"},
	{name: "asterisk not options", head: "GET * HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "fragment", head: "GET /#f HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "ctl in target", head: "GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "del in target", head: "GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "bad escape", head: "GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "short escape", head: "GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "ftp scheme", head: "GET ftp://h/ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "absolute empty host", head: "GET http:///p HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "absolute userinfo", head: "GET http://u@h/ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "connect", head: "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", status: 405},
	{name: "connect origin form", head: "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "connect no port", head: "CONNECT a HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "trace", head: "TRACE / HTTP/1.1\r\nHost: a\r\n\r\n", status: 405, reason: "method not allowed"},
	{name: "authority form not connect", head: "GET a:80 HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},

	// Versions (RFC 9112 §2.3)
	{name: "http2", head: "GET / HTTP/2.0\r\nHost: a\r\n\r\n", status: 505, reason: "HTTP version not supported"},
	{name: "h2 preface", head: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", status: 505},
	{name: "http09 version", head: "GET / HTTP/0.9\r\n\r\n", status: 505},
	{name: "http09 simple", head: "GET /\r\n", status: 505},
	{name: "http3", head: "GET / HTTP/3\r\nHost: a\r\n\r\n", status: 505},
	{name: "http10.0", head: "GET / HTTP/10.0\r\nHost: a\r\n\r\n", status: 505},
	{name: "http1.10", head: "GET / HTTP/1.10\r\nHost: a\r\n\r\n", status: 400},
	{name: "http1.x", head: "GET / HTTP/1.x\r\nHost: a\r\n\r\n", status: 400, reason: "invalid HTTP version"},
	{name: "lowercase version", head: "GET / http/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "https version", head: "GET / HTTPS/1.1\r\nHost: a\r\n\r\n", status: 400},

	// Limits (nginx large_client_header_buffers)
	{name: "request line too long", head: "GET /" + strings.Repeat("a", 8200) + " HTTP/1.1\r\nHost: a\r\n\r\n", status: 414, reason: "Request-URI Too Large"},
	{name: "request line at limit", head: "GET /" + strings.Repeat("a", 8192-len("GET / HTTP/1.1\r\n")) + " HTTP/1.1\r\nHost: a\r\n\r\n"},
	{name: "request line one over", head: "GET /" + strings.Repeat("a", 8193-len("GET / HTTP/1.1\r\n")) + " HTTP/1.1\r\nHost: a\r\n\r\n", status: 414},
	{name: "field line too long", head: "GET / HTTP/1.1\r\nHost: a\r\nCookie: " + strings.Repeat("c", 8200) + "\r\n\r\n", status: 400, reason: "Request Header Or Cookie Too Large"},
	{name: "head too large", head: "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: "+strings.Repeat("v", 7000)+"\r\n", 5) + "\r\n", status: 400, reason: "Request Header Or Cookie Too Large"},
	{name: "100 fields", head: "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: v\r\n", 99) + "\r\n"},
	{name: "101 fields", head: "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: v\r\n", 100) + "\r\n", status: 400, reason: "too many header fields"},
	{name: "custom line limit", head: "GET /abcdefghij HTTP/1.1\r\nHost: a\r\n\r\n", status: 414, limits: Limits{MaxLineSize: 16}},
	{name: "custom field limit", head: "GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789abc\r\n\r\n", status: 400, limits: Limits{MaxLineSize: 16}},
	{name: "custom head limit", head: "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\nY: 2\r\n\r\n", status: 400, limits: Limits{MaxLineSize: 20, MaxHeadSize: 30}},
	{name: "custom field count", head: "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\r\n", status: 400, limits: Limits{MaxHeaders: 1}},
	{name: "too many leading empty lines", head: strings.Repeat("\r\n", 4100) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
}

func TestRequestTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range requestCases {
		t.Run(tc.name, func(t *testing.T) {
			input := []byte(tc.head + tc.body)
			p, n, err := sameResult(t, func() parser { return &Request{Limits: tc.limits} }, input, rng)
			if tc.status != 0 {
				if got := statusOf(err); got != tc.status {
					t.Fatalf("got (%d, %v), want status %d", n, err, tc.status)
				}
				if tc.reason != "" && err.(*ParseError).Reason != tc.reason {
					t.Errorf("reason %q, want %q", err.(*ParseError).Reason, tc.reason)
				}
				return
			}
			if err != nil || n != len(tc.head) {
				t.Fatalf("got (%d, %v), want (%d, nil)", n, err, len(tc.head))
			}
			r := p.(*Request)
			if !r.Done() {
				t.Error("not done")
			}
			if n2, err2 := r.Parse(input); n2 != n || err2 != nil {
				t.Errorf("Parse after done = (%d, %v)", n2, err2)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// Each proper prefix of a valid head needs more data, and never fails.
func TestRequestPrefixesNeedMore(t *testing.T) {
	head := []byte(browserHead)
	for i := 0; i < len(head); i++ {
		var r Request
		if n, err := r.Parse(head[:i]); n != 0 || err != ErrNeedMore {
			t.Fatalf("prefix %d: (%d, %v)", i, n, err)
		}
	}
}

func TestRequestReset(t *testing.T) {
	two := []byte("POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.0\r\n\r\n")
	var r Request
	n, err := r.Parse(two)
	if err != nil {
		t.Fatal(err)
	}
	body := NewLengthBody(r.ContentLength())
	rest := two[n:]
	rest = rest[len(body.Take(rest)):]
	if !body.Done() || body.Remaining() != 0 {
		t.Fatal("body not done")
	}
	r.Reset()
	if _, err := r.Parse(rest); err != nil {
		t.Fatal(err)
	}
	wantStr(t, "path", r.Path(), "/b")
	if r.Len() != 0 || r.KeepAlive() || r.ContentLength() != -1 {
		t.Error("state leaked across Reset")
	}
}

func TestLengthBody(t *testing.T) {
	b := NewLengthBody(5)
	if got := b.Take([]byte("abc")); string(got) != "abc" || b.Remaining() != 2 {
		t.Fatalf("take 1: %q %d", got, b.Remaining())
	}
	if got := b.Take([]byte("defgh")); string(got) != "de" || !b.Done() {
		t.Fatalf("take 2: %q %d", got, b.Remaining())
	}
	if got := b.Take([]byte("x")); len(got) != 0 {
		t.Fatal("took past the end")
	}
}

func TestValidIPv6(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"::", true}, {"::1", true}, {"1::", true}, {"1:2:3:4:5:6:7:8", true}, {"1:2:3:4:5:6:7::", true},
		{"::ffff:1.2.3.4", true}, {"1:2:3:4:5:6:1.2.3.4", true}, {"fe80::abcd", true}, {"ABCD::", true},
		{"", false}, {":", false}, {":::", false}, {"1::2::3", false}, {"1:2:3:4:5:6:7:8:9", false},
		{"1:2:3:4:5:6:7:8::", false}, {"12345::", false}, {"1:", false}, {":1", false}, {"1.2.3.4", false},
		{"::1.2.3.04", false}, {"::1.2.3.256", false}, {"::1.2.3", false}, {"::1.2.3.4.5", false}, {"g::", false},
		{"1:2:3:4:5:6:7:1.2.3.4", false}, {"::1.2.3.4:1", false},
	} {
		if got := validIPv6([]byte(tc.s)); got != tc.want {
			t.Errorf("validIPv6(%q) = %v", tc.s, got)
		}
	}
}
