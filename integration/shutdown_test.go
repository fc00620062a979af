package integration

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A graceful stop closes idle connections on both sides at once: idle keep-alive
// clients and the loop's cached upstream keep-alive connections. Requests in flight
// finish with "Connection: close". The process then exits; worker_shutdown_timeout
// only bounds a request that does not finish.

// shutdownBackend answers /slow after a second (telling arrived first) and anything
// else at once; net/http keeps its connections alive.
func shutdownBackend(t *testing.T) (*backend, chan struct{}) {
	arrived := make(chan struct{}, 1)
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			time.Sleep(time.Second)
		} else {
			time.Sleep(50 * time.Millisecond) // concurrent requests overlap: one upstream connection each
		}
		io.WriteString(w, strings.TrimPrefix(r.URL.Path, "/"))
	})
	return be, arrived
}

// keepaliveBody is an http block proxying to be with upstream keep-alive connections
// that would stay cached for a minute.
func keepaliveBody(addr, be string) string {
	return `
  keepalive_timeout 60s;
  upstream be { server ` + be + `; keepalive 16; keepalive_timeout 60s; }
  server {
    listen ` + addr + `;
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }`
}

// warmIdle leaves n keep-alive clients idle after a request each, sent at the same
// time so that the proxy caches n upstream connections.
func warmIdle(t *testing.T, addr string, n int) []*client {
	t.Helper()
	idle := make([]*client, n)
	for i := range idle {
		idle[i] = newClient(t, addr)
		idle[i].send("GET /warm HTTP/1.1\r\nHost: t\r\n\r\n")
	}
	for i, cl := range idle {
		if resp, body := cl.read("GET"); resp.StatusCode != 200 || body != "warm" || resp.Close {
			t.Fatalf("idle client %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
		}
	}
	return idle
}

// quitWithKeepalive runs the scenario against a proxy on addr: idle keep-alive clients
// and cached upstream connections, a slow request in flight, then quit. It returns
// how long the process took to exit after the in-flight response ended.
func quitWithKeepalive(t *testing.T, addr string, be *backend, arrived chan struct{}, quit func(), gone func() bool) time.Duration {
	t.Helper()
	idle := warmIdle(t, addr, 4)
	if n := be.conns.Load(); n < 2 {
		t.Fatalf("the upstream saw %d connections; the test needs several cached", n)
	}
	slow := newClient(t, addr)
	slow.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
	select {
	case <-arrived:
	case <-time.After(ioTimeout):
		t.Fatal("the slow request did not reach the upstream")
	}
	quitAt := time.Now()
	quit()

	// The in-flight request is answered whole, with Connection: close, then closed.
	resp, body := slow.read("GET")
	answered := time.Now()
	if resp.StatusCode != 200 || body != "slow" || !resp.Close {
		t.Fatalf("in-flight response: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	slow.wantEOF()
	for _, cl := range idle {
		cl.wantEOF() // closed cleanly, nothing sent
	}
	deadline := time.Now().Add(15 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			t.Fatalf("still running %v after the in-flight response ended", time.Since(answered).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond)
	}
	exit := time.Since(answered)
	t.Logf("quit to response %v, response to exit %v", answered.Sub(quitAt).Round(time.Millisecond), exit.Round(time.Millisecond))
	return exit
}

// TestQuitClosesIdleKeepaliveAtOnce: with upstream keepalive_timeout 60s, QUIT used
// to wait for the cached upstream connections to time out (a minute) before the
// process exited. nginx, run on the same scenario, exits as soon as the in-flight
// request ends (measured here: 10-11 ms after the response, as numaproxy now).
func TestQuitClosesIdleKeepaliveAtOnce(t *testing.T) {
	const mainExtra = "worker_shutdown_timeout 30s;\n" // startNginx has worker_processes 1
	t.Run("numaproxy", func(t *testing.T) {
		be, arrived := shutdownBackend(t)
		addr := addrFor(t)
		in := startMain(t, "worker_processes 1;\n"+mainExtra, keepaliveBody(addr, be.Addr), addr)
		exit := quitWithKeepalive(t, addr, be, arrived, func() { in.signal("quit") }, in.gone)
		if exit > 5*time.Second {
			t.Errorf("exited %v after the last response, want at once", exit)
		}
	})
	t.Run("nginx", func(t *testing.T) {
		be, arrived := shutdownBackend(t)
		addr := addrFor(t)
		ng := startNginxMain(t, mainExtra, keepaliveBody(addr, be.Addr), addr)
		exit := quitWithKeepalive(t, addr, be, arrived, func() { ng.cmd.Process.Signal(syscall.SIGQUIT) }, ng.gone)
		if exit > 5*time.Second {
			t.Errorf("nginx exited %v after the last response", exit)
		}
	})
}

// gone reports whether the process has exited.
func (in *instance) gone() bool {
	select {
	case err := <-in.exited:
		in.exited <- err // for waitExit and Cleanup
		return true
	default:
		return false
	}
}

// gone reports whether the nginx master has exited (and was reaped).
func (ng *nginxInstance) gone() bool {
	return errors.Is(syscall.Kill(ng.cmd.Process.Pid, 0), syscall.ESRCH)
}

// TestRolloverClosesIdleUpstreamAtOnce: a reload that rolls the loops over retires
// the old loops like a QUIT retires the process: their cached upstream connections
// are closed at once instead of after the upstream's keepalive_timeout.
func TestRolloverClosesIdleUpstreamAtOnce(t *testing.T) {
	be, _ := shutdownBackend(t)
	addr := addrFor(t)
	in := startMain(t, "worker_processes 1;\n", keepaliveBody(addr, be.Addr), addr)
	idle := warmIdle(t, addr, 3)
	cached := be.conns.Load()
	if be.closed.Load() != 0 {
		t.Fatalf("upstream connections closed before the reload: %d of %d", be.closed.Load(), cached)
	}
	cfg, err := os.ReadFile(in.path("conf/numaproxy.conf"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "worker_processes 1;", "worker_processes 2;", 1))
	if err := os.WriteFile(in.path("conf/numaproxy.conf"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	reloaded := time.Now()
	in.signal("reload")
	in.waitLog("loops rolled over")
	for _, cl := range idle {
		cl.wantEOF()
	}
	waitFor(t, "the old loops' cached upstream connections closed", 10*time.Second, func() bool { return be.closed.Load() >= cached })
	t.Logf("%d cached upstream connections closed %v after the reload", cached, time.Since(reloaded).Round(time.Millisecond))
	// The new loops serve, with upstream keep-alive of their own.
	if resp, body := get(t, keepAliveClient(nil), "http://"+addr+"/after"); resp.StatusCode != 200 || body != "after" {
		t.Fatalf("after the rollover: %d %q", resp.StatusCode, body)
	}
}

// TestWinchClosesIdleUpstreamAtOnce: after a binary upgrade, WINCH retires the old
// binary's loops: its idle clients and cached upstream connections are closed at
// once, and it reports its connections finished without waiting for the upstream's
// keepalive_timeout.
func TestWinchClosesIdleUpstreamAtOnce(t *testing.T) {
	be, _ := shutdownBackend(t)
	addr := addrFor(t)
	in := startMain(t, "worker_processes 1;\n", keepaliveBody(addr, be.Addr), addr)
	idle := warmIdle(t, addr, 3)
	cached := be.conns.Load()
	if err := in.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	newPid := in.newBinary()
	winched := time.Now()
	if err := in.cmd.Process.Signal(syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	for _, cl := range idle {
		cl.wantEOF()
	}
	in.waitLog("old binary's connections finished")
	waitFor(t, "the old binary's cached upstream connections closed", 10*time.Second, func() bool { return be.closed.Load() >= cached })
	t.Logf("old binary drained %v after WINCH", time.Since(winched).Round(time.Millisecond))
	if resp, body := get(t, keepAliveClient(nil), "http://"+addr+"/new"); resp.StatusCode != 200 || body != "new" {
		t.Fatalf("the new binary: %d %q", resp.StatusCode, body)
	}
	quitNew(t, in, newPid)
	in.cmd.Process.Signal(syscall.SIGQUIT)
	if code := in.waitExit(); code != 0 {
		t.Fatalf("old binary exit code %d", code)
	}
}

// TestQuitShutdownTimeoutBounds: worker_shutdown_timeout still bounds a graceful
// stop whose request does not finish: the connection is closed and the process
// exits, as nginx does on the same configuration.
func TestQuitShutdownTimeoutBounds(t *testing.T) {
	const mainExtra = "worker_shutdown_timeout 1s;\n"
	scenario := func(t *testing.T, addr string, arrived chan struct{}, quit func(), gone func() bool) {
		idle := warmIdle(t, addr, 2)
		stuck := newClient(t, addr)
		stuck.send("GET /stuck HTTP/1.1\r\nHost: t\r\n\r\n")
		select {
		case <-arrived:
		case <-time.After(ioTimeout):
			t.Fatal("the request did not reach the upstream")
		}
		quitAt := time.Now()
		quit()
		for _, cl := range idle {
			cl.wantEOF()
		}
		stuck.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if rest, err := io.ReadAll(stuck.br); len(rest) > 0 || (err != nil && isTimeout(err)) {
			t.Fatalf("the stuck request: %q %v, want the connection closed without a response", rest, err)
		}
		closed := time.Since(quitAt)
		for !gone() {
			if time.Since(quitAt) > 15*time.Second {
				t.Fatal("still running 15 s after quit")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if closed < 900*time.Millisecond {
			t.Errorf("the stuck request was closed %v after quit, before worker_shutdown_timeout", closed)
		}
		t.Logf("stuck request closed %v after quit, exit %v after quit", closed.Round(time.Millisecond), time.Since(quitAt).Round(time.Millisecond))
	}
	upstreamFor := func(t *testing.T) (*backend, chan struct{}) {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		t.Cleanup(func() { close(release) })
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/stuck" {
				arrived <- struct{}{}
				<-release
				return
			}
			time.Sleep(50 * time.Millisecond)
			io.WriteString(w, "warm")
		})
		return be, arrived
	}
	t.Run("numaproxy", func(t *testing.T) {
		be, arrived := upstreamFor(t)
		addr := addrFor(t)
		in := startMain(t, "worker_processes 1;\n"+mainExtra, keepaliveBody(addr, be.Addr), addr)
		scenario(t, addr, arrived, func() { in.signal("quit") }, in.gone)
	})
	t.Run("nginx", func(t *testing.T) {
		be, arrived := upstreamFor(t)
		addr := addrFor(t)
		ng := startNginxMain(t, mainExtra, keepaliveBody(addr, be.Addr), addr)
		scenario(t, addr, arrived, func() { ng.cmd.Process.Signal(syscall.SIGQUIT) }, ng.gone)
	})
}
