package eventloop

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/numa"
)

func TestMain(m *testing.M) {
	// Open the Go runtime's own netpoller fds once, so fd counts taken by the
	// tests see only what the loops open and close.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		_ = ln.Close()
	}
	if os.Getenv(emfileChildEnv) != "" {
		os.Exit(emfileChild())
	}
	os.Exit(m.Run())
}

// funcHandler is a Handler made of optional funcs; OnTimeout closes by default.
type funcHandler struct {
	open     func(c Conn)
	data     func(c Conn, b []byte)
	blocked  func(c Conn)
	writable func(c Conn)
	timeout  func(c Conn)
	close    func(c Conn, err error)
}

func (h *funcHandler) OnOpen(c Conn) {
	if h.open != nil {
		h.open(c)
	}
}

func (h *funcHandler) OnData(c Conn, b []byte) {
	if h.data != nil {
		h.data(c, b)
	}
}

func (h *funcHandler) OnWriteBlocked(c Conn) {
	if h.blocked != nil {
		h.blocked(c)
	}
}

func (h *funcHandler) OnWritable(c Conn) {
	if h.writable != nil {
		h.writable(c)
	}
}

func (h *funcHandler) OnTimeout(c Conn) {
	if h.timeout != nil {
		h.timeout(c)
		return
	}
	_ = c.Close()
}

func (h *funcHandler) OnClose(c Conn, err error) {
	if h.close != nil {
		h.close(c, err)
	}
}

func echoHandler() *funcHandler {
	return &funcHandler{data: func(c Conn, b []byte) { _, _ = c.Write(b) }}
}

// testLogger logs through t.Log and counts lines, so panics logged by a loop show up in the test.
type logCounter struct {
	mu    sync.Mutex
	lines []string
}

func (w *logCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, string(bytes.TrimSpace(p)))
	return len(p), nil
}

func (w *logCounter) count(substr string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if bytes.Contains([]byte(l), []byte(substr)) {
			n++
		}
	}
	return n
}

func newLogger() (*slog.Logger, *logCounter) {
	w := &logCounter{}
	return slog.New(slog.NewTextHandler(w, nil)), w
}

// startLoop starts a loop on the first allowed CPU with a listener on a free
// loopback port; cleanup stops it and waits.
func startLoop(t testing.TB, cfg Config) (*Loop, string) {
	t.Helper()
	return startLoopListening(t, cfg, ListenOptions{})
}

// startLoopListening is startLoop with the listener's socket options.
func startLoopListening(t testing.TB, cfg Config, opts ListenOptions) (*Loop, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger, _ = newLogger()
	}
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CPU != -1 && !allowed.Has(cfg.CPU) {
		cfg.CPU = allowed.CPUs()[0]
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ListenWith(netip.MustParseAddrPort("127.0.0.1:0"), opts)
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
		_ = l.Stop()
		waitDone(t, l.Done())
	})
	return l, ln.Addr().String()
}

// onLoop runs fn on the loop's thread and waits for it.
func onLoop(t testing.TB, l *Loop, fn func()) {
	t.Helper()
	done := make(chan struct{})
	if err := l.Run(func() { defer close(done); fn() }); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done)
}

func waitDone(t testing.TB, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting")
	}
}

// waitFor polls cond until it holds; the deadline only bounds a failing test.
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

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// roundTrip writes msg and reads the same number of bytes back.
func roundTrip(t testing.TB, c net.Conn, msg string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read echo: %v", err)
	}
	return string(buf)
}

// expectClosed checks the peer closed c: EOF or a reset, no more data.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if err == nil {
		t.Fatalf("read %q, want EOF or reset", buf[:n])
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection still open")
	}
}

func countFds(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // the directory's own fd
}

// recv waits for a value on ch; the deadline only bounds a failing test.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for a value")
	}
	panic("unreachable")
}
