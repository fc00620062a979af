package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Answers that clients never read: a response sent while the client is still
// uploading must reach it. nginx reads and drops the rest of a body it does not
// need (ngx_http_discard_request_body: the connection stays alive when it may) and,
// when it closes with input still coming, shuts its sending side and reads until
// the client is done (lingering_close, lingering_time, lingering_timeout). Each
// test runs the same configuration on numaproxy and on Debian's nginx and expects
// the same of both.

// server is one of the two implementations under comparison.
type server struct {
	name string
	addr string
}

// bothServers starts numaproxy and nginx on the same http block; %[1]s in it is
// the listen address of each and %[2]s an upstream address, if the test has one.
func bothServers(t *testing.T, httpBody, upstreamAddr string) []server {
	t.Helper()
	np, ng := addrFor(t), addrFor(t)
	startHTTP(t, fmt.Sprintf(httpBody, np, upstreamAddr), np)
	startNginx(t, fmt.Sprintf(httpBody, ng, upstreamAddr), ng)
	return []server{{"numaproxy", np}, {"nginx", ng}}
}

// uploadResult is what a client saw of one upload.
type uploadResult struct {
	raw      string // everything it read
	readErr  error  // nil: reading ended with a clean EOF
	writeErr error  // nil: the whole request went out
	took     time.Duration
}

func (u uploadResult) status() int {
	var code int
	fmt.Sscanf(u.raw, "HTTP/1.1 %d", &code)
	return code
}

// upload sends head, then what body writes, on a new connection while it reads the
// answer to the end; it waits for both sides (each bounded by a deadline).
func upload(addr, head string, body func(w io.Writer) error) uploadResult {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return uploadResult{readErr: err, writeErr: err}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var res uploadResult
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c, head)
		if err == nil && body != nil {
			err = body(c)
		}
		wrote <- err
	}()
	data, err := io.ReadAll(c)
	res.raw, res.readErr, res.took = string(data), err, time.Since(start)
	res.writeErr = <-wrote
	return res
}

// zeros writes n zero bytes in 64 KiB writes.
func zeros(n int) func(w io.Writer) error {
	return func(w io.Writer) error {
		buf := make([]byte, 64<<10)
		for n > 0 {
			k, err := w.Write(buf[:min(n, len(buf))])
			n -= k
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// chunks writes a chunked body of n zero bytes in 64 KiB chunks, then the last chunk.
func chunks(n int) func(w io.Writer) error {
	return func(w io.Writer) error {
		buf := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, len(buf))
			if _, err := fmt.Fprintf(w, "%x\r\n", k); err != nil {
				return err
			}
			if _, err := w.Write(buf[:k]); err != nil {
				return err
			}
			if _, err := io.WriteString(w, "\r\n"); err != nil {
				return err
			}
			n -= k
		}
		_, err := io.WriteString(w, "0\r\n\r\n")
		return err
	}
}

// TestLingeringTooLargeUploads: uploads announced larger than client_max_body_size
// to a location that answers with return get 413 (nginx checks the length when it
// picks the location, before any of its handlers), and each client reads the whole
// answer and a clean end: the rest of the body is read and dropped, its sending
// never fails. Before, numaproxy answered 200 and closed at once: of 100 uploads,
// about half saw a reset or a broken pipe.
func TestLingeringTooLargeUploads(t *testing.T) {
	const uploads, parallel, size = 100, 20, 3 << 20
	srvs := bothServers(t, `client_max_body_size 1m;
server { listen %[1]s; location / { return 200 ok; } location /big { client_max_body_size 0; return 200 big; } }`, "")
	head := fmt.Sprintf("POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", size)
	for _, s := range srvs {
		results := make([]uploadResult, uploads)
		sem := make(chan struct{}, parallel)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				results[i] = upload(s.addr, head, zeros(size))
			}()
		}
		wg.Wait()
		bad, readErrs, writeErrs := 0, 0, 0
		for _, r := range results {
			if r.readErr != nil {
				readErrs++
			}
			if r.writeErr != nil {
				writeErrs++
			}
		}
		for i, r := range results {
			if r.status() != 413 || r.readErr != nil || r.writeErr != nil || !strings.Contains(r.raw, "Connection: close") {
				if bad++; bad <= 3 {
					t.Errorf("%s: upload %d: status %d, read %v, write %v\n%.200q", s.name, i, r.status(), r.readErr, r.writeErr, r.raw)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d uploads not answered 413 with a clean close (%d failed reads, %d failed writes)", s.name, bad, uploads, readErrs, writeErrs)
		}
		// Within the location's own limit the upload is read, dropped and answered.
		r := upload(s.addr, fmt.Sprintf("POST /big HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", size), zeros(size))
		if r.status() != 200 || r.readErr != nil || r.writeErr != nil {
			t.Errorf("%s: /big: status %d, read %v, write %v\n%.200q", s.name, r.status(), r.readErr, r.writeErr, r.raw)
		}
	}
}

// TestLingeringServerReturnIgnoresLimit: a server-level return runs before the
// location (and its client_max_body_size) is chosen, so nginx answers it whatever
// the announced length, and drops the body.
func TestLingeringServerReturnIgnoresLimit(t *testing.T) {
	srvs := bothServers(t, `client_max_body_size 1k;
server { listen %[1]s; return 200 server; location / { return 200 location; } }`, "")
	for _, s := range srvs {
		cl := newClient(t, s.addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n")
		if err := zeros(100000)(cl.c); err != nil {
			t.Fatalf("%s: sending the body: %v", s.name, err)
		}
		resp, body := cl.read("POST")
		if resp.StatusCode != 200 || body != "server" || resp.Close {
			t.Fatalf("%s: %d %q close=%v, want 200 \"server\" kept alive", s.name, resp.StatusCode, body, resp.Close)
		}
		cl.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, body := cl.read("GET"); resp.StatusCode != 200 || body != "server" {
			t.Fatalf("%s: next request: %d %q", s.name, resp.StatusCode, body)
		}
	}
}

// TestLingeringReturnKeepsAlive: a body sent to a location that answers without
// reading it is read and dropped, and the connection carries the next request, as
// with nginx: whether the body came with the head or after the answer, with a
// length or chunked (a chunked body is not held against client_max_body_size when
// it is dropped), and after a 100 Continue that return sends to a client expecting one.
func TestLingeringReturnKeepsAlive(t *testing.T) {
	srvs := bothServers(t, `client_max_body_size 1m;
server { listen %[1]s; location / { return 200 ok; } location /missing { return 404; } }`, "")
	for _, s := range srvs {
		next := func(cl *client, what string) {
			t.Helper()
			cl.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			if resp, body := cl.read("GET"); resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("%s: %s: next request: %d %q", s.name, what, resp.StatusCode, body)
			}
			cl.wantOpen()
		}
		answer := func(cl *client, what string, status int) {
			t.Helper()
			resp, _ := cl.read("POST")
			if resp.StatusCode != status || resp.Close {
				t.Fatalf("%s: %s: status %d close=%v, want %d kept alive", s.name, what, resp.StatusCode, resp.Close, status)
			}
		}

		cl := newClient(t, s.addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 100000))
		answer(cl, "length body with the head", 200)
		next(cl, "length body with the head")

		cl = newClient(t, s.addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 300000\r\n\r\n")
		answer(cl, "length body after the answer", 200)
		if err := zeros(300000)(cl.c); err != nil {
			t.Fatalf("%s: sending the body after the answer: %v", s.name, err)
		}
		next(cl, "length body after the answer")

		cl = newClient(t, s.addr)
		cl.send("POST /missing HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n")
		answer(cl, "404 before the body", 404)
		cl.send(strings.Repeat("y", 5000))
		next(cl, "404 before the body")

		cl = newClient(t, s.addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
		answer(cl, "chunked body over the limit", 200)
		if err := chunks(3 << 20)(cl.c); err != nil {
			t.Fatalf("%s: sending a chunked body: %v", s.name, err)
		}
		next(cl, "chunked body over the limit")

		cl = newClient(t, s.addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
		if h := cl.head(); !strings.HasPrefix(h, "HTTP/1.1 100 Continue\r\n") {
			t.Fatalf("%s: want 100 Continue first, got %q", s.name, h)
		}
		answer(cl, "expect 100-continue", 200)
		cl.send("0123456789")
		next(cl, "expect 100-continue")

		// Pipelined behind a discarded body, the next request is served.
		cl = newClient(t, s.addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /missing HTTP/1.1\r\nHost: a\r\n\r\n")
		answer(cl, "pipelined", 200)
		if resp, _ := cl.read("GET"); resp.StatusCode != 404 {
			t.Fatalf("%s: pipelined after a dropped body: %d", s.name, resp.StatusCode)
		}

		// Invalid chunked framing: with the head, return answers 400 instead; after
		// the answer, the connection is closed.
		cl = newClient(t, s.addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
		if resp, _ := cl.read("POST"); resp.StatusCode != 400 || !resp.Close {
			t.Fatalf("%s: invalid chunk with the head: %d close=%v", s.name, resp.StatusCode, resp.Close)
		}
		cl.wantEOF()
		cl = newClient(t, s.addr)
		cl.send("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
		answer(cl, "invalid chunk after the answer", 200)
		cl.send("zz\r\n")
		cl.c.SetReadDeadline(time.Now().Add(ioTimeout))
		if b, err := cl.br.ReadByte(); err == nil || isTimeout(err) {
			t.Fatalf("%s: invalid chunk after the answer: the connection is still open (%q %v)", s.name, b, err)
		}
	}
}

// TestLingeringTimeBoundsDiscard: a client that keeps sending after the answer is
// cut off once lingering_time has passed since the answer; one that stops sending
// without closing, lingering_timeout after its last bytes. nginx counts
// lingering_time in whole seconds: with 2s it closes after 1 to 2 seconds.
func TestLingeringTimeBoundsDiscard(t *testing.T) {
	srvs := bothServers(t, `client_max_body_size 1k; lingering_time 2s; lingering_timeout 1s;
server { listen %[1]s; location / { return 200 ok; } }`, "")
	head := "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000000\r\n\r\n"
	for _, s := range srvs {
		// Endless: 8 KiB every 10 ms until the server stops reading.
		r := upload(s.addr, head, func(w io.Writer) error {
			buf := make([]byte, 8<<10)
			for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(10 * time.Millisecond) {
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
			return nil
		})
		t.Logf("%s: endless upload cut off after %v (write: %v)", s.name, r.took, r.writeErr)
		if r.status() != 413 {
			t.Fatalf("%s: endless upload: status %d\n%.200q", s.name, r.status(), r.raw)
		}
		if r.took < 900*time.Millisecond || r.took > 8*time.Second {
			t.Errorf("%s: endless upload cut off after %v, want lingering_time 2s (1 to 2 s for nginx)", s.name, r.took)
		}
		if r.writeErr == nil {
			t.Errorf("%s: endless upload: every write went through", s.name)
		}

		// Stalled: part of the body, then nothing (the connection left open).
		r = upload(s.addr, head, zeros(10000))
		if r.status() != 413 {
			t.Fatalf("%s: stalled upload: status %d\n%.200q", s.name, r.status(), r.raw)
		}
		t.Logf("%s: stalled upload closed after %v", s.name, r.took)
		if r.took < 700*time.Millisecond || r.took > 6*time.Second {
			t.Errorf("%s: stalled upload closed after %v, want lingering_timeout 1s", s.name, r.took)
		}
	}
}

// serverReading reports whether the server still reads the connection after it
// sent its answer and its end: data sent now is taken, where a closed socket
// answers with a reset that fails the second write.
func serverReading(c net.Conn) bool {
	c.SetWriteDeadline(time.Now().Add(ioTimeout))
	for range 2 {
		if _, err := c.Write([]byte("more")); err != nil {
			return false
		}
		time.Sleep(150 * time.Millisecond)
	}
	return true
}

// TestLingeringCloseModes: lingering_close on lingers when input is still coming (a
// pipelined request behind Connection: close, an upload cut short), always lingers
// after every last response, off never does (a reset is then allowed).
func TestLingeringCloseModes(t *testing.T) {
	up := newBackend(t, nil)
	for _, mode := range []string{"on", "off", "always"} {
		t.Run(mode, func(t *testing.T) {
			srvs := bothServers(t, `lingering_close `+mode+`; lingering_timeout 2s; client_max_body_size 100k;
server { listen %[1]s; location / { return 200 ok; } location /up { proxy_pass http://%[2]s; } }`, up.Addr)
			for _, s := range srvs {
				// The last request, nothing else coming: only always lingers.
				c := dial(t, s.addr)
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
				raw, err := readToEOF(c)
				if err != nil || !strings.HasPrefix(raw, "HTTP/1.1 200") {
					t.Errorf("%s: last request: %v %q", s.name, err, raw)
				}
				if got, want := serverReading(c), mode == "always"; got != want {
					t.Errorf("%s: last request: lingering %v, want %v", s.name, got, want)
				}
				c.Close()

				// A pipelined request behind Connection: close.
				c = dial(t, s.addr)
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
				raw, err = readToEOF(c)
				if mode != "off" && (err != nil || !strings.HasPrefix(raw, "HTTP/1.1 200") || strings.Count(raw, "HTTP/1.1") != 1) {
					t.Errorf("%s: pipelined: %v %q", s.name, err, raw)
				}
				if got, want := serverReading(c), mode != "off"; got != want {
					t.Errorf("%s: pipelined: lingering %v, want %v", s.name, got, want)
				}
				c.Close()

				// A chunked upload to a proxied location, over the limit while it is
				// read: 413, and the rest of the upload is taken unless off.
				r := upload(s.addr, "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", chunks(2<<20))
				if mode != "off" {
					if r.status() != 413 || r.readErr != nil || r.writeErr != nil {
						t.Errorf("%s: chunked upload over the limit: status %d, read %v, write %v", s.name, r.status(), r.readErr, r.writeErr)
					}
				} else if r.readErr == nil && r.writeErr == nil {
					t.Errorf("%s: chunked upload over the limit: read and sent in full with lingering_close off", s.name)
				}
			}
		})
	}
}

// TestLingeringChunkedUploadToReturn: chunked uploads to a return location are
// dropped whole and the connection kept, under parallel load too.
func TestLingeringChunkedUploadToReturn(t *testing.T) {
	srvs := bothServers(t, `server { listen %[1]s; location / { return 204; } }`, "")
	for _, s := range srvs {
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", s.addr, ioTimeout)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				br := bufio.NewReader(c)
				for i := range 3 {
					sent := make(chan error, 1)
					go func() {
						_, err := io.WriteString(c, "PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
						if err == nil {
							err = chunks(1 << 20)(c)
						}
						sent <- err
					}()
					resp, err := http.ReadResponse(br, &http.Request{Method: "PUT"})
					if err == nil && (resp.StatusCode != 204 || resp.Close) {
						err = fmt.Errorf("status %d close=%v", resp.StatusCode, resp.Close)
					}
					if werr := <-sent; err == nil && werr != nil {
						err = werr
					}
					if err != nil {
						errs <- fmt.Errorf("request %d: %w", i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", s.name, err)
		}
	}
}

// TestLingeringErrorStatusesClose: after its own page for 400, 413, 414, 500 or 501
// nginx closes the connection, error_page or not; other statuses, and return with a
// text, keep it.
func TestLingeringErrorStatusesClose(t *testing.T) {
	srvs := bothServers(t, `server { listen %[1]s;
    location / { return 200 ok; }
    location /s/ { return 404; }
    location /s/400 { return 400; }
    location /s/413 { return 413; }
    location /s/414 { return 414; }
    location /s/500 { return 500; }
    location /s/501 { return 501; }
    location /s/502 { return 502; }
    location /s/403 { return 403; }
    location /text/500 { return 500 "text"; }
    location /page/413 { return 413; error_page 413 /page; }
    location /page/404 { return 404; error_page 404 /page; }
    location = /page { return 200 page; }
}`, "")
	for _, s := range srvs {
		for _, tc := range []struct {
			path   string
			status int
			closes bool
		}{
			{"/s/400", 400, true}, {"/s/413", 413, true}, {"/s/414", 414, true}, {"/s/500", 500, true},
			{"/s/501", 501, true}, {"/s/502", 502, false}, {"/s/403", 403, false}, {"/s/x", 404, false},
			{"/text/500", 500, false}, {"/page/413", 413, true}, {"/page/404", 404, false},
		} {
			cl := newClient(t, s.addr)
			cl.send("GET " + tc.path + " HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, _ := cl.read("GET")
			if resp.StatusCode != tc.status || resp.Close != tc.closes {
				t.Errorf("%s: %s: %d close=%v, want %d close=%v", s.name, tc.path, resp.StatusCode, resp.Close, tc.status, tc.closes)
			}
		}
	}
}
