package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// compressible is n bytes of HTML-like text that compresses well but not to nothing.
func compressible(n int) []byte {
	var b bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"<p>", "numaproxy", "nginx", "gzip", "</p>\n", "compression", "stream", "loop", "the", "a"}
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(rng.IntN(1000)))
	}
	return b.Bytes()[:n]
}

func gzipped(p []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(p)
	zw.Close()
	return b.Bytes()
}

// gzipUpstream answers as its query says: n body bytes, ct the Content-Type ("none":
// without), status, chunked=1 without a length, gz=1 the body gzip-encoded, and
// h=Name:Value fields.
func gzipUpstream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n := 1000
	if v := q.Get("n"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	body := compressible(n)
	switch ct := q.Get("ct"); ct {
	case "":
		w.Header().Set("Content-Type", "text/html")
	case "none":
		w.Header()["Content-Type"] = nil
	default:
		w.Header().Set("Content-Type", ct)
	}
	for _, h := range q["h"] {
		name, value, _ := strings.Cut(h, ":")
		w.Header().Add(name, value)
	}
	if q.Get("gz") == "1" {
		body = gzipped(body)
		w.Header().Set("Content-Encoding", "gzip")
	}
	status := 200
	if v := q.Get("status"); v != "" {
		status, _ = strconv.Atoi(v)
	}
	if q.Get("chunked") == "1" {
		w.WriteHeader(status)
		w.(http.Flusher).Flush()
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
	}
	if r.Method != "HEAD" {
		w.Write(body)
	}
}

// gzipConf is the http block both servers run in the differential tests.
func gzipConf(listen, up string) string {
	proxied := ""
	for _, f := range []string{"off", "any", "expired", "no-cache", "no-store", "private", "no_last_modified", "no_etag", "auth"} {
		proxied += fmt.Sprintf("    location /p/%s/ { proxy_pass http://%s; gzip on; gzip_proxied %s; gzip_vary on; }\n", f, up, f)
	}
	return fmt.Sprintf(`
  server {
    listen %s;
    location /g/ { proxy_pass http://%[2]s; gzip on; gzip_types text/plain application/json; gzip_min_length 100; gzip_vary on; gzip_comp_level 5; }
    location /all/ { proxy_pass http://%[2]s; gzip on; gzip_types *; }
    location /v10/ { proxy_pass http://%[2]s; gzip on; gzip_http_version 1.0; }
    location /dis/ { proxy_pass http://%[2]s; gzip on; gzip_disable "curl/7\." msie6; }
    location /gun/ { proxy_pass http://%[2]s; gunzip on; gzip_vary on; }
    location /gungz/ { proxy_pass http://%[2]s; gunzip on; gzip on; }
    location /err/ { gzip on; return 404; }
    location /ret/ { gzip on; gzip_types text/plain; return 200 "a text long enough to be compressed, a text long enough to be compressed"; }
%s  }
`, listen, up, proxied)
}

// gzipCase is one request of the differential table.
type gzipCase struct {
	path         string
	hdr          string // extra request fields, each ending in \r\n
	http10, head bool
}

// gzipSeen is what a client sees of a response, for comparison.
type gzipSeen struct {
	status                               int
	encoding, vary, etag, ranges, length string
	te                                   string
	closes                               bool
	body                                 string // decoded
}

func gzipExchange(t *testing.T, addr string, c gzipCase) gzipSeen {
	t.Helper()
	method, proto := "GET", "HTTP/1.1"
	if c.head {
		method = "HEAD"
	}
	if c.http10 {
		proto = "HTTP/1.0"
	}
	conn := "Connection: close\r\n"
	if strings.Contains(c.hdr, "Connection:") {
		conn = ""
	}
	req := method + " " + c.path + " " + proto + "\r\nHost: test\r\n" + conn + c.hdr + "\r\n"
	resp, body := rawExchange(t, addr, method, req)
	s := gzipSeen{status: resp.StatusCode, encoding: resp.Header.Get("Content-Encoding"),
		vary: sortedValues(resp.Header.Values("Vary")), etag: resp.Header.Get("ETag"),
		ranges: resp.Header.Get("Accept-Ranges"), length: resp.Header.Get("Content-Length"),
		te: strings.Join(resp.TransferEncoding, ","), closes: resp.Close, body: body}
	if s.encoding == "gzip" && !c.head {
		zr, err := gzip.NewReader(strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s %s: gzip body: %v", addr, c.path, err)
		}
		d, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s %s: gzip body: %v", addr, c.path, err)
		}
		s.body = string(d)
	}
	return s
}

// TestGzipLikeNginx runs numaproxy and nginx on the same gzip configuration and
// compares, request by request, what a client sees: which responses are compressed
// (types, min length, status, Accept-Encoding and its q-values, HTTP/1.0,
// gzip_proxied's flags, gzip_disable), Content-Encoding, Vary, ETag, Accept-Ranges,
// the framing, and the body once decompressed.
func TestGzipLikeNginx(t *testing.T) {
	up := newBackend(t, gzipUpstream)
	targets, _ := startBoth(t, func() string { return up.Addr }, gzipConf)
	ae := "Accept-Encoding: gzip\r\n"
	via := "Via: 1.1 cache\r\n"
	past := "h=Expires:Thu,+01+Jan+1998+00:00:00+GMT"
	future := "h=Expires:Thu,+01+Jan+2099+00:00:00+GMT"
	cases := []gzipCase{
		{path: "/g/?n=1000", hdr: ae},
		{path: "/g/?n=1000"},
		{path: "/g/?n=99", hdr: ae},
		{path: "/g/?n=100", hdr: ae},
		{path: "/g/?n=10&chunked=1", hdr: ae},
		{path: "/g/?n=0", hdr: ae},
		{path: "/g/?n=0&chunked=1", hdr: ae},
		{path: "/g/?n=1000&ct=image/png", hdr: ae},
		{path: "/g/?n=1000&ct=text/plain", hdr: ae},
		{path: "/g/?n=1000&ct=TEXT/Plain", hdr: ae},
		{path: "/g/?n=1000&ct=text/plain%3B+charset=utf-8", hdr: ae},
		{path: "/g/?n=1000&ct=text/plain%3B+foo=bar", hdr: ae},
		{path: "/g/?n=1000&ct=text/plain+%3Bcharset=utf-8", hdr: ae},
		{path: "/g/?n=1000&ct=application/json", hdr: ae},
		{path: "/g/?n=1000&ct=none", hdr: ae},
		{path: "/all/?n=1000&ct=none", hdr: ae},
		{path: "/all/?n=1000&ct=image/png", hdr: ae},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: deflate\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: gzip;q=0\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: gzip; q=0.000\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: gzip;q=0.5\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: gzip;q=1.5\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: deflate, GZIP\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: x-gzip\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: gzipx\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: *\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: br;q=1, gzip;q=0.1\r\n"},
		{path: "/g/?n=1000", hdr: "Accept-Encoding: gzip\r\nAccept-Encoding: identity\r\n"},
		{path: "/g/?n=1000&chunked=1", hdr: ae},
		{path: "/g/?n=300000&chunked=1", hdr: ae},
		{path: "/g/?n=1000&h=ETag:\"abc\"&h=Accept-Ranges:bytes", hdr: ae},
		{path: "/g/?n=1000&h=ETag:W/\"abc\"", hdr: ae},
		{path: "/g/?n=1000&h=ETag:abc", hdr: ae},
		{path: "/g/?n=1000&h=ETag:\"abc\"", hdr: "Accept-Encoding: br\r\n"},
		{path: "/g/?n=1000&h=Vary:Cookie", hdr: ae},
		{path: "/g/?n=1000&status=404", hdr: ae},
		{path: "/g/?n=1000&status=403", hdr: ae},
		{path: "/g/?n=1000&status=201", hdr: ae},
		{path: "/g/?n=1000&status=206&h=Content-Range:bytes+0-999/5000", hdr: ae + "Range: bytes=0-999\r\n"},
		{path: "/g/?n=1000&h=Accept-Ranges:bytes", hdr: ae + "Range: bytes=0-9\r\n"},
		{path: "/g/?n=1000&h=Accept-Ranges:bytes", hdr: "Range: bytes=0-9\r\n"},
		{path: "/g/?n=1000&status=500", hdr: ae},
		{path: "/g/?n=1000&status=204", hdr: ae},
		{path: "/g/?n=1000&status=304", hdr: ae},
		{path: "/g/?n=1000&gz=1", hdr: ae},
		{path: "/g/?n=1000", hdr: ae, head: true},
		{path: "/g/?n=1000", hdr: ae, http10: true},
		{path: "/v10/?n=1000", hdr: ae, http10: true},
		{path: "/v10/?n=1000&chunked=1", hdr: ae, http10: true},
		{path: "/v10/?n=1000", hdr: ae + "Connection: keep-alive\r\n", http10: true},
		{path: "/v10/?n=10", hdr: ae + "Connection: keep-alive\r\n", http10: true},
		{path: "/ret/", hdr: ae},
		{path: "/ret/", hdr: ae, head: true},
		{path: "/err/", hdr: ae},
		{path: "/dis/?n=1000", hdr: ae + "User-Agent: curl/7.88.1\r\n"},
		{path: "/dis/?n=1000", hdr: ae + "User-Agent: CURL/7.88.1\r\n"},
		{path: "/dis/?n=1000", hdr: ae + "User-Agent: curl/8.0\r\n"},
		{path: "/dis/?n=1000", hdr: ae + "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)\r\n"},
		{path: "/dis/?n=1000", hdr: ae + "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)\r\n"},
		{path: "/dis/?n=1000", hdr: ae + "User-Agent: Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)\r\n"},
		{path: "/dis/?n=1000", hdr: ae + "User-Agent: Opera/9 (compatible; MSIE 5.5; Windows 98)\r\n"},
		{path: "/gun/?n=1000&gz=1"},
		{path: "/gun/?n=1000&gz=1", hdr: ae},
		{path: "/gun/?n=1000&gz=1", hdr: ae + via},
		{path: "/gun/?n=1000&gz=1&chunked=1&h=ETag:\"e\"&h=Accept-Ranges:bytes"},
		{path: "/gun/?n=300000&gz=1&chunked=1"},
		{path: "/gun/?n=1000&gz=1&status=500"},
		{path: "/gun/?n=0&gz=1&chunked=1"},
		{path: "/gun/?n=1000&gz=1", head: true},
		{path: "/gun/?n=1000&gz=1", http10: true},
		{path: "/gun/?n=1000"},
		{path: "/gungz/?n=1000&gz=1"},
		{path: "/gungz/?n=1000&gz=1", hdr: ae},
		{path: "/gungz/?n=1000&gz=1", hdr: ae, http10: true},
	}
	for _, f := range []string{"off", "any", "expired", "no-cache", "no-store", "private", "no_last_modified", "no_etag", "auth"} {
		p := "/p/" + f + "/?n=1000"
		cases = append(cases,
			gzipCase{path: p, hdr: ae},
			gzipCase{path: p, hdr: ae + via},
			gzipCase{path: p, hdr: ae + via + "Authorization: Basic eDp5\r\n"},
			gzipCase{path: p + "&" + past, hdr: ae + via},
			gzipCase{path: p + "&" + future, hdr: ae + via},
			gzipCase{path: p + "&h=Expires:garbage", hdr: ae + via},
			gzipCase{path: p + "&h=Cache-Control:no-cache", hdr: ae + via},
			gzipCase{path: p + "&h=Cache-Control:max-age=0,+No-Store", hdr: ae + via},
			gzipCase{path: p + "&h=Cache-Control:public&h=Cache-Control:private", hdr: ae + via},
			gzipCase{path: p + "&h=Cache-Control:private=x", hdr: ae + via},
			gzipCase{path: p + "&h=Cache-Control:public", hdr: ae + via},
			gzipCase{path: p + "&h=Last-Modified:Thu,+01+Jan+1998+00:00:00+GMT", hdr: ae + via},
			gzipCase{path: p + "&h=ETag:\"x\"", hdr: ae + via},
		)
	}
	for _, c := range cases {
		var got [2]gzipSeen
		for i, tg := range targets {
			got[i] = gzipExchange(t, tg.addr, c)
		}
		np, ng := got[0], got[1]
		np.body, ng.body = norm(np.body), norm(ng.body)
		if np != ng {
			t.Errorf("%s %q http10=%v head=%v:\nnumaproxy %s\nnginx     %s", c.path, c.hdr, c.http10, c.head, brief(np), brief(ng))
		}
	}
	for _, tg := range targets {
		if tg.in != nil {
			tg.in.checkNoPanic()
		}
	}
}

func brief(s gzipSeen) string {
	b := s.body
	if len(b) > 40 {
		b = fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("status=%d ce=%q vary=%q etag=%q ranges=%q len=%q te=%q close=%v body=%s",
		s.status, s.encoding, s.vary, s.etag, s.ranges, s.length, s.te, s.closes, b)
}

// sortedValues joins a field's values in sorted order: numaproxy adds Vary:
// Accept-Encoding after the upstream's fields, nginx before them.
func sortedValues(v []string) string {
	v = slices.Clone(v)
	slices.Sort(v)
	return strings.Join(v, ",")
}

// TestBrotliZstdNegotiation: with gzip, brotli and zstd on, the coding with the
// highest q-value that is on for the response wins, ties going to br, then zstd,
// then gzip; each body decodes to what the upstream sent, small and large, with a
// length and chunked. nginx has no brotli or zstd here, so this one is numaproxy's
// alone.
func TestBrotliZstdNegotiation(t *testing.T) {
	up := newBackend(t, gzipUpstream)
	addr := addrFor(t)
	in := startHTTP(t, fmt.Sprintf(`
  server {
    listen %s;
    location / { proxy_pass http://%s; gzip on; brotli on; zstd on; gzip_vary on;
      brotli_types text/plain; zstd_min_length 2000; brotli_comp_level 4; zstd_comp_level 3; }
  }`, addr, up.Addr), addr)
	cases := []struct {
		path, ae, want string
	}{
		{"/?n=5000", "gzip, deflate, br, zstd", "br"},
		{"/?n=5000", "gzip, zstd", "zstd"},
		{"/?n=5000", "gzip;q=0.5, zstd", "zstd"},
		{"/?n=5000", "zstd;q=0.9, br;q=0.8, gzip;q=0.1", "zstd"},
		{"/?n=5000", "br;q=0, gzip", "gzip"},
		{"/?n=5000", "br;q=0.2, gzip;q=0.3", "gzip"},
		{"/?n=5000", "BR", "br"},
		{"/?n=5000", "*", ""},
		{"/?n=5000", "identity", ""},
		{"/?n=1000", "zstd", ""}, // below zstd_min_length
		{"/?n=1000", "zstd, gzip", "gzip"},
		{"/?n=5000&ct=text/plain", "br, zstd", "br"},
		{"/?n=5000&ct=application/json", "br, zstd", ""},
		{"/?n=400000&chunked=1", "br", "br"},
		{"/?n=400000&chunked=1", "zstd", "zstd"},
		{"/?n=400000&chunked=1", "gzip", "gzip"},
		{"/?n=0&chunked=1", "zstd", "zstd"},
		{"/?n=0&chunked=1", "br", "br"},
	}
	for _, c := range cases {
		req := "GET " + c.path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAccept-Encoding: " + c.ae + "\r\n\r\n"
		resp, body := rawExchange(t, addr, "GET", req)
		ce := resp.Header.Get("Content-Encoding")
		if ce != c.want {
			t.Errorf("%s %q: Content-Encoding %q, want %q", c.path, c.ae, ce, c.want)
			continue
		}
		var r io.Reader = strings.NewReader(body)
		switch ce {
		case "br":
			r = brotli.NewReader(r)
		case "zstd":
			zr, err := zstd.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			r = zr
		case "gzip":
			zr, err := gzip.NewReader(r)
			if err != nil {
				t.Fatalf("%s %q: %v", c.path, c.ae, err)
			}
			r = zr
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Errorf("%s %q: decoding %s: %v", c.path, c.ae, ce, err)
			continue
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(c.path, "&")[0], "/?n="))
		if !bytes.Equal(got, compressible(n)) {
			t.Errorf("%s %q: the %s body decodes to %d bytes unlike the upstream's %d", c.path, c.ae, ce, len(got), n)
		}
		if ce != "" && (resp.Header.Get("Content-Length") != "" || resp.Header.Get("Vary") != "Accept-Encoding") {
			t.Errorf("%s %q: Content-Length %q Vary %q", c.path, c.ae, resp.Header.Get("Content-Length"), resp.Header.Get("Vary"))
		}
	}
	in.checkNoPanic()
}

// TestGzipSlowClient: a client that stops reading a large compressed response holds
// back the upstream (the proxy does not compress the whole body ahead of it, its
// memory stays bounded) while the same loop goes on serving other clients; the
// slow client then gets the whole body, which decompresses to the upstream's.
func TestGzipSlowClient(t *testing.T) {
	const size = 48 << 20
	big := compressible(size)
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Type", "text/html")
			w.Write(big)
			return
		}
		gzipUpstream(w, r)
	})
	addr := addrFor(t)
	in := startHTTP(t, fmt.Sprintf(`
  server {
    listen %s;
    location / { proxy_pass http://%s; gzip on; gzip_comp_level 1; }
  }`, addr, up.Addr), addr)
	pid := in.cmd.Process.Pid
	base := vmRSS(t, pid)

	slow := newClient(t, addr)
	slow.send("GET /big HTTP/1.1\r\nHost: test\r\nAccept-Encoding: gzip\r\n\r\n")
	head := slow.head()
	if !strings.Contains(head, "Content-Encoding: gzip") || !strings.Contains(head, "Transfer-Encoding: chunked") {
		t.Fatalf("the large response is not compressed and chunked: %q", head)
	}
	// The slow client reads nothing for a while: the proxy fills the socket and its
	// queue, then stops reading the upstream. Meanwhile others are served at once.
	time.Sleep(500 * time.Millisecond)
	for i := range 20 {
		startAt := time.Now()
		resp, body := rawExchange(t, addr, "GET", "GET /g/?n=5000 HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n")
		if resp.Header.Get("Content-Encoding") != "gzip" || len(body) == 0 {
			t.Fatalf("request %d beside the slow client: %v %d bytes", i, resp.Header, len(body))
		}
		if d := time.Since(startAt); d > 3*time.Second {
			t.Fatalf("request %d took %v beside the slow client", i, d)
		}
	}
	peak := vmRSS(t, pid)
	t.Logf("RSS %d KiB before, %d KiB while a %d MiB response waits for its client", base>>10, peak>>10, size>>20)
	// Compressing the whole body ahead of the client would hold some 15 MiB.
	if peak-base > size/8 {
		t.Fatalf("RSS grew by %d KiB while the client did not read: the response is being compressed ahead of it", (peak-base)>>10)
	}
	// Now read it all, slowly at first.
	slow.c.SetReadDeadline(time.Now().Add(60 * time.Second))
	cr := httputilChunked(slow.br)
	zr, err := gzip.NewReader(cr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("reading the slow response: %v after %d bytes", err, len(got))
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("the slow response decompresses to %d bytes unlike the upstream's %d", len(got), len(big))
	}
	in.checkNoPanic()
}

// httputilChunked decodes a chunked body from br (the head already read).
func httputilChunked(br *bufio.Reader) io.Reader {
	return &chunkedReader{br: br}
}

// chunkedReader is a minimal chunked decoder for a body read after its head.
type chunkedReader struct {
	br   *bufio.Reader
	left int64
	done bool
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.EOF
	}
	if c.left == 0 {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("chunk size %q: %v", line, err)
		}
		if n == 0 {
			c.done = true
			c.br.ReadString('\n')
			return 0, io.EOF
		}
		c.left = n
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		_, err = c.br.Discard(2)
	}
	return n, err
}

// TestGzipKeepAliveSequence: responses on one connection, and pipelined, each get
// their own decision and encoder state: compressed, plain, gunzipped, brotli.
func TestGzipKeepAliveSequence(t *testing.T) {
	up := newBackend(t, gzipUpstream)
	addr := addrFor(t)
	in := startHTTP(t, fmt.Sprintf(`
  server {
    listen %s;
    location / { proxy_pass http://%s; gzip on; brotli on; gunzip on; }
  }`, addr, up.Addr), addr)
	want := string(compressible(3000))
	reqs := []struct{ path, ae, ce string }{
		{"/?n=3000&chunked=1", "gzip", "gzip"},
		{"/?n=3000", "", ""},
		{"/?n=3000&gz=1", "", ""},
		{"/?n=3000", "br", "br"},
		{"/?n=3000&gz=1&chunked=1", "br", ""},
		{"/?n=3000", "gzip", "gzip"},
	}
	cl := newClient(t, addr)
	for round := range 2 {
		var batch strings.Builder
		for _, r := range reqs {
			req := "GET " + r.path + " HTTP/1.1\r\nHost: test\r\n"
			if r.ae != "" {
				req += "Accept-Encoding: " + r.ae + "\r\n"
			}
			req += "\r\n"
			if round == 0 {
				cl.send(req) // one at a time
				checkSeq(t, cl, r.path, r.ae, r.ce, want)
			} else {
				batch.WriteString(req) // pipelined
			}
		}
		if round == 1 {
			cl.send(batch.String())
			for _, r := range reqs {
				checkSeq(t, cl, r.path, r.ae, r.ce, want)
			}
		}
	}
	in.checkNoPanic()
}

func checkSeq(t *testing.T, cl *client, path, ae, wantCE, want string) {
	t.Helper()
	resp, body := cl.read("GET")
	ce := resp.Header.Get("Content-Encoding")
	if ce != wantCE {
		t.Fatalf("%s (%q): Content-Encoding %q, want %q", path, ae, ce, wantCE)
	}
	var r io.Reader = strings.NewReader(body)
	switch ce {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case "br":
		r = brotli.NewReader(r)
	}
	got, err := io.ReadAll(r)
	if err != nil || string(got) != want {
		t.Fatalf("%s (%q): body of %d bytes unlike the upstream's (%v)", path, ae, len(got), err)
	}
}

// TestGunzipBrokenBody: an upstream body that is not the gzip its Content-Encoding
// says, or ends in the middle, is never passed off as a complete response: the
// connection closes (nginx does the same), the error is logged, nothing panics.
func TestGunzipBrokenBody(t *testing.T) {
	good := gzipped(compressible(200000))
	bodies := map[string][]byte{
		"/garbage":   []byte("this is not gzip at all, not even close"),
		"/truncated": good[:len(good)/2],
		"/corrupt":   append(append(append([]byte{}, good[:20]...), bytes.Repeat([]byte{0xff}, 64)...), good[84:]...),
	}
	newUp := func() *rawUpstream {
		return newRawUpstream(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			head, err := readHead(br)
			if err != nil {
				return
			}
			path := strings.Fields(head)[1]
			b := bodies[path]
			// The announced length is the whole of the good body: the truncated one
			// ends with the connection.
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", max(len(b), len(good)))
			c.Write(b)
		})
	}
	targets, _ := startBoth(t, newUp, func(listen string, up *rawUpstream) string {
		return fmt.Sprintf("server { listen %s; location / { proxy_pass http://%s; gunzip on; } }", listen, up.Addr)
	})
	for _, tg := range targets {
		for path := range bodies {
			raw, _ := roundTripRaw(t, tg.addr, "GET "+path+" HTTP/1.1\r\nHost: test\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
			}
			if err == nil {
				t.Errorf("%s %s: a complete response from a broken gzip body", tg.name, path)
			}
		}
		if tg.in != nil {
			tg.in.checkNoPanic()
			log, _ := os.ReadFile(tg.in.path("logs/error.log"))
			if !strings.Contains(string(log), "gunzip of the response failed") {
				t.Errorf("numaproxy logged no gunzip error:\n%s", log)
			}
		}
	}
}

// TestGzipRandomHeadersLikeNginx: random Accept-Encoding and User-Agent values built
// from the pieces nginx's parsers look at (gzip, q-values, separators, MSIE
// versions, SV1, Opera) get the same decision from numaproxy as from nginx.
func TestGzipRandomHeadersLikeNginx(t *testing.T) {
	up := newBackend(t, gzipUpstream)
	targets, _ := startBoth(t, func() string { return up.Addr }, func(listen, up string) string {
		return fmt.Sprintf("server { listen %s; location / { proxy_pass http://%s; gzip on; gzip_disable msie6; gzip_types text/plain; } }", listen, up)
	})
	rng := rand.New(rand.NewPCG(15, 1))
	aeParts := []string{"gzip", "GZIP", "gzip", "x-gzip", "deflate", "br", "*", ",", ", ", ";", " ", "q=", "Q=", "q", "=",
		"0", "1", "0.", "1.", "0.5", "0.0", "0.000", "1.000", "1.001", "0.0001", "5", "a", "identity", "gzipx", ";q=0", ";q=1"}
	uaParts := []string{"Mozilla/4.0 (compatible; ", "MSIE ", "6.0", "5.5", "4.01", "7.0", "6.", "; ", "SV1", "Windows NT 5.1", ")", "Opera", " "}
	pick := func(parts []string, n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		return b.String()
	}
	for i := range 300 {
		ae := pick(aeParts, 1+rng.IntN(6))
		ua := pick(uaParts, rng.IntN(7))
		hdr := "Accept-Encoding: " + ae + "\r\n"
		if ua != "" && i%2 == 0 {
			hdr += "User-Agent: " + strings.TrimSpace(ua) + "\r\n"
		}
		var got [2]string
		for j, tg := range targets {
			resp, _ := rawExchange(t, tg.addr, "GET", "GET /?n=500 HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"+hdr+"\r\n")
			got[j] = resp.Header.Get("Content-Encoding")
		}
		if got[0] != got[1] {
			t.Errorf("%q: numaproxy %q, nginx %q", hdr, got[0], got[1])
		}
	}
	// Content-Type values: nginx compares the type up to a ";" a charset follows.
	ctParts := []string{"text/html", "TEXT/Plain", "text/plain", ";", " ", "charset=utf-8", "CHARSET=x", "foo=bar", ",", "text/", "plain", "\t"}
	for range 300 {
		ct := strings.TrimSpace(pick(ctParts, 1+rng.IntN(5)))
		if ct == "" {
			continue
		}
		var got [2]string
		for j, tg := range targets {
			resp, _ := rawExchange(t, tg.addr, "GET", "GET /?n=500&ct="+url.QueryEscape(ct)+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n")
			got[j] = resp.Header.Get("Content-Encoding")
		}
		if got[0] != got[1] {
			t.Errorf("Content-Type %q: numaproxy %q, nginx %q", ct, got[0], got[1])
		}
	}
}

// TestGzipProxiedRandomLikeNginx: random gzip_proxied flag sets against random
// response headers (Expires, Cache-Control, Last-Modified, ETag) and requests with
// Via and maybe Authorization get nginx's decisions.
func TestGzipProxiedRandomLikeNginx(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 2))
	flags := []string{"off", "any", "expired", "no-cache", "no-store", "private", "no_last_modified", "no_etag", "auth"}
	var locs []string
	for i := range 12 {
		var set []string
		for range 1 + rng.IntN(3) {
			set = append(set, flags[2+rng.IntN(len(flags)-2)])
		}
		locs = append(locs, fmt.Sprintf("location /l%d/ { proxy_pass http://%%[1]s; gzip on; gzip_proxied %s; }", i, strings.Join(set, " ")))
	}
	up := newBackend(t, gzipUpstream)
	targets, _ := startBoth(t, func() string { return up.Addr }, func(listen, up string) string {
		return fmt.Sprintf("server { listen %s;\n", listen) + fmt.Sprintf(strings.Join(locs, "\n"), up) + "\n}"
	})
	ccTokens := []string{"no-cache", "No-Store", "private", "public", "max-age=0", "private=x", "no-cache ", " no-store", "no-cachex",
		"private;x", "x;no-cache", "no-store  ", "  private", "no-cache;", ""}
	for range 400 {
		q := fmt.Sprintf("/l%d/?n=500", rng.IntN(len(locs)))
		add := func(h string) { q += "&h=" + url.QueryEscape(h) }
		switch rng.IntN(5) {
		case 0:
			add("Expires:Thu, 01 Jan 1998 00:00:00 GMT")
		case 1:
			add("Expires:Thu, 01 Jan 2099 00:00:00 GMT")
		case 2:
			add("Expires:0")
		}
		for range rng.IntN(3) {
			var toks []string
			for range 1 + rng.IntN(3) {
				toks = append(toks, ccTokens[rng.IntN(len(ccTokens))])
			}
			add("Cache-Control:" + strings.Join(toks, ","))
		}
		if rng.IntN(2) == 0 {
			add("Last-Modified:Thu, 01 Jan 1998 00:00:00 GMT")
		}
		if rng.IntN(2) == 0 {
			add(`ETag:"e"`)
		}
		hdr := "Accept-Encoding: gzip\r\nVia: 1.1 x\r\n"
		if rng.IntN(3) == 0 {
			hdr += "Authorization: Basic eDp5\r\n"
		}
		var got [2]string
		for j, tg := range targets {
			resp, _ := rawExchange(t, tg.addr, "GET", "GET "+q+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"+hdr+"\r\n")
			got[j] = resp.Header.Get("Content-Encoding") + " " + resp.Header.Get("ETag")
		}
		if got[0] != got[1] {
			t.Errorf("%s %q: numaproxy %q, nginx %q", q, hdr, got[0], got[1])
		}
	}
}
