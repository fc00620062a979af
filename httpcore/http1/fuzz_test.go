package http1

import (
	"bufio"
	"bytes"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"testing"

	"github.com/valyala/fasthttp"
)

// The fuzz targets check three things: the parser never panics; feeding an
// input in pieces gives what feeding it whole gives; and whatever we accept,
// net/http and fasthttp accept too, agreeing on where the head ends and how
// the body is framed. Where we refuse what they accept we are stricter by
// design; each divergence is noted where the parser makes the choice.

// oracleBufSize holds any head the default limits let through in one buffer,
// so the oracles see the whole input at once.
const oracleBufSize = 1 << 20

// fuzzCuts derives a deterministic cutting of an input from its bytes.
func fuzzCuts(data []byte) [][]int {
	h := fnv.New64a()
	h.Write(data)
	rng := rand.New(rand.NewPCG(h.Sum64(), 7))
	if len(data) > 4096 {
		return splits(len(data), rng)[2:]
	}
	return splits(len(data), rng)[1:]
}

// leadingEmptyLines counts the CRLFs we skip before a request line.
// Divergence: net/http refuses them; RFC 9112 §2.2 and nginx skip them.
func leadingEmptyLines(data []byte) int {
	i := 0
	for i+1 < len(data) && data[i] == '\r' && data[i+1] == '\n' {
		i += 2
	}
	return i
}

// requestFuzzSeeds probe corners where parsers are known to differ.
var requestFuzzSeeds = []string{
	"GET http://[::1]:80/ HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
	"GET http://[::1/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://[1:2]x/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://[fe80::1%25eth0]/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://a!$&'()*+,;=b/ HTTP/1.1\r\nHost: a!$&'()*+,;=b\r\n\r\n",
	"GET http://h:/ HTTP/1.1\r\nHost: h:\r\n\r\n",
	"GET http://h:99999999/ HTTP/1.1\r\nHost: h:99999999\r\n\r\n",
	"GET http://h%41/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET //x HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a:b HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a?%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /\\a^`{|}<>\" HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [1:2]x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: .a.\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
	"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: ,,keep-alive,,\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nCookie: \x80\xff\r\n\r\n",
	"get / HTTP/1.1\r\nHost: a\r\n\r\n",
	"OPTIONS http://a HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://[:]/ HTTP/1.1\r\nHost: [:]\r\n\r\n",
	"GET http://[1.2.3.4]/ HTTP/1.1\r\nHost: [1.2.3.4]\r\n\r\n",
	"GET http://[::ffff:1.2.3.4]:8/ HTTP/1.1\r\nHost: [...]\r\n\r\n",
	"GET http://[::ffff:1.2.3.4]:8/ HTTP/1.1\r\nHost: [1:2:3:4:5:6:7::]\r\n\r\n",
	"GET http://[1:2:3:4:5:6:7:8]/ HTTP/1.1\r\nHost: [1:2:3:4:5:6:1.2.3.4]\r\n\r\n",
	"GET http://[1::2::3]/ HTTP/1.1\r\nHost: [::]\r\n\r\n",
}

func FuzzRequestHead(f *testing.F) {
	for _, tc := range requestCases {
		if len(tc.head) < 1000 {
			f.Add([]byte(tc.head + tc.body))
		}
	}
	for _, s := range requestFuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Request
		n, err := r.Parse(data)
		for _, cuts := range fuzzCuts(data) {
			var r2 Request
			if n2, err2 := feed(&r2, data, cuts); n2 != n || err2 != err {
				t.Fatalf("fed in %d pieces: (%d, %v), whole: (%d, %v)", len(cuts)+1, n2, err2, n, err)
			}
		}
		if err != nil {
			if err != ErrNeedMore && !slices.Contains([]int{400, 405, 414, 501, 505}, statusOf(err)) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		checkRequestNetHTTP(t, &r, data, n)
		checkRequestFastHTTP(t, &r, data, n)
	})
}

func checkRequestNetHTTP(t *testing.T, r *Request, data []byte, n int) {
	skip := leadingEmptyLines(data)
	br := bufio.NewReaderSize(bytes.NewReader(data[skip:]), oracleBufSize)
	req, err := http.ReadRequest(br)
	if err != nil {
		t.Fatalf("we accept, net/http refuses: %v", err)
	}
	if got := len(data) - br.Buffered(); got != n {
		t.Fatalf("head length: ours %d, net/http %d", n, got)
	}
	if req.Method != string(r.Method()) || req.RequestURI != string(r.Target()) || req.Host != string(r.Host()) {
		t.Fatalf("request line: ours %q %q host %q, net/http %q %q host %q",
			r.Method(), r.Target(), r.Host(), req.Method, req.RequestURI, req.Host)
	}
	if req.ProtoMajor != 1 || req.ProtoMinor != r.ProtoMinor() {
		t.Fatalf("version: ours 1.%d, net/http %d.%d", r.ProtoMinor(), req.ProtoMajor, req.ProtoMinor)
	}
	chunked := slices.Equal(req.TransferEncoding, []string{"chunked"})
	switch r.Framing() {
	case BodyChunked:
		if !chunked || req.ContentLength != -1 {
			t.Fatalf("framing: ours chunked, net/http %q %d", req.TransferEncoding, req.ContentLength)
		}
	case BodyContentLength:
		if chunked || req.ContentLength != r.ContentLength() {
			t.Fatalf("framing: ours length %d, net/http %q %d", r.ContentLength(), req.TransferEncoding, req.ContentLength)
		}
	case BodyNone:
		if chunked || req.ContentLength != 0 {
			t.Fatalf("framing: ours none, net/http %q %d", req.TransferEncoding, req.ContentLength)
		}
	}
	if req.Close == r.KeepAlive() {
		t.Fatalf("keep-alive: ours %v, net/http close %v", r.KeepAlive(), req.Close)
	}
}

func checkRequestFastHTTP(t *testing.T, r *Request, data []byte, n int) {
	br := bufio.NewReaderSize(bytes.NewReader(data), oracleBufSize)
	var h fasthttp.RequestHeader
	if err := h.Read(br); err != nil {
		t.Fatalf("we accept, fasthttp refuses: %v", err)
	}
	if got := len(data) - br.Buffered(); got != n {
		t.Fatalf("head length: ours %d, fasthttp %d", n, got)
	}
	if string(h.Method()) != string(r.Method()) {
		t.Fatalf("method: ours %q, fasthttp %q", r.Method(), h.Method())
	}
	switch r.Framing() {
	case BodyChunked:
		if h.ContentLength() != -1 {
			t.Fatalf("framing: ours chunked, fasthttp length %d", h.ContentLength())
		}
	case BodyContentLength:
		if int64(h.ContentLength()) != r.ContentLength() {
			t.Fatalf("framing: ours length %d, fasthttp %d", r.ContentLength(), h.ContentLength())
		}
	case BodyNone:
		if h.ContentLength() > 0 || h.ContentLength() == -1 {
			t.Fatalf("framing: ours none, fasthttp length %d", h.ContentLength())
		}
	}
}

// responseFuzzSeeds probe framing corners of bodiless statuses.
var responseFuzzSeeds = []string{
	"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 101 Switching Protocols\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 00\r\n\r\n",
	"HTTP/1.1 599 x\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 199 x\r\n\r\n",
	"HTTP/1.9 200 OK\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nbody",
	"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nbody",
}

func FuzzResponseHead(f *testing.F) {
	for _, tc := range responseCases {
		f.Add([]byte(tc.head+tc.body), tc.headRequest)
	}
	for _, s := range responseFuzzSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, headRequest bool) {
		r := Response{HeadRequest: headRequest}
		n, err := r.Parse(data)
		for _, cuts := range fuzzCuts(data) {
			r2 := Response{HeadRequest: headRequest}
			if n2, err2 := feed(&r2, data, cuts); n2 != n || err2 != err {
				t.Fatalf("fed in %d pieces: (%d, %v), whole: (%d, %v)", len(cuts)+1, n2, err2, n, err)
			}
		}
		if err != nil {
			if err != ErrNeedMore && statusOf(err) != 502 {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		checkResponseNetHTTP(t, &r, data, n, headRequest)
		checkResponseFastHTTP(t, &r, data, n, headRequest)
	})
}

func checkResponseNetHTTP(t *testing.T, r *Response, data []byte, n int, headRequest bool) {
	method := http.MethodGet
	if headRequest {
		method = http.MethodHead
	}
	br := bufio.NewReaderSize(bytes.NewReader(data), oracleBufSize)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("we accept, net/http refuses: %v", err)
	}
	if got := len(data) - br.Buffered(); got != n {
		t.Fatalf("head length: ours %d, net/http %d", n, got)
	}
	if resp.StatusCode != r.StatusCode() || resp.ProtoMinor != r.ProtoMinor() {
		t.Fatalf("status: ours %d 1.%d, net/http %d 1.%d", r.StatusCode(), r.ProtoMinor(), resp.StatusCode, resp.ProtoMinor)
	}
	chunked := slices.Equal(resp.TransferEncoding, []string{"chunked"})
	switch r.Framing() {
	case BodyChunked:
		if !chunked {
			t.Fatalf("framing: ours chunked, net/http %q %d", resp.TransferEncoding, resp.ContentLength)
		}
	case BodyContentLength:
		if chunked || resp.ContentLength != r.ContentLength() {
			t.Fatalf("framing: ours length %d, net/http %q %d", r.ContentLength(), resp.TransferEncoding, resp.ContentLength)
		}
	case BodyUntilClose:
		if chunked || resp.ContentLength != -1 || !resp.Close {
			t.Fatalf("framing: ours until close, net/http %q %d close %v", resp.TransferEncoding, resp.ContentLength, resp.Close)
		}
	case BodyNone:
		if body, _ := io.ReadAll(resp.Body); len(body) != 0 || len(data)-br.Buffered() != n {
			t.Fatalf("framing: ours none, net/http read a body %q", body)
		}
	}
	if r.Framing() != BodyNone && resp.Close == r.KeepAlive() {
		t.Fatalf("keep-alive: ours %v, net/http close %v", r.KeepAlive(), resp.Close)
	}
}

func checkResponseFastHTTP(t *testing.T, r *Response, data []byte, n int, headRequest bool) {
	if r.Interim() {
		// fasthttp reads past interim responses to the final one.
		return
	}
	br := bufio.NewReaderSize(bytes.NewReader(data), oracleBufSize)
	var h fasthttp.ResponseHeader
	if err := h.Read(br); err != nil {
		t.Fatalf("we accept, fasthttp refuses: %v", err)
	}
	if got := len(data) - br.Buffered(); got != n {
		t.Fatalf("head length: ours %d, fasthttp %d", n, got)
	}
	if h.StatusCode() != r.StatusCode() {
		t.Fatalf("status: ours %d, fasthttp %d", r.StatusCode(), h.StatusCode())
	}
	if headRequest {
		return // fasthttp's header does not know the request method
	}
	switch r.Framing() {
	case BodyChunked:
		if h.ContentLength() != -1 {
			t.Fatalf("framing: ours chunked, fasthttp length %d", h.ContentLength())
		}
	case BodyContentLength:
		if int64(h.ContentLength()) != r.ContentLength() {
			t.Fatalf("framing: ours length %d, fasthttp %d", r.ContentLength(), h.ContentLength())
		}
	case BodyUntilClose:
		if h.ContentLength() != -2 {
			t.Fatalf("framing: ours until close, fasthttp length %d", h.ContentLength())
		}
	}
}

const chunkedRequestHead = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

// chunkedFuzzSeeds probe trailers that some parsers refuse.
var chunkedFuzzSeeds = []string{
	"0\r\nContent-Length: 1\r\n\r\n",
	"0\r\nTransfer-Encoding: chunked\r\n\r\n",
	"0\r\nHost: a\r\n\r\n",
	"0\r\nTrailer: x\r\n\r\n",
	"0\r\nContent-Type: text/plain\r\n\r\n",
	"0\r\nAuthorization: x\r\n\r\n",
	"0\r\nX: \x80\r\n\r\n",
	"0\r\nX-Real-IPv6: 1\r\nContent-Lengthy: 1\r\n\r\n",
	"1;a=\"\x80\"\r\nx\r\n0\r\n\r\n",
}

func FuzzChunked(f *testing.F) {
	for _, tc := range chunkedCases {
		if len(tc.body) < 1000 {
			f.Add([]byte(tc.body))
		}
	}
	for _, s := range chunkedFuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d ChunkedDecoder
		decoded, used, err := decodeChunked(&d, data, nil)
		for _, cuts := range fuzzCuts(data) {
			var d2 ChunkedDecoder
			decoded2, used2, err2 := decodeChunked(&d2, data, cuts)
			if !bytes.Equal(decoded2, decoded) || used2 != used || err2 != err || d2.Done() != d.Done() {
				t.Fatalf("fed in %d pieces: (%q, %d, %v), whole: (%q, %d, %v)", len(cuts)+1, decoded2, used2, err2, decoded, used, err)
			}
		}
		if err != nil {
			if statusOf(err) != 400 {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !d.Done() {
			return
		}
		msg := append([]byte(chunkedRequestHead), data...)
		br := bufio.NewReaderSize(bytes.NewReader(msg), oracleBufSize)
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatalf("we accept, net/http refuses: %v", err)
		}
		if !bytes.Equal(body, decoded) {
			t.Fatalf("data: ours %q, net/http %q", decoded, body)
		}
		if got := len(msg) - br.Buffered() - len(chunkedRequestHead); got != used {
			t.Fatalf("body length: ours %d, net/http %d", used, got)
		}

		br = bufio.NewReaderSize(bytes.NewReader(msg), oracleBufSize)
		var freq fasthttp.Request
		if err := freq.Read(br); err != nil {
			t.Fatalf("we accept, fasthttp refuses: %v", err)
		}
		if !bytes.Equal(freq.Body(), decoded) {
			t.Fatalf("data: ours %q, fasthttp %q", decoded, freq.Body())
		}
		if got := len(msg) - br.Buffered() - len(chunkedRequestHead); got != used {
			t.Fatalf("body length: ours %d, fasthttp %d", used, got)
		}
	})
}

// FuzzIPv6Literal holds validIPv6 to net/netip, which net/url applies to an
// IP-literal host: the same verdict, except that netip also takes zones
// ("fe80::1%eth0") and bare IPv4, which an IP-literal cannot hold.
func FuzzIPv6Literal(f *testing.F) {
	for _, s := range []string{"::", "::1", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4", "1::2::3", "fe80::1%eth0", "1.2.3.4", "::1.2.3.04"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, err := netip.ParseAddr(s)
		want := err == nil && addr.Is6() && addr.Zone() == ""
		if got := validIPv6([]byte(s)); got != want {
			t.Fatalf("validIPv6(%q) = %v, netip: %v %v", s, got, addr, err)
		}
	})
}
