package eventloop

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type dialResult struct {
	opened bool
	err    error
}

func dialOn(t *testing.T, l *Loop, addr netip.AddrPort, timeout time.Duration, onOpen func(Conn)) <-chan dialResult {
	res := make(chan dialResult, 1)
	h := &funcHandler{
		open: func(c Conn) {
			if onOpen != nil {
				onOpen(c)
			}
			res <- dialResult{opened: true}
		},
		close: func(c Conn, err error) {
			select {
			case res <- dialResult{err: err}:
			default:
			}
		},
	}
	onLoop(t, l, func() {
		if _, err := l.Dial(addr, timeout, h, nil); err != nil {
			res <- dialResult{err: err}
		}
	})
	return res
}

func TestDialConnectsAndWritesEarly(t *testing.T) {
	l, addr := startLoop(t, Config{Handler: echoHandler()})
	echoed := make(chan string, 1)
	res := make(chan dialResult, 1)
	h := &funcHandler{
		open: func(c Conn) { res <- dialResult{opened: true} },
		data: func(c Conn, b []byte) { echoed <- string(b); _ = c.Close() },
	}
	onLoop(t, l, func() {
		c, err := l.Dial(netip.MustParseAddrPort(addr), time.Minute, h, nil)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = c.Write([]byte("queued before connect")) // flushed once connected
	})
	if r := recv(t, res); !r.opened {
		t.Fatalf("dial: %v", r.err)
	}
	if got := recv(t, echoed); got != "queued before connect" {
		t.Fatalf("echo %q", got)
	}
}

func TestDialRefused(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	// A port nobody listens on: bind one and close it.
	ln, err := Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr()
	_ = ln.Close()
	r := recv(t, dialOn(t, l, addr, time.Minute, nil))
	if r.opened || !errors.Is(r.err, unix.ECONNREFUSED) {
		t.Fatalf("dial to closed port: %+v", r)
	}
}

func TestDialTimeout(t *testing.T) {
	l, _ := startLoop(t, Config{Handler: echoHandler()})
	// A listener with backlog 0 that never accepts: once its queue holds one
	// connection, the kernel drops further SYNs and connects hang.
	full, err := Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if err := unix.Listen(full.Fd(), 0); err != nil {
		t.Fatal(err)
	}
	timedOut := false
	for i := 0; i < 4 && !timedOut; i++ {
		r := recv(t, dialOn(t, l, full.Addr(), 200*time.Millisecond, nil))
		switch {
		case r.opened:
		case errors.Is(r.err, ErrDialTimeout):
			timedOut = true
		default:
			t.Fatalf("dial: %v", r.err)
		}
	}
	if !timedOut {
		t.Fatal("no connect timed out against a full accept queue")
	}
}
