package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stallMidBody answers each request head with a 200 of Content-Length 1000 and 100
// body bytes, then sends nothing more until the proxy gives up.
func stallMidBody(t *testing.T) *rawUpstream {
	return newRawUpstream(t, func(c net.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"+strings.Repeat("x", 100))
		io.Copy(io.Discard, c) // until the proxy closes
	})
}

// TestProxyReadTimeoutMidBody: an upstream that stalls in the middle of a body hits
// proxy_read_timeout; the client gets the head and the bytes that came, then a close
// (a truncated body must not look whole), and the proxy goes on serving; nginx, on the
// same configuration, closes too. Before the fix every such request logged a recovered
// panic (nil pointer in client.isHEAD via exchange.dropConn <- exchange.abort <-
// client.onClose <- client.close <- exchange.onTimeout).
func TestProxyReadTimeoutMidBody(t *testing.T) {
	t.Parallel()
	stall := stallMidBody(t)
	live := newBackend(t, nil)
	addr, ngAddr := addrFor(t), addrFor(t)
	body := func(listen string) string {
		return `
  server {
    listen ` + listen + `;
    proxy_read_timeout 1s;
    location /stall { proxy_pass http://` + stall.Addr + `; proxy_http_version 1.1; }
    location /live { proxy_pass http://` + live.Addr + `; }
  }`
	}
	in := startHTTP(t, body(addr), addr)
	ng := startNginx(t, body(ngAddr), ngAddr)

	for _, target := range []struct{ name, addr string }{{"numaproxy", addr}, {"nginx", ngAddr}} {
		t.Run(target.name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- truncatedThenClosed(target.addr)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			// Still serving, on a new connection and on a kept-alive one.
			cl := newClient(t, target.addr)
			for i := 0; i < 2; i++ {
				cl.send("GET /live HTTP/1.1\r\nHost: a\r\n\r\n")
				if resp, got := cl.read("GET"); resp.StatusCode != 200 || got != "ok" {
					t.Fatalf("after the timeouts: %d %q", resp.StatusCode, got)
				}
			}
		})
	}
	in.waitLog("upstream timed out while reading upstream")
	if log := ng.errorLog(); !strings.Contains(log, "upstream timed out") {
		t.Errorf("nginx logged no upstream timeout:\n%s", log)
	}
}

// truncatedThenClosed asks for /stall on a keep-alive connection and checks that the
// response is a 200 with at most the 100 bytes that came, followed by the connection
// closing, not before the timeout. numaproxy passes the 100 bytes on as they come;
// nginx 1.22 (proxy_buffering on) keeps them in its buffer and sends none.
func truncatedThenClosed(addr string) error {
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	start := time.Now()
	if _, err := io.WriteString(c, "GET /stall HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || resp.ContentLength != 1000 {
		return fmt.Errorf("want a 200 of length 1000, got %s of %d", resp.Status, resp.ContentLength)
	}
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) > 100 {
		return fmt.Errorf("the truncated body (%d bytes) was not ended by a close: %v", len(got), err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		return fmt.Errorf("closed after %v, before proxy_read_timeout 1s", d)
	}
	return nil
}

// flaky is an upstream whose behaviour a test switches: it answers 200 "ok", closes
// each connection without answering, sends a 1 MB response head, or never answers.
type flaky struct {
	*rawUpstream
	mode atomic.Int32
}

const (
	flakyHealthy = iota
	flakyClose
	flakyHugeHead
	flakySilent
)

func newFlaky(t *testing.T) *flaky {
	f := &flaky{}
	f.rawUpstream = newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			switch f.mode.Load() {
			case flakyClose:
				return
			case flakyHugeHead:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("b", 1<<20)+"\r\nContent-Length: 2\r\n\r\nok")
				return
			case flakySilent:
				io.Copy(io.Discard, br)
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return f
}

// statuses sends n requests for path on new connections and counts the statuses.
func statuses(t *testing.T, addr, path string, n int) map[int]int {
	t.Helper()
	got := map[int]int{}
	for i := 0; i < n; i++ {
		raw, err := roundTripRaw(t, addr, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatalf("request %d to %s: %v (%q)", i, path, err, raw)
		}
		got[parseResponses(t, raw, "GET")[0].StatusCode]++
	}
	return got
}

// TestProxyLoneServerNeverDown: a group of one server (proxy_pass host:port, or an
// upstream block with one server) ignores max_fails and fail_timeout, as nginx
// documents ("such a server will never be considered unavailable"): after 200
// requests it failed (closed without answering), 20 with a 1 MB header and 3 it never
// answered, the next 20 are served as soon as it is healthy. Before the fix the next
// 20 got 502 "no live upstreams" for 10 s. nginx on the same configuration: 20 of 20.
func TestProxyLoneServerNeverDown(t *testing.T) {
	t.Parallel()
	up := newFlaky(t)
	addr, ngAddr := addrFor(t), addrFor(t)
	body := func(listen string) string {
		return `
  upstream one { server ` + up.Addr + ` max_fails=3 fail_timeout=30s; }
  server {
    listen ` + listen + `;
    # Long enough that a busy machine never turns a close into a timeout (300ms
    # once made one of 200 closes a 504, for nginx too).
    proxy_read_timeout 1s;
    location /pass { proxy_pass http://` + up.Addr + `; }
    location /group { proxy_pass http://one; }
  }`
	}
	startHTTP(t, body(addr), addr)
	startNginx(t, body(ngAddr), ngAddr)
	for _, target := range []struct{ name, addr string }{{"numaproxy", addr}, {"nginx", ngAddr}} {
		for _, path := range []string{"/pass", "/group"} {
			t.Run(target.name+path, func(t *testing.T) {
				up.mode.Store(flakyClose)
				if got := statuses(t, target.addr, path, 200); got[502] != 200 {
					t.Fatalf("an upstream that closes: %v, want 200 × 502", got)
				}
				up.mode.Store(flakyHugeHead)
				if got := statuses(t, target.addr, path, 20); got[502] != 20 {
					t.Fatalf("an upstream with a 1 MB head: %v, want 20 × 502", got)
				}
				up.mode.Store(flakySilent)
				if got := statuses(t, target.addr, path, 3); got[504] != 3 {
					t.Fatalf("an upstream that never answers: %v, want 3 × 504", got)
				}
				up.mode.Store(flakyHealthy)
				if got := statuses(t, target.addr, path, 20); got[200] != 20 {
					t.Fatalf("healthy again: %v, want 20 × 200", got)
				}
			})
		}
	}
}

// freeFds is the number of descriptors below nofile that process pid can still
// open (one opened before the limit was lowered may lie above it).
func freeFds(t *testing.T, pid, nofile int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	free := nofile
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd < nofile {
			free--
		}
	}
	return free
}

// procSockets is the inodes of the sockets process pid holds.
func procSockets(t *testing.T, pid int) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if ino, ok := strings.CutPrefix(l, "socket:["); ok {
			out[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return out
}

// kernelSockets is what the kernel's socket tables list: each socket's inode, with
// a TCP socket's local and remote addresses and state as /proc/net/tcp spells them
// ("0100007F:1F90 0100007F:C350 01"), "" for a socket of another kind. A TCP socket
// neither listening nor connected (closed, or not yet connected) is in no table.
func kernelSockets(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6", "raw", "raw6", "unix", "netlink", "packet"} {
		data, err := os.ReadFile("/proc/net/" + table)
		if err != nil {
			continue // a protocol the kernel lacks
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		tcp := strings.HasPrefix(table, "tcp")
		inoCol := slices.Index(strings.Fields(lines[0]), "Inode")
		if tcp || strings.HasPrefix(table, "udp") || strings.HasPrefix(table, "raw") {
			inoCol = 9 // their headers spell two columns of the rows with four words
		}
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if inoCol < 0 || inoCol >= len(f) {
				t.Fatalf("/proc/net/%s: no inode column in %q", table, line)
			}
			if tcp {
				out[f[inoCol]] = f[1] + " " + f[2] + " " + f[3]
			} else {
				out[f[inoCol]] = ""
			}
		}
	}
	return out
}

// procNetAddr spells an IPv4 TCP address as /proc/net/tcp does.
func procNetAddr(t *testing.T, a net.Addr) string {
	t.Helper()
	ta := a.(*net.TCPAddr)
	ip := ta.IP.To4()
	if ip == nil {
		t.Fatalf("%v: IPv4 only", a)
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port) // host order: little-endian
}

// upstreamConnectEMFILE leaves the server process pid one free descriptor below its
// limit of nofile (idle client connections take the rest), sends a request whose
// connection takes that last one so that the socket() for the upstream fails with
// EMFILE, and returns the response's status. The idle connections close before it
// returns.
//
// The process's descriptors are counted only when it holds no socket of a
// connection being torn down: the client of an answer with "Connection: close"
// reads its end once numaproxy shut the socket down for writing, a moment before it
// closes it; counted then, that descriptor is freed by the close while an idle
// connection's accept takes one, and the count stays put. Each idle connection's
// accept is seen as its own socket held by the process, not as a count going down.
func upstreamConnectEMFILE(t *testing.T, addr, path string, pid, nofile int) int {
	t.Helper()
	idle := map[string]net.Conn{} // by the inode of the process's end
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// unsettled is the sockets the process holds other than listeners, accepted
	// idle connections and sockets of other kinds than TCP.
	unsettled := func() []string {
		kernel := kernelSockets(t)
		var out []string
		for ino := range procSockets(t, pid) {
			st, listed := kernel[ino]
			if !listed || st != "" && !strings.HasSuffix(st, " 0A") && idle[ino] == nil {
				out = append(out, fmt.Sprintf("socket:[%s] %q", ino, st))
			}
		}
		return out
	}
	for {
		// Generous: the timeouts bound waits of a moment on a loaded machine.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			left := unsettled()
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the connections of earlier requests not closed: the process holds %v", left)
			}
		}
		if freeFds(t, pid, nofile) <= 1 {
			break
		}
		c := dial(t, addr)
		local, remote := procNetAddr(t, c.RemoteAddr()), procNetAddr(t, c.LocalAddr())
		waitFor(t, "the idle connection accepted", 30*time.Second, func() bool {
			held := procSockets(t, pid)
			for ino, st := range kernelSockets(t) {
				if held[ino] && strings.HasPrefix(st, local+" "+remote+" ") {
					idle[ino] = c
					return true
				}
			}
			return false
		})
	}
	if n := freeFds(t, pid, nofile); n != 1 {
		t.Fatalf("%d free descriptors, want 1", n)
	}
	raw, err := roundTripRaw(t, addr, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if err != nil {
		t.Fatalf("%v (%q)", err, raw)
	}
	return parseResponses(t, raw, "GET")[0].StatusCode
}

// TestProxyUpstreamEMFILE: running out of descriptors for the upstream socket is the
// proxy's own trouble, not the servers': that request fails with nginx's status for a
// failed socket() (500, "socket() failed (24: Too many open files) while connecting
// to upstream" at alert level) and the servers' state is unchanged, so the next
// requests are served. Before the fix the EMFILE marked both servers failed and the
// next requests got 502 "no live upstreams" for fail_timeout.
func TestProxyUpstreamEMFILE(t *testing.T) {
	t.Parallel()
	a, b := newBackend(t, nil), newBackend(t, nil)
	const nofile = 64
	addr, ngAddr := addrFor(t), addrFor(t)
	body := func(listen string) string {
		return `
  upstream two { server ` + a.Addr + `; server ` + b.Addr + `; }
  server {
    listen ` + listen + `;
    location / { proxy_pass http://two; }
  }`
	}
	main := "worker_rlimit_nofile " + strconv.Itoa(nofile) + ";\n"
	in := startMain(t, "worker_processes 1;\n"+main, body(addr), addr)
	ng := startNginxMain(t, main, body(ngAddr), ngAddr)
	for _, target := range []struct {
		name, addr string
		pid        int
		log        func() string
	}{
		{"numaproxy", addr, in.cmd.Process.Pid, func() string { return readFile(t, in.path("logs/error.log")) }},
		{"nginx", ngAddr, ng.worker(t), ng.errorLog},
	} {
		t.Run(target.name, func(t *testing.T) {
			if got := statuses(t, target.addr, "/", 2); got[200] != 2 {
				t.Fatalf("before: %v", got)
			}
			if got := upstreamConnectEMFILE(t, target.addr, "/", target.pid, nofile); got != 500 {
				t.Errorf("the request whose upstream socket() failed: %d, want 500", got)
			}
			if log := target.log(); !strings.Contains(log, "[alert]") || !strings.Contains(log, "socket() failed (24: Too many open files) while connecting to upstream") {
				t.Errorf("no alert about socket() in the log:\n%s", log)
			}
			waitFor(t, "the idle connections closed", 30*time.Second, func() bool { return freeFds(t, target.pid, nofile) > 8 })
			if got := statuses(t, target.addr, "/", 20); got[200] != 20 {
				t.Errorf("after the EMFILE: %v, want 20 × 200", got)
			}
		})
	}
}

// side is one proxy of a side-by-side test, numaproxy or nginx, and its upstreams.
type side struct {
	name, addr string
	log        func() string
	ups        []*flaky
}

// sideBySide starts numaproxy and nginx on the http block that body makes from a
// listen address and the addresses of n flaky upstreams of each one's own.
func sideBySide(t *testing.T, n int, body func(listen string, ups []string) string) []*side {
	t.Helper()
	var out []*side
	for _, name := range []string{"numaproxy", "nginx"} {
		tg := &side{name: name, addr: addrFor(t)}
		var addrs []string
		for i := 0; i < n; i++ {
			f := newFlaky(t)
			tg.ups = append(tg.ups, f)
			addrs = append(addrs, f.Addr)
		}
		if name == "numaproxy" {
			in := startHTTP(t, body(tg.addr, addrs), tg.addr)
			tg.log = func() string { return readFile(t, in.path("logs/error.log")) }
		} else {
			ng := startNginx(t, body(tg.addr, addrs), tg.addr)
			tg.log = ng.errorLog
		}
		out = append(out, tg)
	}
	return out
}

// accepted is the connections each upstream accepted so far.
func (tg *side) accepted() []int64 {
	var n []int64
	for _, u := range tg.ups {
		n = append(n, u.accepted.Load())
	}
	return n
}

// TestProxyAllServersDown: when every server of a group failed, requests get 502
// "no live upstreams" without reaching them until fail_timeout passes; then each
// server is probed and, healthy again, serves. This is nginx 1.22's behaviour, run
// side by side: it no longer resets the failures of an all-down group ("quick
// recovery", removed in nginx 1.11.10), so neither does numaproxy.
func TestProxyAllServersDown(t *testing.T) {
	t.Parallel()
	targets := sideBySide(t, 2, func(listen string, ups []string) string {
		return `
  upstream pair { server ` + ups[0] + ` fail_timeout=1s; server ` + ups[1] + ` fail_timeout=1s; }
  server { listen ` + listen + `; location / { proxy_pass http://pair; } }`
	})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			for _, u := range tg.ups {
				u.mode.Store(flakyClose)
			}
			// One request tries both servers; both fail.
			if got := statuses(t, tg.addr, "/", 1); got[502] != 1 {
				t.Fatalf("both servers close: %v, want 502", got)
			}
			for _, u := range tg.ups {
				u.mode.Store(flakyHealthy)
			}
			before := tg.accepted()
			if got := statuses(t, tg.addr, "/", 5); got[502] != 5 {
				t.Fatalf("within fail_timeout: %v, want 5 × 502", got)
			}
			if after := tg.accepted(); after[0] != before[0] || after[1] != before[1] {
				t.Fatalf("a resting server was connected to: %v then %v", before, after)
			}
			if !strings.Contains(tg.log(), "no live upstreams") {
				t.Errorf("no \"no live upstreams\" in the log:\n%s", tg.log())
			}
			// nginx counts fail_timeout in whole seconds: back within 1 to 2 s.
			waitFor(t, "a server back after fail_timeout", 5*time.Second, func() bool {
				return statuses(t, tg.addr, "/", 1)[200] == 1
			})
			if got := statuses(t, tg.addr, "/", 20); got[200] != 20 {
				t.Fatalf("after fail_timeout: %v, want 20 × 200", got)
			}
		})
	}
}

// TestProxyBackupServers: with a backup the primary is not a lone server: its
// failure counts, the backup serves while it rests, and after fail_timeout the
// primary is probed and takes over again, the same with nginx. When the backup fails
// too the group is all down: 502 "no live upstreams".
func TestProxyBackupServers(t *testing.T) {
	t.Parallel()
	targets := sideBySide(t, 2, func(listen string, ups []string) string {
		return `
  upstream withbackup { server ` + ups[0] + ` fail_timeout=1s; server ` + ups[1] + ` backup fail_timeout=1s; }
  server { listen ` + listen + `; location / { proxy_pass http://withbackup; } }`
	})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			primary := tg.ups[0]
			primary.mode.Store(flakyClose)
			if got := statuses(t, tg.addr, "/", 1); got[200] != 1 {
				t.Fatalf("the primary closes, the backup answers: %v, want 200", got)
			}
			primary.mode.Store(flakyHealthy)
			before := tg.accepted()
			if got := statuses(t, tg.addr, "/", 10); got[200] != 10 {
				t.Fatalf("while the primary rests: %v, want 10 × 200", got)
			}
			if after := tg.accepted(); after[0] != before[0] || after[1] != before[1]+10 {
				t.Fatalf("connections %v then %v: want all 10 on the backup", before, after)
			}
			waitFor(t, "the primary back after fail_timeout", 5*time.Second, func() bool {
				n := primary.accepted.Load()
				statuses(t, tg.addr, "/", 1)
				return primary.accepted.Load() > n
			})
			before = tg.accepted()
			if got := statuses(t, tg.addr, "/", 10); got[200] != 10 {
				t.Fatalf("primary back: %v", got)
			}
			if after := tg.accepted(); after[0] != before[0]+10 {
				t.Fatalf("connections %v then %v: want all 10 on the primary", before, after)
			}
			// Both fail: the group is all down.
			primary.mode.Store(flakyClose)
			tg.ups[1].mode.Store(flakyClose)
			if got := statuses(t, tg.addr, "/", 1); got[502] != 1 {
				t.Fatalf("primary and backup close: %v", got)
			}
			primary.mode.Store(flakyHealthy)
			tg.ups[1].mode.Store(flakyHealthy)
			if got := statuses(t, tg.addr, "/", 3); got[502] != 3 {
				t.Fatalf("primary and backup rest: %v, want 3 × 502", got)
			}
		})
	}
}

// TestProxyBackupOnlyGroupRefused: an upstream of backup servers only is a
// configuration error, as nginx's "no servers in upstream".
func TestProxyBackupOnlyGroupRefused(t *testing.T) {
	t.Parallel()
	body := "upstream b { server 127.0.0.1:1 backup; }\nserver { listen 127.0.0.1:" + strconv.Itoa(freePort(t)) + "; location / { proxy_pass http://b; } }"
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "events { }\nhttp {\n" + body + "\n}\n"})
	if r := run(t, "-p", dir, "-t"); r.code != 1 || !strings.Contains(r.stderr, "backup") {
		t.Fatalf("numaproxy -t: %+v", r)
	}
	bin := nginxBinary(t)
	ndir := writeTree(t, map[string]string{"conf/nginx.conf": "events { }\nhttp {\n" + body + "\n}\n", "logs/.keep": ""})
	out, err := exec.Command(bin, "-t", "-p", ndir+"/", "-c", filepath.Join(ndir, "conf/nginx.conf"), "-e", filepath.Join(ndir, "logs/error.log")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no servers in upstream") {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

// TestProxyFailTimeoutWindow: max_fails counts the failures within fail_timeout, as
// nginx documents, even with successes between them: a success clears the count
// only once fail_timeout has passed since the last failure (nginx's "accessed" and
// "checked"). Failure, success, failure with max_fails=2 rests the server; before
// the fix the success cleared the count and the server went on taking requests.
func TestProxyFailTimeoutWindow(t *testing.T) {
	t.Parallel()
	targets := sideBySide(t, 2, func(listen string, ups []string) string {
		return `
  upstream g { server ` + ups[0] + ` max_fails=2 fail_timeout=30s; server ` + ups[1] + `; }
  server { listen ` + listen + `; location / { proxy_pass http://g; } }`
	})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			f := tg.ups[0]
			// until sends requests until f took one more connection.
			until := func(what string) {
				n := f.accepted.Load()
				for i := 0; f.accepted.Load() == n; i++ {
					if i == 20 {
						t.Fatalf("%s: the server got no request in 20", what)
					}
					if got := statuses(t, tg.addr, "/", 1); got[200] != 1 {
						t.Fatalf("%s: %v", what, got)
					}
				}
			}
			f.mode.Store(flakyClose)
			until("first failure")
			f.mode.Store(flakyHealthy)
			until("a success")
			f.mode.Store(flakyClose)
			until("second failure")
			f.mode.Store(flakyHealthy)
			n := f.accepted.Load()
			if got := statuses(t, tg.addr, "/", 10); got[200] != 10 {
				t.Fatalf("%v", got)
			}
			if got := f.accepted.Load() - n; got != 0 {
				t.Fatalf("after two failures within fail_timeout the server took %d of 10 requests, want 0", got)
			}
		})
	}
}
