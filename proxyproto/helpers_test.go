package proxyproto

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// logRecorder keeps the messages a loop logs.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	r.mu.Lock()
	r.msgs = append(r.msgs, line)
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// has reports whether a logged line contains s.
func (r *logRecorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// funcHandler is an eventloop.Handler of optional funcs; OnTimeout closes by default.
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
	_ = c.Close()
}
func (h *funcHandler) OnClose(c eventloop.Conn, err error) {
	if h.close != nil {
		h.close(c, err)
	}
}

// reporter is an HTTP-ish inner handler: it reads a request head and answers
// with the addresses it saw, then closes.
func reporter() *funcHandler {
	type state struct{ buf []byte }
	return &funcHandler{
		open: func(c eventloop.Conn) { c.SetContext(&state{}) },
		data: func(c eventloop.Conn, b []byte) {
			st := c.Context().(*state)
			st.buf = append(st.buf, b...)
			end := bytes.Index(st.buf, []byte("\r\n\r\n"))
			if end < 0 {
				return
			}
			line, _, _ := bytes.Cut(st.buf, []byte("\r\n"))
			body := fmt.Sprintf("remote=%s local=%s %s req=%s", c.RemoteAddr(), c.LocalAddr(), describeHeader(HeaderOf(c)), line)
			fmt.Fprintf(writer{c}, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			_ = c.Close()
		},
	}
}

func describeHeader(h *Header) string {
	if h == nil {
		return "no-header"
	}
	s := fmt.Sprintf("v%d cmd=%d fam=%d", h.Version, h.Command, h.Family)
	if h.HasAddrs() {
		s += fmt.Sprintf(" src=%s dst=%s", h.Source, h.Destination)
	}
	for area := h.TLVs(); len(area) > 0; {
		typ, v, rest, err := NextTLV(area)
		if err != nil {
			s += " broken-tlv"
			break
		}
		s += fmt.Sprintf(" tlv%02x=%q", typ, v)
		area = rest
	}
	if p := h.UnixSource(); p != nil {
		s += fmt.Sprintf(" unix=%q->%q", p, h.UnixDestination())
	}
	return s
}

type writer struct{ c eventloop.Conn }

func (w writer) Write(p []byte) (int, error) { return w.c.Write(p) }

type testServer struct {
	loop  *eventloop.Loop
	addrs []string
	log   *logRecorder
}

// startServer runs a loop whose handler is a Layer around inner, with n
// listeners on free loopback ports (1 if n is 0).
func startServer(t testing.TB, inner eventloop.Handler, opts Options, n int) *testServer {
	t.Helper()
	rec := &logRecorder{}
	l, err := eventloop.New(eventloop.Config{CPU: -1, Handler: NewLayer(inner, opts), Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{loop: l, log: rec}
	for range max(n, 1) {
		ln, err := eventloop.Listen("127.0.0.1:0", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AddListener(ln); err != nil {
			t.Fatal(err)
		}
		s.addrs = append(s.addrs, ln.Addr().String())
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.Stop()
		select {
		case <-l.Done():
		case <-time.After(20 * time.Second):
			t.Error("loop did not stop")
		}
		if st := l.Stats(); st.Panics != 0 {
			t.Errorf("%d panics:\n%s", st.Panics, rec)
		}
	})
	return s
}

func dial(t testing.TB, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c.(*net.TCPConn)
}

// exchange sends the parts (pausing between them when pause > 0, so they
// arrive in separate reads) and returns all the server answered before closing.
func exchange(t testing.TB, addr string, pause time.Duration, parts ...[]byte) (string, *net.TCPConn) {
	t.Helper()
	c := dial(t, addr)
	for _, p := range parts {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	out, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("read: %v", err)
	}
	return string(out), c
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// bytewise cuts b into one-byte parts.
func bytewise(b []byte) [][]byte {
	parts := make([][]byte, len(b))
	for i := range b {
		parts[i] = b[i : i+1]
	}
	return parts
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
