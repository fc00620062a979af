package integration

import (
	"syscall"

	"golang.org/x/sys/unix"

	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPoolMemoryGivenBack: 200 clients that read a little of a 4 MiB response and
// then stall make the proxy queue what their sockets do not take (measured: 115-145
// KiB each, as the kernel's send buffer, autotuned up to tcp_wmem's 4 MiB, holds most
// of each body; with 10 MiB bodies the queue reaches the loop's write watermark, 256
// KiB plus one read). Once they are gone, the buffer pool gives the idle memory back
// to the kernel after its release delay (pool.DefaultReleaseDelay, 10 s), so the
// process RSS falls back towards where it was; before, it stayed at the peak. Both
// with numa off (one domain, pages placed by first touch) and on (bound to node 0).
//
// nginx 1.22 on the same shape (proxy_buffering on) spills to temp files: measured
// on this machine, 800 such readers of 10 MiB peaked at 106 MiB for the worker.
func TestPoolMemoryGivenBack(t *testing.T) {
	for _, mode := range []string{"off", "on"} {
		t.Run("numa "+mode, func(t *testing.T) { testPoolMemoryGivenBack(t, "numa "+mode+";\nworker_processes 1;\n") })
	}
}

func testPoolMemoryGivenBack(t *testing.T, mainExtra string) {
	const (
		readers   = 200
		bodySize  = 4 << 20
		giveBack  = 30 * time.Second // the release delay (10 s) with a generous margin
		minGrowth = 12 << 20         // half of what was measured: the readers must show
	)
	up := newRawUpstream(t, func(c net.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(bodySize)+"\r\n\r\n")
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < bodySize; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	addr := addrFor(t)
	in := startMain(t, mainExtra, `
  server {
    listen `+addr+` sndbuf=16k;
    location / { proxy_pass http://`+up.Addr+`; proxy_max_temp_file_size 0; } # queued in memory, not in temp files
  }`, addr)
	pid := in.cmd.Process.Pid

	// A few whole responses first, so the baseline has the loop's steady buffers.
	for range 3 {
		resp, err := roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		if err != nil || len(resp) < bodySize {
			t.Fatalf("warm-up response: %d bytes, %v", len(resp), err)
		}
	}
	base := vmRSS(t, pid)

	// Slow readers: each reads the head and a little body, then stops reading.
	conns := make([]net.Conn, readers)
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range conns {
		c := dialSmallWindow(t, addr)
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
				errs <- err
				return
			}
			if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
				errs <- fmt.Errorf("first bytes of the body: %w", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The proxy fills its queues as fast as the upstream sends: wait until RSS stops growing.
	peak, still := base, 0
	for deadline := time.Now().Add(20 * time.Second); still < 20 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if r := vmRSS(t, pid); r > peak {
			peak, still = r, 0
		} else {
			still++
		}
	}
	growth := peak - base
	t.Logf("RSS %d KiB before, %d KiB with %d slow readers (%d KiB each)", base>>10, peak>>10, readers, growth/readers>>10)
	if growth < minGrowth {
		t.Fatalf("the slow readers grew RSS by only %d KiB: the test no longer makes the proxy queue", growth>>10)
	}

	for _, c := range conns {
		c.Close()
	}
	gone := time.Now()
	waitFor(t, "the proxy's connections to close", 10*time.Second, func() bool { return in.fdCount() < readers/4 })
	var after int64
	for deadline := gone.Add(giveBack); ; time.Sleep(250 * time.Millisecond) {
		after = vmRSS(t, pid)
		if after <= base+growth/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RSS %d KiB %s after the readers left (%d KiB before them, %d KiB with them): idle buffers not given back",
				after>>10, giveBack, base>>10, peak>>10)
		}
	}
	t.Logf("RSS %d KiB %.1f s after the readers left", after>>10, time.Since(gone).Seconds())

	// The memory given back is still usable.
	resp, err := roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if err != nil || len(resp) < bodySize {
		t.Fatalf("response after the release: %d bytes, %v", len(resp), err)
	}
}

// vmRSS returns the resident set size of process pid, in bytes.
// dialSmallWindow connects with a 4 KiB receive buffer, so that with the listener's
// small send buffer the kernel holds little of a response and the proxy queues the
// rest itself, whatever the kernel's buffer autotuning would otherwise absorb.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: ioTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<10) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	return c
}

func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}
