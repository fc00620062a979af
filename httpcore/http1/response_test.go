package http1

import (
	"math/rand/v2"
	"testing"
)

type responseCase struct {
	name        string
	head        string
	body        string
	headRequest bool
	fail        bool // want a 502
	framing     BodyFraming
	keepAlive   bool
	check       func(t *testing.T, r *Response)
}

var responseCases = []responseCase{
	{name: "content-length", head: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", body: "hello", framing: BodyContentLength, keepAlive: true,
		check: func(t *testing.T, r *Response) {
			wantStr(t, "reason", r.Reason(), "OK")
			if r.StatusCode() != 200 || r.ContentLength() != 5 || r.ProtoMinor() != 1 {
				t.Error("facts")
			}
		}},
	{name: "chunked", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", body: "0\r\n\r\n", framing: BodyChunked, keepAlive: true},
	{name: "until close", head: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", body: "...", framing: BodyUntilClose},
	{name: "content-length zero", head: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", framing: BodyNone, keepAlive: true},
	{name: "no content", head: "HTTP/1.1 204 No Content\r\n\r\n", framing: BodyNone, keepAlive: true},
	{name: "not modified with length", head: "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", framing: BodyNone, keepAlive: true},
	{name: "head request", head: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", headRequest: true, framing: BodyNone, keepAlive: true},
	{name: "head request chunked", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", headRequest: true, framing: BodyNone, keepAlive: true},
	{name: "continue", head: "HTTP/1.1 100 Continue\r\n\r\n", body: "HTTP/1.1 200 OK\r\n", framing: BodyNone, keepAlive: true,
		check: func(t *testing.T, r *Response) {
			if !r.Interim() || r.SwitchingProtocols() {
				t.Error("100 is interim")
			}
		}},
	{name: "early hints", head: "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", framing: BodyNone, keepAlive: true},
	{name: "switching protocols", head: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", framing: BodyNone, keepAlive: true,
		check: func(t *testing.T, r *Response) {
			if r.Interim() || !r.SwitchingProtocols() {
				t.Error("101 is not interim")
			}
		}},
	{name: "no reason", head: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", framing: BodyNone, keepAlive: true,
		check: func(t *testing.T, r *Response) { wantStr(t, "reason", r.Reason(), "") }},
	{name: "empty reason", head: "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", framing: BodyNone, keepAlive: true},
	{name: "reason obs-text", head: "HTTP/1.1 200 \xc3\xa7a va\r\nContent-Length: 0\r\n\r\n", framing: BodyNone, keepAlive: true},
	{name: "http10 keep-alive", head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", framing: BodyContentLength, keepAlive: true},
	{name: "http10 default close", head: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", framing: BodyContentLength},
	{name: "close", head: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", framing: BodyContentLength},

	{name: "two digit status", head: "HTTP/1.1 20 OK\r\n\r\n", fail: true},
	{name: "four digit status", head: "HTTP/1.1 2000 OK\r\n\r\n", fail: true},
	{name: "status 600", head: "HTTP/1.1 600 X\r\n\r\n", fail: true},
	{name: "status 099", head: "HTTP/1.1 099 X\r\n\r\n", fail: true},
	{name: "http2", head: "HTTP/2 200 OK\r\n\r\n", fail: true},
	{name: "http2.0", head: "HTTP/2.0 200 OK\r\n\r\n", fail: true},
	{name: "icy", head: "ICY 200 OK\r\n\r\n", fail: true},
	{name: "no space after code", head: "HTTP/1.1 200OK\r\n\r\n", fail: true},
	{name: "two spaces", head: "HTTP/1.1  200 OK\r\n\r\n", fail: true},
	{name: "ctl in reason", head: "HTTP/1.1 200 O\x01K\r\n\r\n", fail: true},
	{name: "bare lf", head: "HTTP/1.1 200 OK\nContent-Length: 0\n\n", fail: true},
	{name: "obs-fold", head: "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", fail: true},
	{name: "space before colon", head: "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", fail: true},
	{name: "duplicate content-length", head: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", fail: true},
	{name: "bad content-length", head: "HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n\r\n", fail: true},
	{name: "cl and te", head: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", fail: true},
	{name: "te gzip", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", fail: true},
	{name: "te gzip chunked", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", fail: true},
	{name: "te http10", head: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", fail: true},
	{name: "bad cl on 204", head: "HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n", fail: true},
	{name: "leading empty line", head: "\r\nHTTP/1.1 200 OK\r\n\r\n", fail: true},
}

func TestResponseTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range responseCases {
		t.Run(tc.name, func(t *testing.T) {
			input := []byte(tc.head + tc.body)
			p, n, err := sameResult(t, func() parser { return &Response{HeadRequest: tc.headRequest} }, input, rng)
			if tc.fail {
				if statusOf(err) != 502 {
					t.Fatalf("got (%d, %v), want a 502", n, err)
				}
				return
			}
			if err != nil || n != len(tc.head) {
				t.Fatalf("got (%d, %v), want (%d, nil)", n, err, len(tc.head))
			}
			r := p.(*Response)
			if r.Framing() != tc.framing || r.KeepAlive() != tc.keepAlive {
				t.Errorf("framing %v keep-alive %v, want %v %v", r.Framing(), r.KeepAlive(), tc.framing, tc.keepAlive)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestResponseInterimThenFinal(t *testing.T) {
	in := []byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	var r Response
	n, err := r.Parse(in)
	if err != nil || !r.Interim() {
		t.Fatalf("interim: %d %v", n, err)
	}
	r.Reset()
	m, err := r.Parse(in[n:])
	if err != nil || r.StatusCode() != 200 || r.Framing() != BodyContentLength || string(in[n+m:]) != "ok" {
		t.Fatalf("final: %d %v %d", m, err, r.StatusCode())
	}
}
