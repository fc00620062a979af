package tls

import (
	stdtls "crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/numa"
	"github.com/numaproxy/numaproxy/tls/tlstest"
)

// certs are made once per test binary: RSA keys take a while.
var (
	certsOnce sync.Once
	testCA    *tlstest.CA
	leafEC    *tlstest.Leaf // ECDSA, a.example and 127.0.0.1
	leafRSA   *tlstest.Leaf // RSA, a.example and 127.0.0.1
	leafB     *tlstest.Leaf // ECDSA, b.example
	certsErr  error
)

func certs(t testing.TB) {
	t.Helper()
	certsOnce.Do(func() {
		if testCA, certsErr = tlstest.NewCA(); certsErr != nil {
			return
		}
		if leafEC, certsErr = testCA.Issue(tlstest.ECDSA, "a.example", "127.0.0.1"); certsErr != nil {
			return
		}
		if leafRSA, certsErr = testCA.Issue(tlstest.RSA, "a.example", "127.0.0.1"); certsErr != nil {
			return
		}
		leafB, certsErr = testCA.Issue(tlstest.ECDSA, "b.example")
	})
	if certsErr != nil {
		t.Fatal(certsErr)
	}
}

// serverConfig is a ServerConfig with the given leaves and shared ticket keys.
func serverConfig(t testing.TB, leaves ...*tlstest.Leaf) *ServerConfig {
	t.Helper()
	cfg := &stdtls.Config{MinVersion: stdtls.VersionTLS12}
	for _, l := range leaves {
		cfg.Certificates = append(cfg.Certificates, l.TLS)
	}
	cfg.SetSessionTicketKeys([][32]byte{{1, 2, 3}})
	return &ServerConfig{TLS: cfg}
}

// staticRouter serves every address with def, and names from byName.
type staticRouter struct {
	def    *ServerConfig
	byName map[string]*ServerConfig
}

func (r *staticRouter) Default(netip.AddrPort) *ServerConfig { return r.def }
func (r *staticRouter) ByName(_ netip.AddrPort, name string) *ServerConfig {
	return r.byName[name]
}

// funcHandler is an eventloop.Handler of optional funcs.
type funcHandler struct {
	open     func(c eventloop.Conn)
	data     func(c eventloop.Conn, b []byte)
	blocked  func(c eventloop.Conn)
	writable func(c eventloop.Conn)
	timeout  func(c eventloop.Conn)
	close    func(c eventloop.Conn, err error)
}

func (h *funcHandler) OnOpen(c eventloop.Conn) {
	if h.open != nil {
		h.open(c)
	}
}
func (h *funcHandler) OnData(c eventloop.Conn, b []byte) {
	if h.data != nil {
		h.data(c, b)
	}
}
func (h *funcHandler) OnWriteBlocked(c eventloop.Conn) {
	if h.blocked != nil {
		h.blocked(c)
	}
}
func (h *funcHandler) OnWritable(c eventloop.Conn) {
	if h.writable != nil {
		h.writable(c)
	}
}
func (h *funcHandler) OnTimeout(c eventloop.Conn) {
	if h.timeout != nil {
		h.timeout(c)
		return
	}
	c.Close()
}
func (h *funcHandler) OnClose(c eventloop.Conn, err error) {
	if h.close != nil {
		h.close(c, err)
	}
}

func echoHandler() *funcHandler {
	return &funcHandler{data: func(c eventloop.Conn, b []byte) { c.Write(b) }}
}

type testServer struct {
	loop  *eventloop.Loop
	layer *Layer
	addr  string
	logs  *logLines
}

type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (w *logLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *logLines) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// startServer runs a loop on the first allowed CPU with a Layer around inner.
func startServer(t testing.TB, r Router, opts Options, inner eventloop.Handler) *testServer {
	t.Helper()
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	layer := NewLayer(inner, r, opts)
	logs := &logLines{}
	l, err := eventloop.New(eventloop.Config{CPU: allowed.CPUs()[0], Handler: layer,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := eventloop.Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddListener(ln); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Stop()
		select {
		case <-l.Done():
		case <-time.After(20 * time.Second):
			t.Error("loop did not stop")
		}
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("loop log:\n%s", strings.Join(logs.lines, "\n"))
			logs.mu.Unlock()
		}
		if n := logs.count("panic"); n > 0 {
			t.Errorf("%d panics logged:\n%s", n, strings.Join(logs.lines, "\n"))
		}
	})
	return &testServer{loop: l, layer: layer, addr: ln.Addr().String(), logs: logs}
}

// onLoop runs fn on the loop and waits.
func (s *testServer) onLoop(t testing.TB, fn func()) {
	t.Helper()
	done := make(chan struct{})
	if err := s.loop.Run(func() { defer close(done); fn() }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("loop task did not run")
	}
}

func clientConfig(pool *x509.CertPool, name string) *stdtls.Config {
	return &stdtls.Config{RootCAs: pool, ServerName: name}
}

func dialTLS(t testing.TB, addr string, cfg *stdtls.Config) *stdtls.Conn {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := stdtls.Client(raw, cfg)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if err := c.Handshake(); err != nil {
		c.Close()
		t.Fatalf("handshake: %v", err)
	}
	return c
}

func echo(t testing.TB, c net.Conn, msg []byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	errc := make(chan error, 1)
	go func() { _, err := c.Write(msg); errc <- err }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if string(got) != string(msg) {
		t.Fatalf("echo differs (%d bytes)", len(msg))
	}
}

// waitFor polls cond; the deadline only bounds a failing test.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdConn passes the first write (the ClientHello) and reads through, then
// keeps writes until flush: the client's TLS 1.3 Finished and its first request
// leave in one segment.
type holdConn struct {
	net.Conn
	mu       sync.Mutex
	writes   int
	buf      []byte
	released bool // flush(-1) was called: writes pass again
}

func (h *holdConn) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes++
	if h.writes > 1 && !h.released {
		h.buf = append(h.buf, p...)
		return len(p), nil
	}
	return h.Conn.Write(p)
}

// flush sends n held bytes; n < 0 sends all and stops holding.
func (h *holdConn) flush(n int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n < 0 {
		n, h.released = len(h.buf), true
	}
	n = min(n, len(h.buf))
	_, err := h.Conn.Write(h.buf[:n])
	h.buf = h.buf[n:]
	return err
}

// dialHeld makes a TLS 1.3 client whose Finished is held until flush.
func dialHeld(t testing.TB, addr string, cfg *stdtls.Config) (*stdtls.Conn, *holdConn) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hc := &holdConn{Conn: raw}
	cfg.MinVersion = stdtls.VersionTLS13
	c := stdtls.Client(hc, cfg)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	return c, hc
}
