package integration

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// blackhole returns the address of a listener whose accept queue is full, so that a
// connect to it is never answered: the kernel drops the SYNs (on loopback an unbound
// port refuses at once, and nothing else times out).
func blackhole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := syscall.Getsockname(fd)
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			if !isTimeout(err) {
				t.Fatal(err)
			}
			return addr
		}
		t.Cleanup(func() { c.Close() })
		if i > 16 {
			t.Fatal("could not fill the accept queue")
		}
	}
}

// silentUpstream reads requests and never answers.
func silentUpstream(t *testing.T) *rawUpstream {
	return newRawUpstream(t, func(c net.Conn) { io.Copy(io.Discard, c) })
}

// rawReply answers the first request head on each connection with reply, then
// closes (with a reset when reset is set).
func rawReply(t *testing.T, reply string, reset bool) *rawUpstream {
	return newRawUpstream(t, func(c net.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, reply)
		if reset {
			c.(*net.TCPConn).SetLinger(0)
		}
	})
}

func TestProxyUpstreamErrors(t *testing.T) {
	t.Parallel()
	live := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "live "+r.Method) })
	status503 := newBackend(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503); io.WriteString(w, "busy") })
	silent := silentUpstream(t)
	garbage := rawReply(t, "HTTP/1.1 2OO OK\r\n\r\n", false)
	// closer reads the request, body included, and closes without answering.
	var closerGot atomic.Int64
	closer := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.ReadAll(req.Body)
		closerGot.Add(1)
	})
	dead, dead2 := addrFor(t), addrFor(t)
	hole := blackhole(t)
	addr := addrFor(t)
	startHTTP(t, `
  upstream deadlive { server `+dead+` max_fails=0; server `+live.Addr+`; }
  upstream silentlive1 { server `+silent.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream silentlive2 { server `+silent.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream silentlive3 { server `+silent.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream garbagelive1 { server `+garbage.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream garbagelive2 { server `+garbage.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream busylive1 { server `+status503.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream busylive2 { server `+status503.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream closerlive1 { server `+closer.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream closerlive2 { server `+closer.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream closerlive3 { server `+closer.Addr+` max_fails=0; server `+live.Addr+`; }
  upstream threedead1 { server `+dead+` max_fails=0; server `+dead2+` max_fails=0; server `+live.Addr+` max_fails=0; }
  upstream threedead2 { server `+dead+` max_fails=0; server `+dead2+` max_fails=0; server `+live.Addr+` max_fails=0; }
  server {
    listen `+addr+`;
    proxy_read_timeout 300ms;
    proxy_connect_timeout 300ms;
    location /refused { proxy_pass http://`+dead+`; }
    location /refused-next { proxy_pass http://deadlive; }
    location /connect-timeout { proxy_pass http://`+hole+`; }
    location /read-timeout { proxy_pass http://`+silent.Addr+`; }
    location /timeout-next { proxy_pass http://silentlive1; }
    location /timeout-not-next { proxy_pass http://silentlive2; proxy_next_upstream error; }
    location /garbage { proxy_pass http://`+garbage.Addr+`; }
    location /garbage-no-next { proxy_pass http://garbagelive1; }
    location /garbage-next { proxy_pass http://garbagelive2; proxy_next_upstream error invalid_header; }
    location /busy { proxy_pass http://busylive1; }
    location /busy-next { proxy_pass http://busylive2; proxy_next_upstream error http_502 http_503 http_504; }
    location /post { proxy_pass http://closerlive1; }
    location /post-get { proxy_pass http://closerlive2; }
    location /post-next { proxy_pass http://closerlive3; proxy_next_upstream error non_idempotent; }
    location /tries2 { proxy_pass http://threedead1; proxy_next_upstream_tries 2; }
    location /tries3 { proxy_pass http://threedead2; proxy_next_upstream_tries 3; }
    location /next-timeout { proxy_pass http://silentlive3; proxy_next_upstream_timeout 100ms; }
  }`, addr)

	type tc struct {
		method, path string
		status       int
		body         string
		min, max     time.Duration
	}
	run := func(t *testing.T, tc tc) {
		t.Helper()
		cl := newClient(t, addr)
		began := time.Now()
		req := tc.method + " " + tc.path + " HTTP/1.1\r\nHost: a\r\n"
		if tc.method == "POST" {
			req += "Content-Length: 4\r\n\r\nbody"
		} else {
			req += "\r\n"
		}
		cl.send(req)
		resp, body := cl.read(tc.method)
		d := time.Since(began)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.body)
		}
		if d < tc.min || (tc.max > 0 && d > tc.max) {
			t.Errorf("%s %s: answered after %v, want within [%v, %v]", tc.method, tc.path, d, tc.min, tc.max)
		}
		// An error answer keeps the connection.
		cl.send("GET /refused HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, _ := cl.read("GET"); resp.StatusCode != 502 {
			t.Errorf("after %s: %d", tc.path, resp.StatusCode)
		}
	}
	for _, c := range []tc{
		{"GET", "/refused", 502, "502 Bad Gateway", 0, time.Second},
		{"GET", "/refused-next", 200, "live GET", 0, time.Second},
		{"GET", "/connect-timeout", 504, "504 Gateway Time-out", 250 * time.Millisecond, 2 * time.Second},
		{"GET", "/read-timeout", 504, "504 Gateway Time-out", 250 * time.Millisecond, 2 * time.Second},
		{"GET", "/timeout-next", 200, "live GET", 250 * time.Millisecond, 2 * time.Second},
		{"GET", "/timeout-not-next", 504, "504", 250 * time.Millisecond, 2 * time.Second},
		{"GET", "/garbage", 502, "502 Bad Gateway", 0, time.Second},
		{"GET", "/garbage-no-next", 502, "502 Bad Gateway", 0, time.Second},
		{"GET", "/garbage-next", 200, "live GET", 0, time.Second},
		{"GET", "/busy", 503, "busy", 0, time.Second},
		{"GET", "/busy-next", 200, "live GET", 0, time.Second},
		{"GET", "/tries2", 502, "502", 0, time.Second},
		{"GET", "/tries3", 200, "live GET", 0, time.Second},
		{"GET", "/next-timeout", 504, "504", 250 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(strings.TrimPrefix(c.path, "/"), func(t *testing.T) { run(t, c) })
	}

	if garbage.accepted.Load() != 3 || len(status503.requests()) != 2 {
		t.Errorf("the failing servers were not tried first: garbage %d, 503 %d", garbage.accepted.Load(), len(status503.requests()))
	}

	t.Run("non-idempotent", func(t *testing.T) {
		live.reset()
		run(t, tc{"POST", "/post", 502, "502", 0, time.Second})
		if closerGot.Load() != 1 || live.count() != 0 {
			t.Fatalf("a POST that reached a server went to the next: closer %d, live %d", closerGot.Load(), live.count())
		}
		run(t, tc{"GET", "/post-get", 200, "live GET", 0, time.Second})
		if closerGot.Load() != 2 {
			t.Fatalf("the GET did not try the closing server first")
		}
		run(t, tc{"POST", "/post-next", 200, "live POST", 0, time.Second})
		if s := live.last(t); closerGot.Load() != 3 || s.Method != "POST" || s.Body != "body" {
			t.Fatalf("the retried POST: %+v", s)
		}
	})
}

// TestProxyUpstreamClosesMidResponse: a response cut short by the upstream must
// never reach the client looking complete: the client connection is closed before
// the announced length or the last chunk.
func TestProxyUpstreamClosesMidResponse(t *testing.T) {
	t.Parallel()
	shortCL := rawReply(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"+strings.Repeat("x", 50), false)
	shortChunked := rawReply(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", false)
	badChunk := rawReply(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n", false)
	resetUntilClose := rawReply(t, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npartial", true)
	cleanUntilClose := rawReply(t, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nwhole", false)
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    location /cl { proxy_pass http://`+shortCL.Addr+`; }
    location /chunked { proxy_pass http://`+shortChunked.Addr+`; proxy_http_version 1.1; }
    location /chunked10 { proxy_pass http://`+shortChunked.Addr+`; proxy_http_version 1.1; }
    location /badchunk { proxy_pass http://`+badChunk.Addr+`; proxy_http_version 1.1; }
    location /reset { proxy_pass http://`+resetUntilClose.Addr+`; }
    location /clean { proxy_pass http://`+cleanUntilClose.Addr+`; }
  }`, addr)

	for _, path := range []string{"/cl", "/chunked", "/badchunk", "/reset"} {
		t.Run(path[1:], func(t *testing.T) {
			cl := newClient(t, addr)
			cl.send("GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n")
			cl.c.SetReadDeadline(time.Now().Add(ioTimeout))
			resp, err := http.ReadResponse(cl.br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			body, err := io.ReadAll(resp.Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("body %q read with %v: the truncated response looked complete", body, err)
			}
		})
	}
	t.Run("HTTP/1.0 client", func(t *testing.T) {
		// No framing at all towards the client: only a reset tells it apart, and the
		// length it got is not the whole body; the proxy must still close.
		raw, _ := roundTripRaw(t, addr, "GET /chunked10 HTTP/1.0\r\n\r\n")
		if !strings.HasSuffix(raw, "\r\n\r\nhello") {
			t.Fatalf("%q", raw)
		}
	})
	t.Run("clean close ends the body", func(t *testing.T) {
		cl := newClient(t, addr)
		cl.send("GET /clean HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, body := cl.read("GET"); resp.StatusCode != 200 || body != "whole" || resp.Close {
			t.Fatalf("%d %q close=%v", resp.StatusCode, body, resp.Close)
		}
		cl.wantOpen()
	})
}

// TestProxyClientGone: when the client disappears mid-response, or before the
// response began, the upstream connection is closed and not reused.
func TestProxyClientGone(t *testing.T) {
	t.Parallel()
	streamErr := make(chan error, 4)
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Length", strconv.Itoa(64<<20))
			chunk := make([]byte, 32<<10)
			for i := 0; i < 2048; i++ {
				if _, err := w.Write(chunk); err != nil {
					streamErr <- err
					return
				}
			}
			streamErr <- nil
			return
		}
		io.WriteString(w, "ok")
	})
	var silentClosed atomic.Int64
	silent := newRawUpstream(t, func(c net.Conn) {
		io.Copy(io.Discard, c)
		silentClosed.Add(1)
	})
	addr := addrFor(t)
	startHTTP(t, `
  upstream be { server `+be.Addr+`; keepalive 4; }
  upstream silent { server `+silent.Addr+`; keepalive 4; }
  server {
    listen `+addr+`;
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /silent { proxy_pass http://silent; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }`, addr)

	c := keepAliveClient(nil)
	get(t, c, "http://"+addr+"/warm")
	if n := be.conns.Load(); n != 1 {
		t.Fatalf("%d upstream connections after one request", n)
	}

	cl := newClient(t, addr)
	cl.send("GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
	cl.head()
	cl.c.Close()
	select {
	case err := <-streamErr:
		if err == nil {
			t.Fatal("the upstream sent the whole body to a client that was gone")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream connection was not closed after the client left")
	}
	// The keep-alive connection used for /stream is gone; the next request takes the
	// one idle connection left, or a new one: never the broken one.
	get(t, c, "http://"+addr+"/after")
	if s := be.last(t); s.URI != "/after" {
		t.Fatalf("last upstream request %q", s.URI)
	}

	cl = newClient(t, addr)
	cl.send("GET /silent HTTP/1.1\r\nHost: a\r\n\r\n")
	waitFor(t, "the silent upstream to be connected", 5*time.Second, func() bool { return silent.accepted.Load() == 1 })
	cl.c.Close()
	waitFor(t, "the upstream connection of a gone client to close", 5*time.Second, func() bool { return silentClosed.Load() == 1 })
}

// TestProxyClientLimits: client_max_body_size, client_body_timeout and send_timeout.
func TestProxyClientLimits(t *testing.T) {
	t.Parallel()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(64<<20))
			chunk := make([]byte, 32<<10)
			for i := 0; i < 2048; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		io.WriteString(w, "got "+strconv.Itoa(int(r.ContentLength)))
	})
	var upstreamClosed atomic.Int64
	slowReader := newRawUpstream(t, func(c net.Conn) {
		io.Copy(io.Discard, c)
		upstreamClosed.Add(1)
	})
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    client_max_body_size 10;
    client_body_timeout 300ms;
    send_timeout 300ms;
    location / { proxy_pass http://`+be.Addr+`; proxy_http_version 1.1; }
    location /hold { proxy_pass http://`+slowReader.Addr+`; proxy_http_version 1.1; proxy_request_buffering off; }
  }`, addr)

	t.Run("client_max_body_size", func(t *testing.T) {
		wantClosedResponse(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n01234567890", 413)
		wantClosedResponse(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n012345\r\n5\r\n67890\r\n0\r\n\r\n", 413)
		cl := newClient(t, addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789")
		if resp, body := cl.read("POST"); resp.StatusCode != 200 || body != "got 10" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("client_body_timeout", func(t *testing.T) {
		// As nginx 1.22 (measured: a proxied upload that stalls is closed after
		// client_body_timeout with nothing sent), the connection closes silently.
		began := time.Now()
		raw, err := roundTripRaw(t, addr, "POST /hold HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n01234")
		if err != nil || raw != "" {
			t.Fatalf("a stalled upload got %q, %v; want a silent close", raw, err)
		}
		if d := time.Since(began); d < 250*time.Millisecond {
			t.Fatalf("closed after %v", d)
		}
		waitFor(t, "the upstream connection to close", 5*time.Second, func() bool { return upstreamClosed.Load() == 1 })
	})
	t.Run("send_timeout", func(t *testing.T) {
		cl := newClient(t, addr)
		cl.send("GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
		cl.head()
		// Stop reading for longer than send_timeout: the proxy gives up and closes.
		time.Sleep(time.Second)
		cl.c.SetReadDeadline(time.Now().Add(ioTimeout))
		n, err := io.Copy(io.Discard, cl.br)
		if n >= 64<<20 || isTimeout(err) {
			t.Fatalf("read %d bytes, %v: the connection was not closed", n, err)
		}
	})
}

// TestProxySendTimeout: an upstream that stops reading the request body gets
// proxy_send_timeout, and the client a 504 (its body is not read any further, so
// the connection closes).
func TestProxySendTimeout(t *testing.T) {
	t.Parallel()
	var accepted atomic.Int64
	stuck := newRawUpstream(t, func(c net.Conn) {
		accepted.Add(1)
		c.(*net.TCPConn).SetReadBuffer(16 << 10)
		time.Sleep(10 * time.Second) // reads nothing
	})
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    client_max_body_size 0;
    location / { proxy_pass http://`+stuck.Addr+`; proxy_http_version 1.1; proxy_send_timeout 300ms; proxy_request_buffering off; }
  }`, addr)
	cl := newClient(t, addr)
	const size = 256 << 20
	cl.send("PUT /up HTTP/1.1\r\nHost: a\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n")
	go func() {
		chunk := make([]byte, 1<<20)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := cl.c.Write(chunk); err != nil {
				return
			}
		}
	}()
	began := time.Now()
	resp, _ := cl.read("PUT")
	if resp.StatusCode != 504 || !resp.Close {
		t.Fatalf("%d close=%v", resp.StatusCode, resp.Close)
	}
	if d := time.Since(began); d < 250*time.Millisecond || d > 5*time.Second {
		t.Fatalf("504 after %v", d)
	}
	if accepted.Load() != 1 {
		t.Fatalf("%d upstream connections", accepted.Load())
	}
}

// TestProxySlowUpload: proxy_read_timeout counts from the end of the request, as in
// nginx: an upload slower than it (but within client_body_timeout between reads)
// gets its answer.
func TestProxySlowUpload(t *testing.T) {
	t.Parallel()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "got it") })
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    location / { proxy_pass http://`+be.Addr+`; proxy_http_version 1.1; proxy_read_timeout 300ms; }
  }`, addr)
	cl := newClient(t, addr)
	cl.send("POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n")
	for i := 0; i < 10; i++ {
		time.Sleep(80 * time.Millisecond) // the upload takes ~800ms in all
		cl.send("x")
	}
	if resp, body := cl.read("POST"); resp.StatusCode != 200 || body != "got it" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if s := be.last(t); s.Body != "xxxxxxxxxx" {
		t.Fatalf("upstream got %q", s.Body)
	}
}
