package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// framingBackend answers by path: /cl a Content-Length body, /chunked a chunked one,
// /head a Content-Length without body for HEAD, /204, /304,
// and anything else the request URI.
func framingBackend(t *testing.T) *backend {
	return newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cl":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		case "/chunked":
			io.WriteString(w, "part1,")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part2")
		case "/head":
			w.Header().Set("Content-Length", "1234")
			w.WriteHeader(200)
		case "/204":
			w.WriteHeader(204)
		case "/304":
			w.Header().Set("ETag", `"x"`)
			w.WriteHeader(304)
		default:
			io.WriteString(w, r.RequestURI)
		}
	})
}

// closeDelimited is a raw upstream answering each request with a body delimited by
// closing the connection.
func closeDelimited(t *testing.T, proto string) *rawUpstream {
	return newRawUpstream(t, func(c net.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, proto+" 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil ")
		io.WriteString(c, "close")
	})
}

func TestProxyFraming(t *testing.T) {
	be := framingBackend(t)
	raw10 := closeDelimited(t, "HTTP/1.0")
	raw11 := closeDelimited(t, "HTTP/1.1")
	addr := addrFor(t)
	startHTTP(t, `
  upstream be { server `+be.Addr+`; keepalive 4; }
  server {
    listen `+addr+`;
    client_max_body_size 10m;
    proxy_request_buffering off; # the body streams, framed afresh
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /raw10 { proxy_pass http://`+raw10.Addr+`; }
    location /raw11 { proxy_pass http://`+raw11.Addr+`; proxy_http_version 1.1; }
  }`, addr)

	t.Run("chunked upload with trailers dropped", func(t *testing.T) {
		cl := newClient(t, addr)
		cl.send("POST /up?x=1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n")
		// In pieces, splitting sizes, data and CRLFs.
		for _, p := range []string{"5\r", "\nhel", "lo\r\n", "6;ext=1\r\n, worl\r\n", "1\r\nd\r\n0\r\nX-Sum: 42\r\n", "\r\n"} {
			cl.send(p)
			time.Sleep(2 * time.Millisecond) // separate segments (not needed for correctness)
		}
		resp, body := cl.read("POST")
		if resp.StatusCode != 200 || body != "/up?x=1" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		s := be.last(t)
		// The body is framed afresh: the extension and the trailer field stay behind,
		// as nginx drops request trailers.
		if s.Body != "hello, world" || len(s.TE) != 1 || s.TE[0] != "chunked" || s.Trailer.Get("X-Sum") != "" || s.Proto != "HTTP/1.1" {
			t.Fatalf("upstream saw %+v", s)
		}
	})

	t.Run("large uploads", func(t *testing.T) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
		var chunked bytes.Buffer
		for rest := big; len(rest) > 0; {
			n := min(len(rest), 70000)
			fmt.Fprintf(&chunked, "%x\r\n%s\r\n", n, rest[:n])
			rest = rest[n:]
		}
		chunked.WriteString("0\r\n\r\n")
		cl := newClient(t, addr)
		go func() {
			cl.c.Write([]byte("POST /big1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"))
			cl.c.Write(chunked.Bytes())
			cl.c.Write([]byte("PUT /big2 HTTP/1.1\r\nHost: a\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n"))
			cl.c.Write(big)
		}()
		for _, m := range []string{"POST", "PUT"} {
			if resp, _ := cl.read(m); resp.StatusCode != 200 {
				t.Fatalf("%s: %d", m, resp.StatusCode)
			}
		}
		reqs := be.requests()
		for _, s := range reqs[len(reqs)-2:] {
			if s.Body != string(big) {
				t.Fatalf("%s %s: upstream got %d bytes, want %d", s.Method, s.URI, len(s.Body), len(big))
			}
		}
	})

	t.Run("response framings to HTTP/1.1", func(t *testing.T) {
		cl := newClient(t, addr)
		for _, tc := range []struct{ path, body, te, cl string }{
			{"/cl", "hello", "", "5"},
			{"/chunked", "part1,part2", "chunked", ""},
			{"/raw10", "until close", "chunked", ""},
			{"/raw11", "until close", "chunked", ""},
			{"/cl", "hello", "", "5"},
		} {
			cl.send("GET " + tc.path + " HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, body := cl.read("GET")
			if resp.StatusCode != 200 || body != tc.body || strings.Join(resp.TransferEncoding, ",") != tc.te ||
				resp.Header.Get("Content-Length") != tc.cl || resp.Close {
				t.Fatalf("%s: %d %q te=%v cl=%q close=%v", tc.path, resp.StatusCode, body, resp.TransferEncoding, resp.Header.Get("Content-Length"), resp.Close)
			}
		}
		cl.wantOpen()
	})

	t.Run("response framings to HTTP/1.0", func(t *testing.T) {
		for _, tc := range []struct{ path, body string }{
			{"/chunked", "part1,part2"},
			{"/raw10", "until close"},
		} {
			raw, err := roundTripRaw(t, addr, "GET "+tc.path+" HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			if err != nil {
				t.Fatalf("%s: %v", tc.path, err)
			}
			head, body, _ := strings.Cut(raw, "\r\n\r\n")
			if body != tc.body || strings.Contains(head, "Transfer-Encoding") || !strings.Contains(head, "Connection: close") {
				t.Fatalf("%s: %q", tc.path, raw)
			}
		}
	})

	t.Run("expect 100-continue", func(t *testing.T) {
		cl := newClient(t, addr)
		cl.send("POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
		if h := cl.head(); !strings.HasPrefix(h, "HTTP/1.1 100 Continue\r\n") {
			t.Fatalf("interim %q", h)
		}
		cl.send("body")
		resp, body := cl.read("POST")
		if resp.StatusCode != 200 || body != "/e" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		if s := be.last(t); s.Body != "body" || s.Header.Get("Expect") != "" {
			t.Fatalf("upstream saw %+v", s)
		}
		// HTTP/1.0 clients get no interim response.
		raw, err := roundTripRaw(t, addr, "POST /e10 HTTP/1.0\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nhi")
		if err != nil || !strings.HasPrefix(raw, "HTTP/1.1 200 OK\r\n") {
			t.Fatalf("%q %v", raw, err)
		}
	})

	t.Run("pipelining", func(t *testing.T) {
		cl := newClient(t, addr)
		cl.send("GET /p1 HTTP/1.1\r\nHost: a\r\n\r\n" +
			"POST /p2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc" +
			"GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n" +
			"HEAD /cl HTTP/1.1\r\nHost: a\r\n\r\n" +
			"GET /p5 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		want := []string{"/p1", "/p2", "part1,part2", "", "/p5"}
		for i, m := range []string{"GET", "POST", "GET", "HEAD", "GET"} {
			resp, body := cl.read(m)
			if resp.StatusCode != 200 || body != want[i] {
				t.Fatalf("response %d: %d %q, want %q", i+1, resp.StatusCode, body, want[i])
			}
		}
		cl.wantEOF()
	})

	t.Run("HTTP/1.0 keep-alive", func(t *testing.T) {
		cl := newClient(t, addr)
		for i := 0; i < 2; i++ {
			cl.send("GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			resp, body := cl.read("GET")
			if resp.StatusCode != 200 || body != "/k" || resp.Header.Get("Connection") != "keep-alive" || resp.ContentLength != 2 {
				t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
			}
		}
		cl.send("GET /k HTTP/1.0\r\n\r\n")
		if resp, _ := cl.read("GET"); !resp.Close {
			t.Fatal("HTTP/1.0 without keep-alive kept open")
		}
		cl.wantEOF()
	})

	t.Run("HEAD 204 304", func(t *testing.T) {
		cl := newClient(t, addr)
		cl.send("HEAD /head HTTP/1.1\r\nHost: a\r\n\r\n")
		h := cl.head()
		if !strings.Contains(h, "\r\nContent-Length: 1234\r\n") || strings.Contains(h, "Transfer-Encoding") {
			t.Fatalf("HEAD: %q", h)
		}
		for _, path := range []string{"/204", "/304"} {
			cl.send("GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n")
			h := cl.head()
			if !strings.HasPrefix(h, "HTTP/1.1 "+path[1:]+" ") || strings.Contains(h, "Transfer-Encoding") || strings.Contains(h, "Content-Length") {
				t.Fatalf("%s: %q", path, h)
			}
		}
		// Nothing followed the bodiless responses: the next answer starts right here.
		cl.send("GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, body := cl.read("GET"); resp.StatusCode != 200 || body != "/after" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
}

// TestProxyCurl drives the proxy with curl: a chunked upload from stdin and an
// HTTP/1.0 request, as a client other than Go's sees them.
func TestProxyCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	be := framingBackend(t)
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    location / { proxy_pass http://`+be.Addr+`; proxy_http_version 1.1; proxy_request_buffering off; }
  }`, addr)
	cmd := exec.Command(curl, "-sS", "-i", "-H", "Transfer-Encoding: chunked", "--data-binary", "@-", "http://"+addr+"/upload?x=1")
	cmd.Stdin = strings.NewReader(strings.Repeat("curl data ", 10000))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(string(out), "\r\n\r\n/upload?x=1") {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if s := be.last(t); s.Body != strings.Repeat("curl data ", 10000) || len(s.TE) != 1 || s.TE[0] != "chunked" {
		t.Fatalf("upstream got %d bytes, TE %v", len(s.Body), s.TE)
	}
	out, err = exec.Command(curl, "-sS", "-0", "-i", "http://"+addr+"/chunked").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Connection: close\r\n") || !strings.HasSuffix(string(out), "\r\n\r\npart1,part2") {
		t.Fatalf("curl -0: %v\n%s", err, out)
	}
}
