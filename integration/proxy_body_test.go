package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request bodies: a chunked body for an HTTP/1.0 upstream is read whole before it
// goes upstream, in memory up to client_body_buffer_size and in an unlinked temp
// file under client_body_temp_path beyond it; a chunked body streamed to an HTTP/1.1
// upstream is framed afresh (data only, no extensions, no trailers).

// vmRSS returns the resident memory of a process in KiB (0 if it is gone).
// procReadBytes is what the process read through read(2) and friends (rchar), the
// sockets included.
func procReadBytes(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "rchar:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/PID/io")
	return 0
}

// openFilesUnder counts the process's open files whose path is in dir (a deleted
// temp file shows as "dir/#123 (deleted)" or "dir/name (deleted)").
func openFilesUnder(t *testing.T, pid int, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// chunkedBody frames data as chunks of size bytes, without the last chunk.
func chunkedBody(data []byte, size int) []byte {
	var b bytes.Buffer
	for rest := data; len(rest) > 0; {
		n := min(len(rest), size)
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(rest[:n])
		b.WriteString("\r\n")
		rest = rest[n:]
	}
	return b.Bytes()
}

// patterned returns n bytes that are not a short repetition, so a misplaced block
// shows as a mismatch.
func patterned(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// TestChunkedBodySpooledToFile: under proxy_http_version 1.0 a chunked body is read
// whole before it goes upstream. Many unfinished bodies must not hold their bytes in
// memory: beyond client_body_buffer_size they go to an unlinked file in
// client_body_temp_path (created at start), then upstream with a Content-Length, and
// a retry resends the whole body from the file. Before, each body was held in memory
// up to client_max_body_size (64 MiB when that was 0): 300 unfinished 0.94 MB bodies
// took the RSS to 459 MiB; nginx (which spills to temp files) stayed at 9 MiB.
func TestChunkedBodySpooledToFile(t *testing.T) {
	be := newBackend(t, nil)
	// The first server reads part of the request, then drops the connection.
	bad := newRawUpstream(t, func(c net.Conn) {
		io.CopyN(io.Discard, c, 200<<10)
		c.(*net.TCPConn).SetLinger(0)
	})
	addr := addrFor(t)
	in := startHTTP(t, fmt.Sprintf(`
  upstream retry { server %s; server %s; }
  server { listen %s;
    client_max_body_size 0;
    location / { proxy_pass http://%s; }
    location /retry { proxy_pass http://retry; proxy_next_upstream error; }
  }`, bad.Addr, be.Addr, addr, be.Addr), addr)
	pid := in.cmd.Process.Pid
	tempDir := in.path("client_body_temp")
	if st, err := os.Stat(tempDir); err != nil || !st.IsDir() {
		t.Errorf("client_body_temp_path was not created at start: %v", err)
	}

	t.Run("unfinished bodies stay bounded in memory", func(t *testing.T) {
		const conns, bodySize = 200, 940_000
		body := chunkedBody(patterned(bodySize), 16000)
		wantClosedResponse(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nwarm!\r\n0\r\n\r\n", 200)
		baseRSS := vmRSS(t, pid)
		baseRead := procReadBytes(t, pid)

		var peakRSS int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				if rss := vmRSS(t, pid); rss > peakRSS {
					peakRSS = rss
				}
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
		cs := make([]net.Conn, conns)
		for i := range cs {
			cs[i] = dial(t, addr)
			defer cs[i].Close()
		}
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < conns; i += 8 {
					cs[i].Write([]byte("POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"))
					cs[i].Write(body) // the last chunk never comes
				}
			}()
		}
		wg.Wait()
		// Wait until the proxy has read every body (or give up and judge what it holds).
		deadline := time.Now().Add(20 * time.Second)
		for procReadBytes(t, pid)-baseRead < int64(conns*len(body)) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		spooled := openFilesUnder(t, pid, tempDir)
		close(stop)
		<-sampled
		growth := (peakRSS - baseRSS) >> 20
		t.Logf("%d unfinished bodies of %d bytes: RSS %d MiB -> peak %d MiB (+%d MiB); %d temp files open",
			conns, bodySize, baseRSS>>20, peakRSS>>20, growth, spooled)
		if growth >= 64 {
			t.Errorf("RSS grew by %d MiB for %d unfinished bodies of %d bytes; want < 64 MiB", growth, conns, bodySize)
		}
		if spooled != conns {
			t.Errorf("%d temp files open for %d bodies", spooled, conns)
		}
		for _, c := range cs {
			c.Close()
		}
		waitFor(t, "the temp files to close", 10*time.Second, func() bool { return openFilesUnder(t, pid, tempDir) == 0 })
	})

	t.Run("a complete body arrives whole with its length", func(t *testing.T) {
		data := patterned(10 << 20)
		c := dial(t, addr)
		defer c.Close()
		go func() {
			c.Write([]byte("POST /big HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"))
			c.Write(chunkedBody(data, 100000))
			c.Write([]byte("0\r\n\r\n"))
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		got := be.last(t)
		if got.Proto != "HTTP/1.0" || got.ContentLength != int64(len(data)) || len(got.TE) != 0 || got.Body != string(data) {
			t.Fatalf("upstream saw %s, Content-Length %d, TE %v, body of %d bytes (intact: %v); want HTTP/1.0 with Content-Length %d",
				got.Proto, got.ContentLength, got.TE, len(got.Body), got.Body == string(data), len(data))
		}
	})

	t.Run("a slow upstream gets the whole body", func(t *testing.T) {
		data := patterned(8 << 20)
		got := make(chan []byte, 1)
		slow := newRawUpstream(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			head, err := readHead(br)
			if err != nil || !strings.Contains(head, "Content-Length: "+strconv.Itoa(len(data))+"\r\n") {
				got <- []byte(head)
				return
			}
			time.Sleep(300 * time.Millisecond) // the proxy's writes block meanwhile
			body := make([]byte, len(data))
			for n := 0; n < len(body); {
				k, err := br.Read(body[n:min(len(body), n+32<<10)])
				if err != nil {
					break
				}
				n += k
				time.Sleep(100 * time.Microsecond)
			}
			got <- body
			io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
		})
		slowAddr := addrFor(t)
		startHTTP(t, fmt.Sprintf(`server { listen %s; client_max_body_size 0; location / { proxy_pass http://%s; } }`, slowAddr, slow.Addr), slowAddr)
		c := dial(t, slowAddr)
		defer c.Close()
		go func() {
			c.Write([]byte("POST /slow HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"))
			c.Write(chunkedBody(data, 50000))
			c.Write([]byte("0\r\n\r\n"))
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if body := <-got; !bytes.Equal(body, data) {
			t.Fatalf("the upstream got %d bytes, not the body", len(body))
		}
	})

	t.Run("a retry resends the whole body", func(t *testing.T) {
		data := patterned(3 << 20)
		c := dial(t, addr)
		defer c.Close()
		go func() {
			c.Write([]byte("PUT /retry HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"))
			c.Write(chunkedBody(data, 65536))
			c.Write([]byte("0\r\n\r\n"))
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || bad.accepted.Load() == 0 {
			t.Fatalf("status %d, the failing server had %d connections", resp.StatusCode, bad.accepted.Load())
		}
		got := be.last(t)
		if got.URI != "/retry" || got.ContentLength != int64(len(data)) || got.Body != string(data) {
			t.Fatalf("the second server saw %s with Content-Length %d and %d body bytes; want %d", got.URI, got.ContentLength, len(got.Body), len(data))
		}
	})

	t.Run("over 64 MiB without client_max_body_size", func(t *testing.T) {
		data := bytes.Repeat([]byte("0123456789abcdef"), (65<<20)/16)
		c := dial(t, addr)
		defer c.Close()
		go func() {
			c.Write([]byte("POST /huge HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"))
			c.Write(chunkedBody(data, 1<<20))
			c.Write([]byte("0\r\n\r\n"))
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		if got := be.last(t); got.URI != "/huge" || got.ContentLength != int64(len(data)) || got.Body != string(data) {
			t.Fatalf("upstream saw %s with Content-Length %d and %d body bytes; want %d", got.URI, got.ContentLength, len(got.Body), len(data))
		}
	})

	ents, err := os.ReadDir(tempDir)
	if err != nil || len(ents) != 0 {
		t.Fatalf("client_body_temp holds %d entries (%v): temp files must leave no name behind", len(ents), err)
	}
	waitFor(t, "the temp files to close", 10*time.Second, func() bool { return openFilesUnder(t, pid, tempDir) == 0 })
}

// recorded is a request as a raw upstream received it, framing and all.
type recorded struct {
	head     string
	wire     []byte // the body bytes as they came on the wire
	data     []byte // the body's data
	exts     int    // chunk extension bytes
	trailers []string
	complete bool
}

// recordingUpstream is a raw upstream that reads one request per connection
// (Content-Length or chunked), records it, answers 200 and closes.
type recordingUpstream struct {
	*rawUpstream
	mu   sync.Mutex
	reqs []recorded
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	u.rawUpstream = newRawUpstream(t, func(c net.Conn) {
		r := u.readRequest(bufio.NewReaderSize(c, 64<<10))
		u.mu.Lock()
		u.reqs = append(u.reqs, r)
		u.mu.Unlock()
		if r.complete {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		}
	})
	return u
}

func (u *recordingUpstream) readRequest(br *bufio.Reader) (r recorded) {
	var err error
	if r.head, err = readHead(br); err != nil {
		return r
	}
	lower := strings.ToLower(r.head)
	if i := strings.Index(lower, "\r\ncontent-length: "); i >= 0 {
		n, _ := strconv.Atoi(strings.TrimSpace(lower[i+18 : i+18+strings.Index(lower[i+18:], "\r\n")]))
		r.data = make([]byte, n)
		_, err := io.ReadFull(br, r.data)
		r.wire, r.complete = r.data, err == nil
		return r
	}
	if !strings.Contains(lower, "\r\ntransfer-encoding: chunked\r\n") {
		r.complete = true
		return r
	}
	var wire bytes.Buffer
	line := func() (string, bool) {
		s, err := br.ReadString('\n')
		wire.WriteString(s)
		return strings.TrimSuffix(s, "\r\n"), err == nil && strings.HasSuffix(s, "\r\n")
	}
	defer func() { r.wire = wire.Bytes() }()
	for {
		s, ok := line()
		if !ok {
			return r
		}
		size, ext, _ := strings.Cut(s, ";")
		r.exts += len(ext)
		n, err := strconv.ParseInt(size, 16, 64)
		if err != nil {
			return r
		}
		if n == 0 {
			break
		}
		chunk := make([]byte, n+2)
		if _, err := io.ReadFull(br, chunk); err != nil {
			return r
		}
		wire.Write(chunk)
		r.data = append(r.data, chunk[:n]...)
	}
	for {
		s, ok := line()
		if !ok {
			return r
		}
		if s == "" {
			r.complete = true
			return r
		}
		r.trailers = append(r.trailers, s)
	}
}

func (u *recordingUpstream) take() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.reqs
	u.reqs = nil
	return r
}

// TestChunkedBodyReframed: a chunked body streamed to an HTTP/1.1 upstream goes with
// fresh framing: its data only, no chunk extensions, no trailer fields (nginx drops
// request trailers too). Before, the client's framing went through as it came: 1,000
// one-byte chunks with 4,000-byte extensions put 4,007,005 bytes upstream under a 1m
// body limit, and the trailers X-Auth-User and X_Real_IP reached the upstream.
// Extension and trailer bytes count against large_client_header_buffers (number ×
// size) for the whole body: past it the request is refused with 400. nginx skips any
// amount of extensions; that bound is numaproxy's own.
func TestChunkedBodyReframed(t *testing.T) {
	block := func(addr, up string) string {
		return fmt.Sprintf(`server { listen %s;
    client_max_body_size 1m;
    location / { proxy_pass http://%s; proxy_http_version 1.1; }
  }`, addr, up)
	}
	const trailers = "0\r\nX-Auth-User: admin\r\nX_Real_IP: 10.0.0.1\r\n\r\n"
	chunks := func(n int, ext string) string {
		var b strings.Builder
		b.WriteString("POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "1%s\r\n%c\r\n", ext, 'a'+i%26)
		}
		b.WriteString(trailers)
		return b.String()
	}
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	shortExt := chunks(1000, ";a=1")                        // 4,000 extension bytes in all
	longExt := chunks(1000, ";a"+strings.Repeat("a", 3998)) // 4,000 per chunk

	// send sends req on a new connection and returns the status (0: none came).
	send := func(t *testing.T, addr, req string) int {
		c := dial(t, addr)
		defer c.Close()
		go io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0
		}
		return resp.StatusCode
	}

	t.Run("numaproxy", func(t *testing.T) {
		up := newRecordingUpstream(t)
		addr := addrFor(t)
		startHTTP(t, block(addr, up.Addr), addr)

		if st := send(t, addr, shortExt); st != 200 {
			t.Fatalf("status %d", st)
		}
		r := up.take()
		if len(r) != 1 || !r[0].complete {
			t.Fatalf("upstream saw %+v", r)
		}
		got := r[0]
		if !bytes.Equal(got.data, data) || got.exts != 0 || len(got.trailers) != 0 {
			t.Fatalf("upstream saw %d data bytes (intact: %v), %d extension bytes, trailers %q; want the 1000 data bytes alone",
				len(got.data), bytes.Equal(got.data, data), got.exts, got.trailers)
		}
		if len(got.wire) > 7*len(data) {
			t.Fatalf("%d bytes on the wire for %d data bytes", len(got.wire), len(data))
		}
		t.Logf("1,000 one-byte chunks with short extensions: %d bytes upstream for %d data bytes", len(got.wire), len(data))

		st := send(t, addr, longExt)
		waitFor(t, "the upstream to record its connections", 5*time.Second, func() bool {
			up.mu.Lock()
			defer up.mu.Unlock()
			return int64(len(up.reqs)) == up.accepted.Load()-1
		})
		r = up.take()
		wire := 0
		for _, x := range r {
			wire += len(x.wire)
			if x.complete || x.exts != 0 || len(x.trailers) != 0 {
				t.Errorf("upstream saw a whole request or client framing: %+v", x)
			}
		}
		t.Logf("1,000 chunks with 4,000-byte extensions: status %d, %d bytes upstream", st, wire)
		if st != 400 || wire > len(data) {
			t.Fatalf("status %d and %d body bytes upstream; want 400 and at most the data before the framing bound", st, wire)
		}
	})

	t.Run("nginx", func(t *testing.T) {
		// The specification: the same data reach the upstream (nginx reads the body
		// whole and sends it with a Content-Length), without extensions or trailers;
		// nginx accepts the long extensions too (numaproxy refuses them, above).
		up := newRecordingUpstream(t)
		addr := addrFor(t)
		startNginx(t, block(addr, up.Addr), addr)
		for _, req := range []string{shortExt, longExt} {
			if st := send(t, addr, req); st != 200 {
				t.Fatalf("nginx: status %d", st)
			}
			r := up.take()
			if len(r) != 1 || !bytes.Equal(r[0].data, data) || r[0].exts != 0 || len(r[0].trailers) != 0 {
				t.Fatalf("nginx's upstream saw %+v", r)
			}
			t.Logf("nginx: %d bytes upstream", len(r[0].wire))
		}
	})
}
