package eventloop

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// requestHandler marks connections idle between requests; a "slow" request
// stays in flight until the test finishes it through the loop.
type requestHandler struct {
	mu       sync.Mutex
	inFlight []Conn
	closeErr map[string]error // by remote address
}

func (h *requestHandler) handler() *funcHandler {
	h.closeErr = map[string]error{}
	return &funcHandler{
		open: func(c Conn) { c.SetIdle(true) },
		data: func(c Conn, b []byte) {
			if string(b) == "slow" {
				c.SetIdle(false)
				h.mu.Lock()
				h.inFlight = append(h.inFlight, c)
				h.mu.Unlock()
				return
			}
			_, _ = c.Write(b)
		},
		close: func(c Conn, err error) {
			h.mu.Lock()
			h.closeErr[c.RemoteAddr().String()] = err
			h.mu.Unlock()
		},
	}
}

func (h *requestHandler) errOf(c net.Conn) (error, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	err, ok := h.closeErr[c.LocalAddr().String()]
	return err, ok
}

// waitErr waits for the server side of c to be closed and returns its OnClose error.
func (h *requestHandler) waitErr(t *testing.T, c net.Conn) error {
	t.Helper()
	var err error
	waitFor(t, "OnClose", func() bool { var ok bool; err, ok = h.errOf(c); return ok })
	return err
}

func (h *requestHandler) inFlightCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.inFlight)
}

func TestDrainFinishesInFlightAndClosesIdle(t *testing.T) {
	before := countFds(t)
	rh := &requestHandler{}
	pool := NewHeapPool()
	l, addr := startLoop(t, Config{Handler: rh.handler(), Pool: pool})
	idle, busy := dial(t, addr), dial(t, addr)
	defer idle.Close()
	defer busy.Close()
	if roundTrip(t, idle, "ping") != "ping" {
		t.Fatal("echo")
	}
	if _, err := busy.Write([]byte("slow")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slow request", func() bool { return rh.inFlightCount() == 1 })

	if err := l.Drain(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, idle)
	if err := rh.waitErr(t, idle); !errors.Is(err, ErrDraining) {
		t.Errorf("idle conn closed with %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		t.Error("listener still accepting while draining")
	}
	select {
	case <-l.Done():
		t.Fatal("loop exited with a request in flight")
	default:
	}
	// Finish the request: the response goes out, then the now idle conn closes.
	big := make([]byte, 1<<20) // larger than the socket takes at once: some is queued
	if err := l.Run(func() {
		c := rh.inFlight[0]
		_, _ = c.Write(big)
		c.SetIdle(true)
	}); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, busy)
	if err != nil || n != int64(len(big)) {
		t.Fatalf("in-flight response: %d bytes, %v", n, err)
	}
	waitDone(t, l.Done())
	if err := rh.waitErr(t, busy); !errors.Is(err, ErrDraining) {
		t.Errorf("busy conn closed with %v", err)
	}
	if pool.Outstanding() != 0 {
		t.Errorf("%d buffers outstanding", pool.Outstanding())
	}
	_ = idle.Close()
	_ = busy.Close()
	if after := countFds(t); after != before {
		t.Errorf("fds: %d before, %d after", before, after)
	}
}

func TestDrainDeadlineForceCloses(t *testing.T) {
	rh := &requestHandler{}
	l, addr := startLoop(t, Config{Handler: rh.handler()})
	busy := dial(t, addr)
	defer busy.Close()
	if _, err := busy.Write([]byte("slow")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slow request", func() bool { return rh.inFlightCount() == 1 })
	if err := l.Drain(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l.Done())
	expectClosed(t, busy)
	if err := rh.waitErr(t, busy); !errors.Is(err, ErrDrainTimeout) {
		t.Errorf("busy conn closed with %v", err)
	}
}

func TestStopClosesEverything(t *testing.T) {
	before := countFds(t)
	rh := &requestHandler{}
	cfg := Config{Handler: rh.handler()}
	cfg.Logger, _ = newLogger()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddListener(ln); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var clients []net.Conn
	for i := range 10 {
		c := dial(t, addr)
		clients = append(clients, c)
		msg := "ping"
		if i%2 == 0 {
			msg = "slow"
			if _, err := c.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if roundTrip(t, c, msg) != msg {
			t.Fatal("echo")
		}
	}
	waitFor(t, "slow requests", func() bool { return rh.inFlightCount() == 5 })
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l.Done())
	for _, c := range clients {
		expectClosed(t, c)
		if err := rh.waitErr(t, c); !errors.Is(err, ErrStopped) {
			t.Errorf("conn closed with %v", err)
		}
		_ = c.Close()
	}
	if err := l.Run(func() {}); !errors.Is(err, ErrLoopClosed) {
		t.Errorf("Run after Stop: %v", err)
	}
	if after := countFds(t); after != before {
		t.Errorf("fds: %d before, %d after", before, after)
	}
}

// TestHandlerPanicsInOneBatch: panics of two connections whose events come in the
// same epoll batch (the loop was held while they arrived) close those two only
// (one closed itself before its panic); the other events of the batch are handled.
func TestHandlerPanicsInOneBatch(t *testing.T) {
	h := &funcHandler{
		data: func(c Conn, b []byte) {
			switch string(b) {
			case "hold":
				time.Sleep(300 * time.Millisecond) // the others' data arrive meanwhile
			case "boom":
				panic("handler boom")
			case "closeboom":
				c.Close()
				panic("handler boom")
			}
			_, _ = c.Write(b)
		},
	}
	logger, logs := newLogger()
	l, addr := startLoop(t, Config{Handler: h, Logger: logger})
	conns := map[string]net.Conn{}
	for _, name := range []string{"hold", "boom1", "c", "boom2", "d"} {
		c := dial(t, addr)
		defer c.Close()
		roundTrip(t, c, "open")
		conns[name] = c
	}
	if _, err := conns["hold"].Write([]byte("hold")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	for _, name := range []string{"boom1", "c", "boom2", "d"} {
		msg := name
		switch name {
		case "boom1":
			msg = "boom"
		case "boom2":
			msg = "closeboom"
		}
		if _, err := conns[name].Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, name := range []string{"hold", "c", "d"} {
		buf := make([]byte, len(name))
		_ = conns[name].SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(conns[name], buf); err != nil || string(buf) != name {
			t.Errorf("%s: %q %v", name, buf, err)
		}
	}
	expectClosed(t, conns["boom1"])
	expectClosed(t, conns["boom2"])
	if got := roundTrip(t, conns["c"], "after"); got != "after" {
		t.Fatalf("existing conn: %q", got)
	}
	if l.Stats().Panics != 2 || logs.count("handler boom") != 2 {
		t.Errorf("panics %d, logged %d", l.Stats().Panics, logs.count("handler boom"))
	}
}

func TestHandlerPanicClosesOnlyThatConn(t *testing.T) {
	closed := make(chan error, 4)
	h := &funcHandler{
		data: func(c Conn, b []byte) {
			if string(b) == "boom" {
				panic("handler boom")
			}
			_, _ = c.Write(b)
		},
		close: func(c Conn, err error) { closed <- err },
	}
	logger, logs := newLogger()
	l, addr := startLoop(t, Config{Handler: h, Logger: logger})
	other := dial(t, addr)
	defer other.Close()
	roundTrip(t, other, "before")
	c := dial(t, addr)
	defer c.Close()
	if _, err := c.Write([]byte("boom")); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	var pe *PanicError
	if err := recv(t, closed); !errors.As(err, &pe) || pe.Value != "handler boom" {
		t.Errorf("OnClose err %v", err)
	}
	if got := roundTrip(t, other, "after"); got != "after" {
		t.Fatalf("existing conn: %q", got)
	}
	next := dial(t, addr)
	defer next.Close()
	if got := roundTrip(t, next, "next"); got != "next" {
		t.Fatalf("next conn: %q", got)
	}
	if l.Stats().Panics != 1 || logs.count("handler boom") != 1 || logs.count("goroutine") == 0 {
		t.Errorf("panics %d, logged %d (with stack: %d)", l.Stats().Panics, logs.count("handler boom"), logs.count("goroutine"))
	}
}
