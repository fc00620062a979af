package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// load is a client load for the reload tests: keep-alive clients and clients that
// open a new connection per request, counting answers and failures.
type load struct {
	ok, failed atomic.Int64
	seen       sync.Map // body -> count, to see which configuration answered
	errs       chan error
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

func startLoad(t *testing.T, addr string, keepAlive, perRequest int) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, errs: make(chan error, 16)}
	record := func(body string, err error) {
		if err != nil {
			l.failed.Add(1)
			select {
			case l.errs <- err:
			default:
			}
			return
		}
		l.ok.Add(1)
		v, _ := l.seen.LoadOrStore(body, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	for i := 0; i < keepAlive; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			defer client.CloseIdleConnections()
			for ctx.Err() == nil {
				record(httpGet(client, "http://"+addr+"/"))
			}
		}()
	}
	for i := 0; i < perRequest; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				record(rawGetClose(addr))
			}
		}()
	}
	return l
}

// stop ends the load and reports failures.
func (l *load) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	close(l.errs)
	for err := range l.errs {
		t.Errorf("failed request: %v", err)
	}
}

func (l *load) count(body string) int64 {
	if v, ok := l.seen.Load(body); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func httpGet(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return string(body), nil
}

// rawGetClose does one request on a new connection with Connection: close.
func rawGetClose(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(body), nil
}

func routingConfig(port int, answer string) string {
	return fmt.Sprintf(`error_log logs/error.log info;
worker_processes 2;
events { }
http {
  server { listen 127.0.0.1:%d; location / { return 200 "%s"; } }
}
`, port, answer)
}

// TestReloadUnderLoad: 50 reloads alternating two configurations that answer
// differently, under keep-alive and connection-per-request load: no request fails
// and each reload takes effect.
func TestReloadUnderLoad(t *testing.T) {
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": routingConfig(port, "A")})
	in := start(t, dir)
	waitFor(t, "the server answering", 10*time.Second, func() bool { _, err := rawGetClose(addr); return err == nil })
	l := startLoad(t, addr, 4, 4)
	conf := in.path("conf/numaproxy.conf")
	for i := 1; i <= 50; i++ {
		answer := []string{"A", "B"}[i%2]
		if err := os.WriteFile(conf, []byte(routingConfig(port, answer)), 0o644); err != nil {
			t.Fatal(err)
		}
		before := l.count(answer)
		if err := in.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("reload %d answering %s", i, answer), 10*time.Second, func() bool { return l.count(answer) > before+10 })
	}
	l.stop(t)
	t.Logf("%d requests answered, %d failed, across 50 reloads", l.ok.Load(), l.failed.Load())
	if l.failed.Load() != 0 {
		t.Fatalf("%d requests failed", l.failed.Load())
	}
}

// TestBadReloadChangesNothing: a bad file on SIGHUP is logged with file:line and the
// old configuration keeps answering.
func TestBadReloadChangesNothing(t *testing.T) {
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": routingConfig(port, "old")})
	in := start(t, dir)
	waitFor(t, "the server answering", 10*time.Second, func() bool { b, err := rawGetClose(addr); return err == nil && b == "old" })
	conf := in.path("conf/numaproxy.conf")
	bad := strings.Replace(routingConfig(port, "new"), "location /", "locaton /", 1)
	if err := os.WriteFile(conf, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	in.cmd.Process.Signal(syscall.SIGHUP)
	in.waitLog(`unknown directive "locaton" in ` + conf + `:5`)
	in.waitLog("configuration not changed")
	for i := 0; i < 20; i++ {
		if b, err := rawGetClose(addr); err != nil || b != "old" {
			t.Fatalf("after a bad reload: %q, %v", b, err)
		}
	}
}

// TestTunnelSurvivesReloads: an upgraded connection opened before 10 reloads still
// passes bytes both ways after them.
func TestTunnelSurvivesReloads(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() { // an upstream that upgrades, then echoes
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				if _, err := http.ReadRequest(r); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
				io.Copy(c, r)
			}(c)
		}
	}()
	port := freePort(t)
	cfg := func(n int) string {
		return fmt.Sprintf(`error_log logs/error.log info;
events { }
http { server { listen 127.0.0.1:%d; location / {
  proxy_pass http://%s; proxy_http_version 1.1;
  proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade";
  add_header X-Generation %d;
} } }
`, port, up.Addr(), n)
	}
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": cfg(0)})
	in := start(t, dir)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var c net.Conn
	waitFor(t, "the server listening", 10*time.Second, func() bool {
		c, err = net.Dial("tcp", addr)
		return err == nil
	})
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	conf := in.path("conf/numaproxy.conf")
	for i := 1; i <= 10; i++ {
		os.WriteFile(conf, []byte(cfg(i)), 0o644)
		in.cmd.Process.Signal(syscall.SIGHUP)
		in.waitLog(fmt.Sprintf("configuration reloaded"))
		msg := fmt.Sprintf("message after reload %d\n", i)
		io.WriteString(c, msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, []byte(msg)) {
			t.Fatalf("after reload %d the tunnel echoed %q, %v", i, got, err)
		}
	}
}

// TestQuitDrainsSlowResponse: SIGQUIT lets a slow in-flight response finish, then
// the process exits.
func TestQuitDrainsSlowResponse(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	release, arrived := make(chan struct{}), make(chan struct{})
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
		close(arrived)
		<-release
		io.WriteString(c, "world")
	}()
	port := freePort(t)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": fmt.Sprintf(`error_log logs/error.log info;
worker_shutdown_timeout 30s;
events { }
http { server { listen 127.0.0.1:%d; location / { proxy_pass http://%s; } } }
`, port, up.Addr())})
	in := start(t, dir)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	waitFor(t, "the server listening", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	go func() { b, err := rawGetClose(addr); done <- result{b, err} }()
	<-arrived // the request is in flight, half answered
	in.signal("quit")
	in.waitLog("shutting down gracefully")
	// New connections are refused once the listeners are closed.
	waitFor(t, "new connections refused", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if !in.alive() {
		t.Fatal("exited with a response in flight")
	}
	close(release)
	r := <-done
	if r.err != nil || r.body != "helloworld" {
		t.Fatalf("in-flight response: %q, %v", r.body, r.err)
	}
	if code := in.waitExit(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestRemovedListenerResetsNothing: a reload removes a listen address while clients
// keep opening connections to it. Every connection the kernel accepted gets a whole
// response; the others are refused at connect. None is reset.
func TestRemovedListenerResetsNothing(t *testing.T) {
	keep, gone := freePort(t), freePort(t)
	cfg := func(withGone bool) string {
		s := fmt.Sprintf(`error_log logs/error.log info;
worker_processes 2;
events { }
http {
  server { listen 127.0.0.1:%d; location / { return 200 "kept"; } }
`, keep)
		if withGone {
			s += fmt.Sprintf("  server { listen 127.0.0.1:%d; location / { return 200 \"going\"; } }\n", gone)
		}
		return s + "}\n"
	}
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": cfg(true)})
	in := start(t, dir)
	goneAddr := "127.0.0.1:" + strconv.Itoa(gone)
	waitFor(t, "the server answering", 10*time.Second, func() bool { _, err := rawGetClose(goneAddr); return err == nil })

	var answered, refused, reset atomic.Int64
	var mu sync.Mutex
	var resets []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", goneAddr, 5*time.Second)
				if err != nil {
					refused.Add(1)
					continue
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				_, werr := io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
				resp, rerr := io.ReadAll(c)
				c.Close()
				if werr == nil && rerr == nil && bytes.HasPrefix(resp, []byte("HTTP/1.1 ")) && bytes.Contains(resp, []byte("\r\n\r\n")) {
					answered.Add(1)
					continue
				}
				reset.Add(1)
				mu.Lock()
				resets = append(resets, fmt.Sprintf("write %v, read %v, got %q", werr, rerr, resp))
				mu.Unlock()
			}
		}()
	}
	waitFor(t, "load on the address", 10*time.Second, func() bool { return answered.Load() > 100 })
	if err := os.WriteFile(in.path("conf/numaproxy.conf"), []byte(cfg(false)), 0o644); err != nil {
		t.Fatal(err)
	}
	in.cmd.Process.Signal(syscall.SIGHUP)
	in.waitLog("stopped listening, listen=" + goneAddr)
	waitFor(t, "connections refused after the removal", 10*time.Second, func() bool { return refused.Load() > 100 })
	close(stop)
	wg.Wait()
	t.Logf("connections answered %d, refused at connect %d, reset %d", answered.Load(), refused.Load(), reset.Load())
	if reset.Load() != 0 {
		t.Fatalf("%d accepted connections were reset, e.g. %v", reset.Load(), resets[0])
	}
	if b, err := rawGetClose("127.0.0.1:" + strconv.Itoa(keep)); err != nil || b != "kept" {
		t.Fatalf("the address that stays: %q, %v", b, err)
	}
}

// TestRemovedListenerServesQueued: connections wait in the accept queue of an address
// (the loop is at worker_connections) when a reload removes it; they are served once
// the loop has room, none is reset.
func TestRemovedListenerServesQueued(t *testing.T) {
	keep, gone := freePort(t), freePort(t)
	cfg := func(withGone bool) string {
		s := fmt.Sprintf(`error_log logs/error.log info;
worker_processes 1;
events { worker_connections 2; }
http {
  keepalive_timeout 60s;
  server { listen 127.0.0.1:%d; location / { return 200 "kept"; } }
`, keep)
		if withGone {
			s += fmt.Sprintf("  server { listen 127.0.0.1:%d; location / { return 200 \"going\"; } }\n", gone)
		}
		return s + "}\n"
	}
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": cfg(true)})
	in := start(t, dir)
	goneAddr := "127.0.0.1:" + strconv.Itoa(gone)
	// Two connections fill the loop, busy with a second request whose head has not
	// all arrived (idle ones would be closed to make room).
	var fillers []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", goneAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fillers = append(fillers, c)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("filling the loop: %v %v", resp, err)
		}
	}
	// These wait in the accept queue.
	const n = 10
	results := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			body, err := rawGetClose(goneAddr)
			if err == nil && body != "going" {
				err = fmt.Errorf("answer %q", body)
			}
			results <- err
		}()
	}
	waitFor(t, "connections queued", 10*time.Second, func() bool { return listenQueue(t, gone) >= n })
	if err := os.WriteFile(in.path("conf/numaproxy.conf"), []byte(cfg(false)), 0o644); err != nil {
		t.Fatal(err)
	}
	in.cmd.Process.Signal(syscall.SIGHUP)
	in.waitLog("configuration reloaded")
	// Room in the loop: the queued connections are accepted now, after the reload.
	for _, c := range fillers {
		c.Close()
	}
	for i := 0; i < n; i++ {
		if err := <-results; err != nil {
			t.Errorf("queued connection %d: %v", i, err)
		}
	}
	in.waitLog("stopped listening, listen=" + goneAddr)
	if _, err := net.Dial("tcp", goneAddr); err == nil {
		t.Fatal("the removed address still accepts")
	}
}

// listenQueue reads the accept queue length of the listener on port from ss(8)'s
// source, /proc/net/tcp: for a socket in LISTEN, rx_queue is the accept queue.
func listenQueue(t *testing.T, port int) int {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || f[3] != "0A" || !strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) {
			continue
		}
		q := strings.Split(f[4], ":")
		if v, err := strconv.ParseInt(q[1], 16, 64); err == nil {
			n += int(v)
		}
	}
	return n
}
