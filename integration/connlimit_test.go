package integration

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// A loop short of connections (worker_connections) or of fds (RLIMIT_NOFILE) closes
// its oldest idle keep-alive connections to serve new clients, instead of leaving
// them unanswered in the accept queue while idle clients hold every slot.

// idleClients leaves n keep-alive clients idle after one request each, oldest first.
func idleClients(t *testing.T, addr string, n int) []*client {
	t.Helper()
	cls := make([]*client, n)
	for i := range cls {
		cls[i] = newClient(t, addr)
		cls[i].send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
		if resp, body := cls[i].read("GET"); resp.StatusCode != 200 || body != "ok" || resp.Close {
			t.Fatalf("client %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
		}
	}
	return cls
}

// closedPrefix checks that the clients the server closed (cleanly: EOF) are the
// oldest ones, and returns how many it closed.
func closedPrefix(t *testing.T, cls []*client) int {
	t.Helper()
	closed := 0
	for closed < len(cls) && isClosedClean(t, cls[closed]) {
		closed++
	}
	for i := closed; i < len(cls); i++ {
		if isClosedClean(t, cls[i]) {
			t.Fatalf("client %d was closed while client %d, older, is open", i, closed)
		}
	}
	return closed
}

// isClosedClean reports whether the server closed the connection with a FIN and
// nothing more; a reset or stray bytes fail the test.
func isClosedClean(t *testing.T, cl *client) bool {
	t.Helper()
	cl.c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	b, err := cl.br.Peek(1)
	switch {
	case err == io.EOF:
		return true
	case isTimeout(err):
		return false
	}
	t.Fatalf("want a clean close or an idle connection, got %q %v", b, err)
	return false
}

// TestConnLimitReusesIdle: with worker_connections 64 held by idle keep-alive
// clients, a new client used to wait unanswered (numaproxy stopped accepting at the
// bound). nginx, run on the same configuration, closes its oldest idle connections
// to make room (ngx_drain_connections); numaproxy now does the same.
func TestConnLimitReusesIdle(t *testing.T) {
	const limit = 64
	body := func(addr string) string {
		return "  keepalive_timeout 60s;\n  server { listen " + addr + "; location / { return 200 ok; } }"
	}
	// scenario fills the limit with idle clients, then serves a new one; it returns
	// how many of the idle clients the server closed.
	scenario := func(t *testing.T, addr string) int {
		idle := idleClients(t, addr, limit)
		fresh := newClient(t, addr)
		fresh.send("GET /new HTTP/1.1\r\nHost: t\r\n\r\n")
		if resp, b := fresh.read("GET"); resp.StatusCode != 200 || b != "ok" {
			t.Fatalf("the new client: %d %q", resp.StatusCode, b)
		}
		closed := closedPrefix(t, idle)
		if closed == 0 {
			t.Fatal("no idle client was closed to make room")
		}
		idle[0].wantEOF()
		idle[limit-1].send("GET /again HTTP/1.1\r\nHost: t\r\n\r\n")
		if resp, b := idle[limit-1].read("GET"); resp.StatusCode != 200 || b != "ok" {
			t.Fatalf("the newest idle client: %d %q", resp.StatusCode, b)
		}
		return closed
	}
	const reusing = "64 worker_connections are not enough, reusing connections"
	t.Run("numaproxy", func(t *testing.T) {
		addr := addrFor(t)
		in := startMain(t, "worker_processes 1;\n"+"events { worker_connections 64; }\n", body(addr), addr)
		closed := scenario(t, addr)
		// An eighth of the idle ones at a time, as nginx: 8 of 64.
		if closed != limit/8 {
			t.Errorf("%d idle clients closed, want %d", closed, limit/8)
		}
		in.waitLog(reusing)
		t.Logf("numaproxy closed the %d oldest idle clients", closed)
	})
	t.Run("nginx", func(t *testing.T) {
		addr := addrFor(t)
		ng := startNginxMain(t, "events { worker_connections 64; }\n", body(addr), addr)
		closed := scenario(t, addr)
		// nginx's listener and channel to its master take connections too, and it
		// starts closing idle ones when less than a sixteenth are free.
		if !strings.Contains(ng.errorLog(), reusing) {
			t.Errorf("nginx did not log %q:\n%s", reusing, ng.errorLog())
		}
		t.Logf("nginx closed the %d oldest idle clients", closed)
	})
}

// TestProxyEMFILEReusesIdle: out of fds (worker_rlimit_nofile), new clients used to wait
// unanswered while idle keep-alive clients held every fd, and the failure was logged
// at warn, below the default error_log level. Now the oldest idle connections are
// closed and the accept retried (nginx does not: it stops accepting until a
// connection closes), and "accept4() failed (24: Too many open files)" is logged at
// crit, once a second at most.
func TestProxyEMFILEReusesIdle(t *testing.T) {
	addr := addrFor(t)
	// About 25 fds are in use before any client (runtime, epoll, BPF steering, logs).
	in := startMain(t, "worker_processes 1;\nworker_rlimit_nofile 64;\n",
		"  keepalive_timeout 60s;\n  server { listen "+addr+"; location / { return 200 ok; } }", addr)
	const total = 120
	start := time.Now()
	cls := idleClients(t, addr, total)
	elapsed := time.Since(start)
	closed := closedPrefix(t, cls)
	if closed < total-64 {
		t.Fatalf("%d of %d clients open under a 64 fd limit", total-closed, total)
	}
	const line = "accept4() failed (24: Too many open files), reusing connections"
	in.waitLog(line)
	data, _ := os.ReadFile(in.path("logs/error.log"))
	n := strings.Count(string(data), line)
	if n > int(elapsed/time.Second)+2 {
		t.Errorf("%d EMFILE lines in %v: want one a second at most\n%s", n, elapsed, data)
	}
	if !strings.Contains(string(data), "[crit]") {
		t.Errorf("the EMFILE line is not at crit:\n%s", data)
	}
	t.Logf("%d clients served in %v, %d oldest idle closed, %d EMFILE log lines", total, elapsed.Round(time.Millisecond), closed, n)
}
