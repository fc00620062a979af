package eventloop

import (
	"io"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSlowReaderBoundsMemory proxies a fast writer W to a slow reader R
// through one loop: R's queue crossing the high watermark pauses reading from
// W, so queued bytes and pool buffers stay bounded while the kernel buffers
// fill and W's writes block; once R reads, everything arrives.
func TestSlowReaderBoundsMemory(t *testing.T) {
	const (
		total     = 64 << 20
		high, low = 256 << 10, 64 << 10
		readBuf   = 64 << 10
		chunk     = 16 << 10
	)
	var (
		reader, writer         Conn
		maxQueued              int
		maxOutstanding         int64
		pauses, resumes, conns int
	)
	pool := NewHeapPool()
	h := &funcHandler{
		open: func(c Conn) {
			if conns++; conns == 1 {
				reader = c
			} else {
				writer = c
			}
		},
		data: func(c Conn, b []byte) {
			if c != writer {
				return
			}
			_, _ = reader.Write(b)
			maxQueued = max(maxQueued, reader.Queued())
			maxOutstanding = max(maxOutstanding, pool.Outstanding()-1) // minus the loop's read buffer
		},
		blocked:  func(c Conn) { pauses++; writer.PauseRead() },
		writable: func(c Conn) { resumes++; writer.ResumeRead() },
	}
	l, addr := startLoop(t, Config{Handler: h, Pool: pool, WriteHighWater: high, WriteLowWater: low,
		ReadBufferSize: readBuf, ChunkSize: chunk})

	// A small receive buffer on R makes the kernel hold less of the stream.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<10) })
	}}
	r, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	waitFor(t, "reader accepted", func() bool { var n int; onLoop(t, l, func() { n = conns }); return n == 1 })
	w := dial(t, addr)
	defer w.Close()

	written := make(chan error, 1)
	go func() {
		buf := make([]byte, 256<<10)
		for sent := 0; sent < total; sent += len(buf) {
			if _, err := w.Write(buf); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	// R reads nothing until the loop has paused W and W's kernel buffers are
	// full: the writer goroutine is then blocked, not finished.
	waitFor(t, "the watermark to pause the writer", func() bool {
		var p int
		var wfd int
		onLoop(t, l, func() { p = pauses; wfd = writer.Fd() })
		return p > 0 && inq(t, wfd) > 0
	})
	var q int
	var out int64
	onLoop(t, l, func() { q, out = maxQueued, maxOutstanding })
	if q > high+readBuf {
		t.Errorf("reader queue peaked at %d bytes, bound %d", q, high+readBuf)
	}
	if limit := int64((high+readBuf)/chunk + 1); out > limit {
		t.Errorf("pool lent %d buffers at peak, bound %d", out, limit)
	}
	select {
	case err := <-written:
		t.Fatalf("writer finished (%v) although the reader never read: nothing pushed back", err)
	default:
	}

	n, err := io.CopyN(io.Discard, r, total)
	if err != nil || n != total {
		t.Fatalf("reader got %d bytes: %v", n, err)
	}
	if err := recv(t, written); err != nil {
		t.Fatal(err)
	}
	onLoop(t, l, func() { q, out = maxQueued, maxOutstanding })
	if q > high+readBuf || out > int64((high+readBuf)/chunk+1) {
		t.Errorf("peaks over the whole transfer: queue %d, buffers %d", q, out)
	}
	var p, rs int
	onLoop(t, l, func() { p, rs = pauses, resumes })
	if p == 0 || rs == 0 {
		t.Errorf("pauses %d, resumes %d", p, rs)
	}
	if got := pool.Outstanding(); got != 1 {
		t.Errorf("%d buffers lent once drained, want only the loop's read buffer: an idle connection holds none", got)
	}
	t.Logf("peak queue %d B, peak buffers %d, %d pauses, %d resumes", q, out, p, rs)
}
