package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProxyBuffering: with a client that stops reading after the head, the upstream
// can send only what the buffers on the way hold. proxy_buffering on lets the proxy
// queue up to the loop's write watermark (256 KiB) ahead of the client; off reads the
// upstream only once the client's socket took everything. Both are bounded, and both
// deliver everything once the client reads.
func TestProxyBuffering(t *testing.T) {
	t.Parallel()
	const total = 16 << 20
	var written [2]atomic.Int64   // by the upstream connection serving /on (0) and /off (1)
	var proxyPort [2]atomic.Int64 // the proxy's end of those connections
	up := newRawUpstream(t, func(c net.Conn) {
		c.(*net.TCPConn).SetWriteBuffer(16 << 10)
		br := bufio.NewReader(c)
		head, err := readHead(br)
		if err != nil {
			return
		}
		i := 0
		if len(head) > 8 && head[:8] == "GET /off" {
			i = 1
		}
		proxyPort[i].Store(int64(c.RemoteAddr().(*net.TCPAddr).Port))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(total)+"\r\n\r\n")
		chunk := make([]byte, 1<<10) // small writes: little is in flight uncounted
		for sent := 0; sent < total; sent += len(chunk) {
			n, err := c.Write(chunk)
			written[i].Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    location /on { proxy_pass http://`+up.Addr+`; proxy_max_temp_file_size 0; } # no temp file: the read-ahead is in memory
    location /off { proxy_pass http://`+up.Addr+`; proxy_buffering off; }
  }`, addr)

	port := func(a string) int { p, _ := strconv.Atoi(a[strings.LastIndexByte(a, ':')+1:]); return p }
	// stalled returns how much the upstream got out to a client that reads only the
	// head, once that stops growing, and how much of it the proxy holds in its own
	// queue: what it read from the upstream socket and did not hand to the client
	// socket, counted from the kernel's queues (every byte the upstream wrote is in
	// the upstream's unacknowledged send queue, in the proxy's receive queue, in the
	// proxy's queue, in the proxy's send queue or in the client's receive queue).
	// The client then reads everything.
	stalled := func(path string, i int) (sent, held int64) {
		// (No small SO_RCVBUF here: below the loopback MSS it stalls the stream.)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
		prev, stable := int64(-1), 0
		for deadline := time.Now().Add(10 * time.Second); stable < 10; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the upstream never stalled (%d bytes sent)", path, prev)
			}
			n := written[i].Load()
			if n == prev && n > 0 {
				stable++
			} else {
				prev, stable = n, 0
			}
			time.Sleep(20 * time.Millisecond)
		}
		if prev >= total {
			t.Fatalf("%s: the upstream sent all %d bytes to a client that reads nothing", path, prev)
		}
		pp, cp := int(proxyPort[i].Load()), port(c.LocalAddr().String())
		kernel := tcpQueue(t, port(up.Addr), pp, true) + tcpQueue(t, pp, port(up.Addr), false) +
			tcpQueue(t, port(addr), cp, true) + tcpQueue(t, cp, port(addr), false)
		held = prev - kernel
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(c)
		if _, err := readHead(br); err != nil {
			t.Fatal(err)
		}
		if n, err := io.CopyN(io.Discard, br, total); err != nil {
			t.Fatalf("%s: got %d of %d: %v", path, n, total, err)
		}
		return prev, held
	}
	onSent, onHeld := stalled("/on", 0)
	offSent, offHeld := stalled("/off", 1)
	t.Logf("upstream sent before stalling / held in the proxy's queue: buffering on %d / %d KiB, off %d / %d KiB",
		onSent>>10, onHeld>>10, offSent>>10, offHeld>>10)
	// on: the queue went past the 256 KiB high watermark, then drained into the
	// kernel's buffers but not below the 64 KiB low mark (reading would resume);
	// off: at most one read (64 KiB). Heads and a write in progress blur the count
	// by a few KiB.
	if onHeld < 128<<10 || onHeld > 330<<10 {
		t.Errorf("buffering on: the proxy held %d bytes, want between the watermarks", onHeld)
	}
	if offHeld > 65<<10 {
		t.Errorf("buffering off: the proxy held %d bytes, want at most one read", offHeld)
	}
}

// tcpQueue returns a loopback TCP socket's send queue (tx) or receive queue from
// /proc/net/tcp.
func tcpQueue(t *testing.T, local, remote int, tx bool) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	l, r := fmt.Sprintf("0100007F:%04X", local), fmt.Sprintf("0100007F:%04X", remote)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != l || f[2] != r {
			continue
		}
		txq, rxq, _ := strings.Cut(f[4], ":")
		q := rxq
		if tx {
			q = txq
		}
		n, err := strconv.ParseInt(q, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Fatalf("no socket %d -> %d in /proc/net/tcp", local, remote)
	return 0
}
