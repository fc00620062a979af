package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Helpers of the proxy tests: a numaproxy started on an http block, upstream servers
// that record what reached them (net/http ones and raw TCP ones for misbehaviour),
// and raw clients that read to the end of the connection.

// ioTimeout bounds every read and write of a test client or upstream.
const ioTimeout = 5 * time.Second

// addrFor returns "127.0.0.1:PORT" of a port that is free right now.
func addrFor(t *testing.T) string { return "127.0.0.1:" + strconv.Itoa(freePort(t)) }

// startHTTP runs numaproxy (one loop, so per-loop state is deterministic) with the
// given http block body and waits until its listeners accept: every address in
// listen must accept a connection.
func startHTTP(t *testing.T, httpBody string, listen ...string) *instance {
	t.Helper()
	return startMain(t, "worker_processes 1;\n", httpBody, listen...)
}

// startMain is startHTTP with main-context directives of the caller's own, which
// may hold an events block (else an empty one is added).
func startMain(t *testing.T, mainExtra, httpBody string, listen ...string) *instance {
	t.Helper()
	cfg := "error_log logs/error.log info;\n" + withEvents(mainExtra) + "http {\n" + httpBody + "\n}\n"
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": cfg})
	in := start(t, dir)
	for _, a := range listen {
		waitFor(t, "numaproxy listening on "+a, 10*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	return in
}

// withEvents adds an empty events block to main-context text that has none.
func withEvents(mainText string) string {
	if strings.Contains(mainText, "events {") {
		return mainText
	}
	return mainText + "events { }\n"
}

// fdCount is the number of open files of the process.
func (in *instance) fdCount() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", in.cmd.Process.Pid))
	if err != nil {
		in.t.Fatal(err)
	}
	return len(ents)
}

// seen is one request as an upstream received it.
type seen struct {
	Method, URI, Proto, Host string
	Header                   http.Header
	Trailer                  http.Header
	TE                       []string
	ContentLength            int64
	Body                     string
	Remote                   string // the connection it came on
}

// backend is a net/http upstream that records the requests it receives and counts
// the TCP connections it accepted.
type backend struct {
	Addr   string
	srv    *http.Server
	ln     net.Listener
	conns  atomic.Int64 // connections accepted
	closed atomic.Int64 // connections closed

	mu   sync.Mutex
	reqs []seen
}

// newBackend starts an upstream on 127.0.0.1; h answers after the request (body
// included) was recorded. A nil h answers 200 "ok".
func newBackend(t *testing.T, h http.HandlerFunc) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{Addr: ln.Addr().String(), ln: ln}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
	}
	b.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			s := seen{Method: r.Method, URI: r.RequestURI, Proto: r.Proto, Host: r.Host, Header: r.Header.Clone(),
				Trailer: r.Trailer.Clone(), TE: r.TransferEncoding, ContentLength: r.ContentLength, Body: string(body), Remote: r.RemoteAddr}
			b.mu.Lock()
			b.reqs = append(b.reqs, s)
			b.mu.Unlock()
			h(w, r)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				b.conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				b.closed.Add(1)
			}
		},
		ErrorLog: nil,
	}
	go b.srv.Serve(ln)
	t.Cleanup(func() { b.srv.Close() })
	return b
}

// requests returns a copy of what was received so far.
func (b *backend) requests() []seen {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seen(nil), b.reqs...)
}

// last returns the last request received; the test fails if there is none.
func (b *backend) last(t *testing.T) seen {
	t.Helper()
	r := b.requests()
	if len(r) == 0 {
		t.Fatal("the upstream received no request")
	}
	return r[len(r)-1]
}

func (b *backend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reqs)
}

func (b *backend) reset() {
	b.mu.Lock()
	b.reqs = nil
	b.mu.Unlock()
	b.conns.Store(0)
}

// rawUpstream is a TCP server whose connections a test function handles, for
// upstreams that misbehave; it counts accepted connections.
type rawUpstream struct {
	Addr     string
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
}

func newRawUpstream(t *testing.T, serve func(c net.Conn)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{Addr: ln.Addr().String(), ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.accepted.Add(1)
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return u
}

// readHead reads a request or response head (through the blank line) from br.
func readHead(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			return sb.String(), err
		}
		if line == "\r\n" || line == "\n" {
			return sb.String(), nil
		}
	}
}

// roundTripRaw sends raw bytes on a new connection and reads until the server
// closes it. A read error other than EOF (a reset, a timeout: the server kept the
// connection open) is returned with what was read.
func roundTripRaw(t *testing.T, addr, req string) (string, error) {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		return "", err
	}
	return readToEOF(c)
}

// readToEOF reads until EOF within ioTimeout.
func readToEOF(c net.Conn) (string, error) {
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	data, err := io.ReadAll(c)
	return string(data), err
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// parseResponses parses every response in raw (answers to the methods given, in
// order) and fails the test on anything left over.
func parseResponses(t *testing.T, raw string, methods ...string) []*http.Response {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(raw))
	var out []*http.Response
	for _, m := range methods {
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			t.Fatalf("response %d of %q: %v", len(out)+1, raw, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body of %q: %v", len(out)+1, raw, err)
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		resp.Header.Set("X-Test-Body", string(body))
		out = append(out, resp)
	}
	if rest, _ := io.ReadAll(br); len(rest) > 0 {
		t.Fatalf("bytes after %d responses: %q", len(methods), rest)
	}
	return out
}

func bodyOf(r *http.Response) string { return r.Header.Get("X-Test-Body") }

// wantClosedResponse sends req on a new connection and checks that the answer is
// one response with the status, that the connection was then closed cleanly (EOF,
// not a reset), and that the response said Connection: close.
func wantClosedResponse(t *testing.T, addr, req string, status int) *http.Response {
	t.Helper()
	raw, err := roundTripRaw(t, addr, req)
	if err != nil {
		t.Fatalf("%q: reading to EOF: %v (got %q)", req, err, raw)
	}
	resp := parseResponses(t, raw, "GET")[0]
	if resp.StatusCode != status {
		t.Fatalf("%q: status %d, want %d\n%s", req, resp.StatusCode, status, raw)
	}
	if !resp.Close {
		t.Fatalf("%q: the response does not say Connection: close\n%s", req, raw)
	}
	return resp
}

// keepAliveClient is a net/http client that reuses connections and counts dials.
func keepAliveClient(dials *atomic.Int64) *http.Client {
	d := &net.Dialer{Timeout: ioTimeout}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 4,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: ioTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get does one GET with c and returns the response with its body read.
func get(t *testing.T, c *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "host") {
			req.Host = hdr[i+1]
		} else {
			req.Header.Add(hdr[i], hdr[i+1])
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", url, err)
	}
	return resp, string(body)
}

// client is a raw client connection that reads responses one at a time.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func newClient(t *testing.T, addr string) *client {
	t.Helper()
	c := dial(t, addr)
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (cl *client) send(s string) {
	cl.t.Helper()
	cl.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(cl.c, s); err != nil {
		cl.t.Fatalf("write: %v", err)
	}
}

// read reads one response to a request of method, body included.
func (cl *client) read(method string) (*http.Response, string) {
	cl.t.Helper()
	cl.c.SetReadDeadline(time.Now().Add(ioTimeout))
	resp, err := http.ReadResponse(cl.br, &http.Request{Method: method})
	if err != nil {
		cl.t.Fatalf("reading a response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		cl.t.Fatalf("reading a response body: %v", err)
	}
	return resp, string(body)
}

// head reads one response head verbatim.
func (cl *client) head() string {
	cl.t.Helper()
	cl.c.SetReadDeadline(time.Now().Add(ioTimeout))
	h, err := readHead(cl.br)
	if err != nil {
		cl.t.Fatalf("reading a head: %v (got %q)", err, h)
	}
	return h
}

// wantEOF checks that the server closed the connection cleanly and sent nothing more.
func (cl *client) wantEOF() {
	cl.t.Helper()
	cl.c.SetReadDeadline(time.Now().Add(ioTimeout))
	rest, err := io.ReadAll(cl.br)
	if err != nil || len(rest) > 0 {
		cl.t.Fatalf("want a clean close, got %q, %v", rest, err)
	}
}

// wantOpen checks that the connection is still open (nothing arrives for a moment).
func (cl *client) wantOpen() {
	cl.t.Helper()
	cl.c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if b, err := cl.br.Peek(1); err == nil || !isTimeout(err) {
		cl.t.Fatalf("the connection is not idle and open: %q %v", b, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
