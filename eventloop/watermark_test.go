package eventloop

import (
	"io"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSetWriteWatermarks: a connection's own watermarks replace the loop's for it
// alone, and high <= 0 restores the loop's.
func TestSetWriteWatermarks(t *testing.T) {
	const loopHigh, loopLow = 256 << 10, 64 << 10
	var (
		conns             []Conn
		blockedAt         = map[Conn][]int{}
		writableAt        = map[Conn][]int{}
		ownHigh, ownLow   = 8 << 10, 2 << 10
		chunk             = make([]byte, 1<<10)
		readers           []net.Conn
		ownConn, loopConn Conn
		restored          Conn
	)
	h := &funcHandler{
		open:     func(c Conn) { conns = append(conns, c) },
		blocked:  func(c Conn) { blockedAt[c] = append(blockedAt[c], c.Queued()) },
		writable: func(c Conn) { writableAt[c] = append(writableAt[c], c.Queued()) },
	}
	l, addr := startLoop(t, Config{Handler: h, WriteHighWater: loopHigh, WriteLowWater: loopLow})
	// Small receive buffers: the kernel holds little, the queues fill soon.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<10) })
	}}
	for i := 0; i < 3; i++ {
		r, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		readers = append(readers, r)
		waitFor(t, "accepted", func() bool { var n int; onLoop(t, l, func() { n = len(conns) }); return n == i+1 })
	}
	// fill writes until c reports blocked, at most limit bytes, and returns the
	// queue sizes seen at each OnWriteBlocked.
	fill := func(c Conn, limit int) []int {
		var at []int
		onLoop(t, l, func() {
			before := len(blockedAt[c])
			for sent := 0; sent < limit && len(blockedAt[c]) == before; sent += len(chunk) {
				_, _ = c.Write(chunk)
			}
			at = append(at, blockedAt[c]...)
		})
		return at
	}
	onLoop(t, l, func() {
		ownConn, loopConn, restored = conns[0], conns[1], conns[2]
		ownConn.SetWriteWatermarks(ownHigh, ownLow)
		loopConn.SetWriteWatermarks(-1, 5) // high <= 0: the loop's marks
		restored.SetWriteWatermarks(ownHigh, ownLow)
		restored.SetWriteWatermarks(0, 0)
	})
	if at := fill(ownConn, 64<<20); len(at) != 1 || at[0] <= ownHigh || at[0] > ownHigh+len(chunk) {
		t.Fatalf("own watermark: blocked at %v, want just above %d", at, ownHigh)
	}
	if at := fill(loopConn, 64<<20); len(at) != 1 || at[0] <= loopHigh || at[0] > loopHigh+len(chunk) {
		t.Fatalf("loop watermark: blocked at %v, want just above %d", at, loopHigh)
	}
	// Reading drains: OnWritable once at or below each connection's low mark.
	for i, r := range readers[:2] {
		c := []Conn{ownConn, loopConn}[i]
		low := []int{ownLow, loopLow}[i]
		go io.Copy(io.Discard, r)
		var at []int
		waitFor(t, "writable", func() bool { onLoop(t, l, func() { at = append([]int(nil), writableAt[c]...) }); return len(at) == 1 })
		if at[0] > low {
			t.Fatalf("conn %d writable with %d queued, low mark %d", i, at[0], low)
		}
	}
	if at := fill(restored, 64<<20); len(at) != 1 || at[0] <= loopHigh {
		t.Fatalf("restored marks: blocked at %v, want above %d", at, loopHigh)
	}
}
