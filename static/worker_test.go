package static

import (
	"net"
	"testing"

	"github.com/numaproxy/numaproxy/internal/looptest"
)

// startWorker runs the HTTP core on one loop in this process with the http block
// src (the static module's tests need no binary).
func startWorker(tb testing.TB, addr, src string) {
	tb.Helper()
	looptest.Start(tb, mustConf(tb, "events {}\nhttp {\n"+src+"\n}\n"), nil, addr)
}

// keepAliveConn sends requests and reads Content-Length responses on one
// connection without allocating.
type keepAliveConn struct {
	c   net.Conn
	buf []byte
}

func (k *keepAliveConn) roundTrip(tb testing.TB, req []byte) int {
	st, _ := looptest.RoundTrip(tb, k.c, k.buf, req)
	return st
}
