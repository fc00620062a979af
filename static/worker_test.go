package static

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
)

// startWorker runs the HTTP core on one loop in this process with the http block
// src (the static module's tests need no binary).
func startWorker(tb testing.TB, addr, src string) {
	tb.Helper()
	cfg := mustConf(tb, "events {}\nhttp {\n"+src+"\n}\n")
	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := httpcore.NewWorker(snap, log, 0)
	l, err := eventloop.New(eventloop.Config{CPU: -1, Handler: w, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	w.SetLoop(l)
	ln, err := eventloop.ListenAddrPort(netip.MustParseAddrPort(addr), 0)
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.AddListener(ln); err != nil {
		tb.Fatal(err)
	}
	if err := l.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		l.Stop()
		<-l.Done()
	})
}

// keepAliveConn sends requests and reads Content-Length responses on one
// connection without allocating.
type keepAliveConn struct {
	c   net.Conn
	buf []byte
}

func (k *keepAliveConn) roundTrip(tb testing.TB, req []byte) int {
	if _, err := k.c.Write(req); err != nil {
		tb.Fatal(err)
	}
	have := 0
	for {
		n, err := k.c.Read(k.buf[have:])
		if err != nil {
			tb.Fatal(err)
		}
		have += n
		end := bytes.Index(k.buf[:have], []byte("\r\n\r\n"))
		if end < 0 {
			continue
		}
		cl := bytes.Index(k.buf[:end], []byte("Content-Length: "))
		if cl < 0 {
			tb.Fatalf("no Content-Length in %q", k.buf[:end])
		}
		i := cl + len("Content-Length: ")
		length := 0
		for ; k.buf[i] >= '0' && k.buf[i] <= '9'; i++ {
			length = length*10 + int(k.buf[i]-'0')
		}
		for have < end+4+length {
			n, err := k.c.Read(k.buf[have:])
			if err != nil {
				tb.Fatal(err)
			}
			have += n
		}
		status := int(k.buf[9]-'0')*100 + int(k.buf[10]-'0')*10 + int(k.buf[11]-'0')
		return status
	}
}
