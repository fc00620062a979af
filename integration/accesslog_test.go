package integration

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// accessLogHTTP is the http block both servers run in the differential test: the
// predefined combined format, a JSON one with escape=json, and one with the
// upstream timing variables, for answers of the server itself, of an upstream (with
// a length, and until its close, which the client gets chunked) and of an upstream
// group whose first server is down (a retry).
func accessLogHTTP(addr, backend, rawUp, dead string) string {
	return `
  log_format json escape=json '{"addr":"$remote_addr","user":"$remote_user","req":"$request","status":$status,'
      '"bbs":$body_bytes_sent,"bs":$bytes_sent,"ref":"$http_referer","ua":"$http_user_agent","len":$request_length,'
      '"pipe":"$pipe","uri":"$uri","args":"$args","method":"$request_method","proto":"$server_protocol",'
      '"host":"$host","missing":"$http_x_missing","is_args":"$is_args","cookie":"$cookie_c","arg":"$arg_q",'
      '"ct":"$sent_http_content_type","cl":"$sent_http_content_length","te":"$sent_http_transfer_encoding",'
      '"conn":"$sent_http_connection","nosent":"$sent_http_x_nothing","id":"$request_id"}';
  log_format timing '$status $request_time "$uri" ua=$upstream_addr us=$upstream_status uct=$upstream_connect_time '
      'uht=$upstream_header_time urt=$upstream_response_time url=$upstream_response_length '
      'ubr=$upstream_bytes_received ubs=$upstream_bytes_sent $msec $time_iso8601 $pipe';
  log_format raw escape=none '$remote_user|$uri|$http_user_agent|$http_x_missing|';
  upstream retry { server ` + dead + `; server ` + backend + `; }
  server {
    listen ` + addr + `;
    server_name front;
    access_log logs/combined.log;
    access_log logs/json.log json;
    access_log logs/timing.log timing;
    access_log logs/raw.log raw;
    location / { return 200 "hello\n"; }
    location /p/ { proxy_pass http://` + backend + `; }
    location /c/ { proxy_pass http://` + rawUp + `; }
    location /r/ { proxy_pass http://retry; }
    location /e/ { proxy_pass http://` + backend + `; proxy_intercept_errors on; error_page 404 = /p/fallback; }
    location /off/ { access_log off; return 204; }
  }`
}

// accessLogRequests are the requests of the differential test: each is sent on a
// connection of its own, the responses read, then the connection closed.
var accessLogRequests = []struct {
	raw       string
	responses int
}{
	{"GET /a?x=1 HTTP/1.1\r\nHost: Front.Test\r\nUser-Agent: Mozilla/5.0 \"quoted\" back\\slash\r\nReferer: http://ref.test/x\r\nCookie: c=v1\r\n\r\n", 1},
	{"GET /caf%C3%A9/%01%1F%7F%FF%22%5C?q=%01\"x HTTP/1.1\r\nHost: t\r\nAuthorization: Basic " +
		base64.StdEncoding.EncodeToString([]byte("al\"i\\ce\xc3\xa9:pw")) + "\r\nUser-Agent: caf\xc3\xa9 \xff\xfe\tend\r\n\r\n", 1},
	{"POST /form HTTP/1.1\r\nHost: t\r\nContent-Length: 7\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\nhello=1", 1},
	{"POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 1},
	{"GET /old HTTP/1.0\r\n\r\n", 1},
	// Referer and User-Agent there and empty: found, logged as "", not "-".
	{"GET /b HTTP/1.1\r\nHost: t\r\nReferer:\r\nUser-Agent:\r\n\r\n", 1},
	{"GET /p/x?y HTTP/1.1\r\nHost: t\r\n\r\n", 1},
	{"POST /p/body HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world", 1},
	{"POST /p/chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 1},
	{"GET /c/stream HTTP/1.1\r\nHost: t\r\n\r\n", 1},
	{"GET /r/retried HTTP/1.1\r\nHost: t\r\n\r\n", 1},
	{"GET /e/missing HTTP/1.1\r\nHost: t\r\n\r\n", 1},
	{"GET /off/ HTTP/1.1\r\nHost: t\r\n\r\n", 1},
	{"GET /first HTTP/1.1\r\nHost: t\r\n\r\nGET /second HTTP/1.1\r\nHost: t\r\n\r\n", 2},
}

// sendCounting sends raw on a new connection, reads n responses and returns the
// bytes read for them.
func sendCounting(t *testing.T, addr, raw string, n int) int {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	cr := &countingReader{r: c}
	br := bufio.NewReaderSize(cr, 1)
	method := strings.Fields(raw)[0]
	for range n {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return cr.n
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// readLines waits until path holds n lines and returns them.
func readLines(t *testing.T, path string, n int) []string {
	t.Helper()
	var lines []string
	waitFor(t, fmt.Sprintf("%d lines in %s", n, path), 10*time.Second, func() bool {
		data, _ := os.ReadFile(path)
		lines = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) == 0 {
			lines = nil
		}
		return len(lines) >= n
	})
	return lines
}

var (
	maskLocalTime = regexp.MustCompile(`\[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]`)
	maskISOTime   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d`)
	maskSeconds   = regexp.MustCompile(`\b\d+\.\d{3}\b`)
	bytesSent     = regexp.MustCompile(`"bs":(\d+)`)
	maskRequestID = regexp.MustCompile(`"id":"[0-9a-f]{32}"`)
)

// maskLine hides what legitimately differs between the two servers: times.
func maskLine(s string) string {
	s = maskLocalTime.ReplaceAllString(s, "[TIME]")
	s = maskISOTime.ReplaceAllString(s, "ISOTIME")
	s = maskRequestID.ReplaceAllString(s, `"id":"RID"`)
	return maskSeconds.ReplaceAllString(s, "S")
}

// TestAccessLogMatchesNginx runs Debian's nginx and numaproxy on the same http
// block and requests and compares their log lines byte for byte, times masked. The
// response heads differ (Server), so $bytes_sent is compared as what each client
// received: the logged value minus the bytes read must be 0 for both.
func TestAccessLogMatchesNginx(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/e/") {
			w.WriteHeader(404) // intercepted: error_page goes to /p/fallback, a second exchange
		}
		io.WriteString(w, "ok")
	})
	rawUp := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		readHead(br)
		io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nstreamed until the close")
	})
	dead := addrFor(t)
	npAddr, ngAddr := addrFor(t), addrFor(t)
	in := startHTTP(t, accessLogHTTP(npAddr, be.Addr, rawUp.Addr, dead), npAddr)
	ng := startNginx(t, accessLogHTTP(ngAddr, be.Addr, rawUp.Addr, dead), ngAddr)

	var npBytes, ngBytes []int
	for _, r := range accessLogRequests {
		npBytes = append(npBytes, sendCounting(t, npAddr, r.raw, r.responses))
		ngBytes = append(ngBytes, sendCounting(t, ngAddr, r.raw, r.responses))
	}
	want := 0
	for _, r := range accessLogRequests {
		if !strings.Contains(r.raw, "/off/") {
			want += r.responses
		}
	}
	for _, name := range []string{"combined.log", "json.log", "timing.log", "raw.log"} {
		np := readLines(t, in.path("logs/"+name), want)
		ngl := readLines(t, filepath.Join(ng.dir, "logs", name), want)
		if len(np) != want || len(ngl) != want {
			t.Fatalf("%s: numaproxy %d lines, nginx %d, want %d", name, len(np), len(ngl), want)
		}
		k := 0
		for i, r := range accessLogRequests {
			if strings.Contains(r.raw, "/off/") {
				continue
			}
			for j := range r.responses {
				a, b := maskLine(np[k]), maskLine(ngl[k])
				if name == "json.log" {
					// Only the connection's last response is counted by the client
					// alone; the pipelined pair's bytes are checked together below.
					a = normalizeBytesSent(t, a, npBytes[i], r.responses, j)
					b = normalizeBytesSent(t, b, ngBytes[i], r.responses, j)
				}
				if a != b {
					t.Errorf("%s line %d differs:\nnumaproxy %s\nnginx     %s", name, k+1, np[k], ngl[k])
				}
				k++
			}
		}
	}
}

// normalizeBytesSent replaces $bytes_sent by its difference from what the client
// read, for a connection with a single response.
func normalizeBytesSent(t *testing.T, line string, read, responses, _ int) string {
	if responses != 1 {
		return bytesSent.ReplaceAllString(line, `"bs":PIPELINED`)
	}
	m := bytesSent.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no bytes_sent in %s", line)
	}
	n, _ := strconv.Atoi(m[1])
	return bytesSent.ReplaceAllString(line, `"bs":`+strconv.Itoa(n-read))
}

// countLines counts the lines of the files (gzip ones through gzip -dc, which reads
// every member).
func countLines(t *testing.T, files ...string) int {
	t.Helper()
	n := 0
	for _, f := range files {
		var data []byte
		var err error
		if strings.HasSuffix(f, ".gz") || strings.HasSuffix(f, ".gz.1") {
			data, err = exec.Command("gzip", "-dc", f).Output()
		} else {
			data, err = os.ReadFile(f)
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if line == "" {
				continue
			}
			if !strings.HasSuffix(line, "\n") || !strings.Contains(line, `"GET /load`) {
				t.Fatalf("%s: a line cut or mixed: %q", f, line)
			}
			n++
		}
	}
	return n
}

// loadClients runs clients sending requests to addr, each on a keep-alive connection,
// until stop is called; stop returns how many were answered with 200.
func loadClients(addr string, clients int) (stop func() int) {
	done := make(chan struct{})
	answered := make(chan int)
	for range clients {
		go func() {
			n := 0
			defer func() { answered <- n }()
			c := keepAliveClient(nil)
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				resp, err := c.Get("http://" + addr + "/load/" + strconv.Itoa(i))
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					n++
				}
			}
		}()
	}
	return func() int {
		close(done)
		total := 0
		for range clients {
			total += <-answered
		}
		return total
	}
}

// TestAccessLogReopenAndReloadLoseNothing rotates the logs (mv, then USR1) and
// reloads under a stream of requests on several loops, then stops gracefully:
// every answered request has its line, in the old file or the new one, for an
// unbuffered log, a buffered one and a gzip one.
func TestAccessLogReopenAndReloadLoseNothing(t *testing.T) {
	addr := addrFor(t)
	in := startMain(t, "worker_processes 2;\n", `
  server {
    listen `+addr+`;
    access_log logs/plain.log;
    access_log logs/buf.log combined buffer=64k flush=1s;
    access_log logs/gz.log.gz combined gzip=5 flush=1s;
    location / { return 200 "ok\n"; }
  }`, addr)
	stop := loadClients(addr, 4)
	pause := func() { time.Sleep(300 * time.Millisecond) }
	pause()
	for _, f := range []string{"plain.log", "buf.log", "gz.log.gz"} {
		if err := os.Rename(in.path("logs/"+f), in.path("logs/"+f+".1")); err != nil {
			t.Fatal(err)
		}
	}
	pause() // lines keep going to the renamed files until the reopen
	in.signal("reopen")
	in.waitLog("logs reopened")
	pause()
	in.signal("reload")
	in.waitLog("configuration reloaded")
	pause()
	total := stop()
	in.signal("quit")
	if code := in.waitExit(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if total < 100 {
		t.Fatalf("only %d requests answered", total)
	}
	for _, f := range []string{"plain.log", "buf.log", "gz.log.gz"} {
		old, cur := in.path("logs/"+f+".1"), in.path("logs/"+f)
		if got := countLines(t, old, cur); got != total {
			data, _ := os.ReadFile(in.path("logs/error.log"))
			t.Errorf("%s: %d lines for %d requests; error log:\n%s", f, got, total, data)
		}
		if countLines(t, cur) == 0 {
			t.Errorf("%s: nothing written after the reopen", f)
		}
	}
}

// TestAccessLogStuckWriterNeverStallsTheLoop logs to a FIFO nobody reads, so the
// writer blocks as on a dead disk: every request is still answered at once, and the
// lines the writer could not take are dropped and counted (lines = written +
// dropped once the FIFO is drained), never silently lost.
func TestAccessLogStuckWriterNeverStallsTheLoop(t *testing.T) {
	// Not under logs/, whose files the harness reads at the end.
	dir := writeTree(t, map[string]string{"fifo/.keep": ""})
	fifo := filepath.Join(dir, "fifo/stuck.log")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A reader that holds the FIFO open without reading: numaproxy's open succeeds
	// and its writes block once the pipe's 64 KiB are full.
	rfd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	reader := os.NewFile(uintptr(rfd), fifo)
	addr := addrFor(t)
	cfg := "worker_processes 1;\nerror_log logs/error.log info;\nevents { }\nhttp {\n  server {\n    listen " + addr +
		";\n    access_log fifo/stuck.log;\n    location / { return 200 \"ok\\n\"; }\n  }\n}\n"
	if err := os.MkdirAll(filepath.Join(dir, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conf/numaproxy.conf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in := start(t, dir)
	waitFor(t, "numaproxy listening", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	// 2 KB lines, 8 MB in all: more than the pipe, the writer's queue and the
	// buffers a loop may have out with it.
	const requests = 4000
	c := keepAliveClient(nil)
	path := "/" + strings.Repeat("x", 2000)
	for i := range requests {
		start := time.Now()
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("request %d took %v: the loop waited for the log", i, d)
		}
	}
	// Drain the FIFO, then stop: the stats line at exit has the final counts.
	syscall.SetNonblock(rfd, false)
	read := make(chan int)
	go func() {
		data, _ := io.ReadAll(reader)
		reader.Close()
		read <- strings.Count(string(data), "\n")
	}()
	in.signal("quit")
	if code := in.waitExit(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	got := <-read
	stats := regexp.MustCompile(`access log, domain=0, lines=(\d+), written=(\d+), dropped=(\d+), failed=(\d+)`)
	data, _ := os.ReadFile(in.path("logs/error.log"))
	m := stats.FindStringSubmatch(string(data))
	if m == nil {
		t.Fatalf("no access log counters in the error log:\n%s", data)
	}
	lines, _ := strconv.Atoi(m[1])
	written, _ := strconv.Atoi(m[2])
	dropped, _ := strconv.Atoi(m[3])
	if lines != requests || written != got || written+dropped != lines || dropped == 0 {
		t.Fatalf("%d requests, %d lines read from the FIFO; counters: %s", requests, got, m[0])
	}
	t.Logf("%d requests: %d lines written, %d dropped", requests, written, dropped)
}

// syslogListener receives datagrams on UDP or a unix datagram socket.
func syslogListener(t *testing.T, network, addr string) (net.PacketConn, <-chan string) {
	t.Helper()
	pc, err := net.ListenPacket(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	ch := make(chan string, 100)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			ch <- string(buf[:n])
		}
	}()
	return pc, ch
}

func receive(t *testing.T, ch <-chan string, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case m := <-ch:
			out = append(out, m)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d syslog messages of %d: %q", len(out), n, out)
		}
	}
	return out
}

var maskSyslogTime = regexp.MustCompile(`^(<\d+>)\w{3} [ \d]\d \d\d:\d\d:\d\d `)

// TestAccessLogSyslogMatchesNginx sends access log lines to syslog over UDP and a
// unix datagram socket from both servers and compares the datagrams (RFC 3164
// header, tag, hostname or not, no line end) byte for byte, the time masked.
func TestAccessLogSyslogMatchesNginx(t *testing.T) {
	dir := t.TempDir()
	sockNP, sockNG := filepath.Join(dir, "np.sock"), filepath.Join(dir, "ng.sock")
	_, unixNP := syslogListener(t, "unixgram", sockNP)
	_, unixNG := syslogListener(t, "unixgram", sockNG)
	udpNPConn, udpNP := syslogListener(t, "udp", "127.0.0.1:0")
	udpNGConn, udpNG := syslogListener(t, "udp", "127.0.0.1:0")
	httpBlock := func(addr, udp, sock string) string {
		return `
  log_format plain '$request $status "$http_user_agent"';
  server {
    listen ` + addr + `;
    access_log syslog:server=` + udp + `,facility=local3,severity=notice,tag=front plain;
    access_log syslog:server=unix:` + sock + `,tag=nginx,nohostname;
    location / { return 200 "ok\n"; }
  }`
	}
	npAddr, ngAddr := addrFor(t), addrFor(t)
	startHTTP(t, httpBlock(npAddr, udpNPConn.LocalAddr().String(), sockNP), npAddr)
	startNginx(t, httpBlock(ngAddr, udpNGConn.LocalAddr().String(), sockNG), ngAddr)
	reqs := []string{
		"GET /one HTTP/1.1\r\nHost: t\r\nUser-Agent: a \"b\" caf\xc3\xa9\r\n\r\n",
		"GET /two?x=%0a HTTP/1.1\r\nHost: t\r\n\r\n",
	}
	for _, r := range reqs {
		sendCounting(t, npAddr, r, 1)
		sendCounting(t, ngAddr, r, 1)
	}
	for _, pair := range [][2]<-chan string{{udpNP, udpNG}, {unixNP, unixNG}} {
		np, ng := receive(t, pair[0], len(reqs)), receive(t, pair[1], len(reqs))
		for i := range np {
			a, b := maskSyslogTime.ReplaceAllString(np[i], "${1}TIME "), maskSyslogTime.ReplaceAllString(ng[i], "${1}TIME ")
			if a != b || a == np[i] {
				t.Errorf("message %d differs:\nnumaproxy %q\nnginx     %q", i, np[i], ng[i])
			}
		}
	}
}

// TestAccessLogVariablePaths logs to files named by variables, relative to the
// prefix, created 0644 as nginx creates them, with and without
// open_log_file_cache; a rotation (mv, USR1) makes cached files open again.
func TestAccessLogVariablePaths(t *testing.T) {
	addr := addrFor(t)
	in := startHTTP(t, `
  server {
    listen `+addr+`;
    access_log logs/by-host/$host.log;
    location /cached/ {
      open_log_file_cache max=2 inactive=20s min_uses=1 valid=1m;
      access_log logs/cached-$arg_n.log;
      return 200 "ok\n";
    }
    location / { return 200 "ok\n"; }
  }`, addr)
	c := keepAliveClient(nil)
	for i, host := range []string{"a.test", "b.test", "a.test", "A.Test"} {
		get(t, c, "http://"+addr+"/x"+strconv.Itoa(i), "Host", host)
	}
	for i := range 6 {
		get(t, c, "http://"+addr+"/cached/?n="+strconv.Itoa(i%3))
	}
	for name, want := range map[string]int{"by-host/a.test.log": 3, "by-host/b.test.log": 1, "cached-0.log": 2, "cached-1.log": 2, "cached-2.log": 2} {
		p := in.path("logs/" + name)
		readLines(t, p, want)
		if got := countLinesPlain(t, p); got != want {
			t.Errorf("%s: %d lines, want %d", name, got, want)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v %v, want mode 0644", name, st.Mode(), err)
		}
	}
	if err := os.Rename(in.path("logs/cached-0.log"), in.path("logs/cached-0.log.1")); err != nil {
		t.Fatal(err)
	}
	in.signal("reopen")
	in.waitLog("logs reopened")
	get(t, c, "http://"+addr+"/cached/?n=0")
	readLines(t, in.path("logs/cached-0.log"), 1)
	if got := countLinesPlain(t, in.path("logs/cached-0.log.1")); got != 2 {
		t.Errorf("the rotated file has %d lines, want 2", got)
	}
}

func countLinesPlain(t *testing.T, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// TestAccessLogBufferAndFlush: with buffer= a line waits in its loop's buffer
// (nginx writes it when the buffer is full); flush= writes it after that time
// without more traffic, by the loop's timer; a graceful stop writes what is left.
func TestAccessLogBufferAndFlush(t *testing.T) {
	addr := addrFor(t)
	in := startHTTP(t, `
  server {
    listen `+addr+`;
    access_log logs/held.log combined buffer=64k;
    access_log logs/flushed.log combined buffer=64k flush=1s;
    location / { return 200 "ok\n"; }
  }`, addr)
	sent := time.Now()
	get(t, keepAliveClient(nil), "http://"+addr+"/one")
	readLines(t, in.path("logs/flushed.log"), 1)
	if d := time.Since(sent); d < 900*time.Millisecond {
		t.Errorf("flush=1s wrote the line after %v", d)
	}
	if n := countLinesPlain(t, in.path("logs/held.log")); n != 0 {
		t.Errorf("buffer=64k without flush wrote %d lines before the buffer was full", n)
	}
	in.signal("quit")
	if code := in.waitExit(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if n := countLinesPlain(t, in.path("logs/held.log")); n != 1 {
		t.Errorf("%d lines at exit, want 1", n)
	}
}

// TestAccessLogReloadMovesTheLog reloads, under load, from one log file to another
// (buffered, so lines wait in the loops at the switch): each answered request has
// exactly one line, in the old file or the new one.
func TestAccessLogReloadMovesTheLog(t *testing.T) {
	addr := addrFor(t)
	conf := func(name string) string {
		return "worker_processes 2;\nerror_log logs/error.log info;\nevents { }\nhttp {\n  server {\n    listen " + addr +
			";\n    access_log logs/" + name + " combined buffer=32k;\n    location / { return 200 \"ok\\n\"; }\n  }\n}\n"
	}
	in := startMain(t, "worker_processes 2;\n", `
  server {
    listen `+addr+`;
    access_log logs/before.log combined buffer=32k;
    location / { return 200 "ok\n"; }
  }`, addr)
	stop := loadClients(addr, 3)
	time.Sleep(300 * time.Millisecond)
	if err := os.WriteFile(in.path("conf/numaproxy.conf"), []byte(conf("after.log")), 0o644); err != nil {
		t.Fatal(err)
	}
	in.signal("reload")
	in.waitLog("configuration reloaded")
	time.Sleep(300 * time.Millisecond)
	total := stop()
	in.signal("quit")
	if code := in.waitExit(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	before, after := countLines(t, in.path("logs/before.log")), countLines(t, in.path("logs/after.log"))
	if before+after != total || before == 0 || after == 0 {
		t.Fatalf("%d + %d lines for %d requests", before, after, total)
	}
}
