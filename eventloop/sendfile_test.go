package eventloop

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sendModes are the two ways a connection sends file segments.
var sendModes = []struct {
	name     string
	sendfile bool
}{{"sendfile", true}, {"pread", false}}

// patternFile writes size bytes of a pseudo-random pattern to a new temp file and
// returns its path and contents.
func patternFile(t testing.TB, size int, seed uint64) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	x := seed*0x9e3779b97f4a7c15 | 1
	for i := range data {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		data[i] = byte(x)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("file%d", seed))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// openFd opens path read-only for one WriteFile; the caller closes it at once.
func openFd(t testing.TB, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// writeFile queues [off, off+n) of path on c from a descriptor closed right
// after: the connection must keep its own.
func writeFile(t testing.TB, c Conn, path string, off, n int64) error {
	fd := openFd(t, path)
	defer unix.Close(fd)
	return c.WriteFile(fd, off, n)
}

// dialRcvbuf connects with a receive buffer of size bytes (0: the default).
func dialRcvbuf(t testing.TB, addr string, size int) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			if size > 0 {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, size)
			}
		})
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestWriteFileOrder: bytes and file segments, from the caller's descriptors
// closed at once, arrive exactly in the order queued: the first segment goes out
// at once as far as the socket takes it, the others wait behind it; a segment
// sent whole at once and empty segments too.
func TestWriteFileOrder(t *testing.T) {
	for _, mode := range sendModes {
		t.Run(mode.name, func(t *testing.T) {
			a, aData := patternFile(t, 3<<20+17, 1)
			b, bData := patternFile(t, 1<<20, 2)
			var want bytes.Buffer
			want.WriteString("head\r\n")
			want.Write(aData)
			want.WriteString("mid")
			want.Write(bData[100 : len(bData)-5])
			want.Write(aData[5:15])
			want.WriteString("tail")
			errs := make(chan error, 8)
			h := &funcHandler{data: func(c Conn, _ []byte) {
				c.SetSendfile(mode.sendfile, 256<<10)
				_, _ = c.Write([]byte("head\r\n"))
				errs <- writeFile(t, c, a, 0, int64(len(aData)))
				if c.Queued() == 0 {
					t.Error("3 MiB went out at once: nothing left to resume")
				}
				_, _ = c.Write([]byte("mid"))
				errs <- writeFile(t, c, b, 100, int64(len(bData)-105))
				errs <- writeFile(t, c, a, 5, 10)
				errs <- writeFile(t, c, a, 7, 0)
				_, _ = c.Writev([][]byte{[]byte("ta"), []byte("il")})
				_ = c.Close()
			}}
			_, addr := startLoop(t, Config{Handler: h})
			r := dialRcvbuf(t, addr, 16<<10)
			if _, err := r.Write([]byte("go")); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			for range 4 {
				if err := recv(t, errs); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("got %d bytes, want %d; first difference at %d", len(got), want.Len(), firstDiff(got, want.Bytes()))
			}
		})
	}
	t.Run("bytes behind a segment partly read", func(t *testing.T) {
		// Without sendfile and with a bound smaller than a pool buffer, a segment
		// waits with part of a buffer read: bytes written meanwhile go after the
		// segment, not into that buffer.
		path, data := patternFile(t, 1<<20, 4)
		const marks = 200
		h := &funcHandler{data: func(c Conn, b []byte) {
			if string(b[:min(2, len(b))]) == "go" {
				_ = unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<10)
				c.SetSendfile(false, 12000) // 16 KiB buffers: writev is often partial
				if err := writeFile(t, c, path, 0, int64(len(data))); err != nil {
					t.Error(err)
				}
				b = b[2:]
			}
			_, _ = c.Write(b)
		}}
		_, addr := startLoop(t, Config{Handler: h})
		r := dialRcvbuf(t, addr, 16<<10)
		if _, err := r.Write([]byte("go")); err != nil {
			t.Fatal(err)
		}
		want := append(append([]byte(nil), data...), bytes.Repeat([]byte("m"), marks)...)
		got := make([]byte, 0, len(want))
		buf := make([]byte, 4<<10)
		_ = r.SetReadDeadline(time.Now().Add(20 * time.Second))
		for i := 0; len(got) < len(want); i++ {
			if i < marks {
				if _, err := r.Write([]byte("m")); err != nil {
					t.Fatal(err)
				}
			}
			n, err := r.Read(buf[:min(len(buf), len(want)-len(got))])
			if err != nil {
				t.Fatalf("after %d bytes: %v", len(got), err)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("first difference at %d of %d", firstDiff(got, want), len(want))
		}
	})
	t.Run("whole at once", func(t *testing.T) {
		path, data := patternFile(t, 4<<10, 3)
		queued := make(chan int, 1)
		h := &funcHandler{data: func(c Conn, _ []byte) {
			before := countFds(t)
			if err := writeFile(t, c, path, 0, int64(len(data))); err != nil {
				t.Error(err)
			}
			if after := countFds(t); after != before {
				t.Errorf("fds %d -> %d: a segment sent whole kept a descriptor", before, after)
			}
			queued <- c.Queued()
			_ = c.Close()
		}}
		_, addr := startLoop(t, Config{Handler: h})
		r := dial(t, addr)
		defer r.Close()
		if _, err := r.Write([]byte("go")); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("got %d of %d bytes: %v", len(got), len(data), err)
		}
		if q := recv(t, queued); q != 0 {
			t.Fatalf("4 KiB left %d bytes queued", q)
		}
	})
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestWriteFileSlowReader: a reader with a small receive window gets a 64 MiB file
// intact while another connection of the same loop keeps getting its echoes, the
// watermarks tell the handler once when to hold off and once when to go on, and
// without sendfile the file goes through a bounded number of pool buffers.
func TestWriteFileSlowReader(t *testing.T) {
	const size = 64 << 20
	path, data := patternFile(t, size, 4)
	wantSum := sha256.Sum256(data)
	data = nil
	for _, mode := range sendModes {
		t.Run(mode.name, func(t *testing.T) {
			pool := NewHeapPool()
			var (
				fileConn          Conn
				blocked, writable int
				firstQueued       int
				done              = make(chan error, 1)
			)
			h := &funcHandler{
				data: func(c Conn, b []byte) {
					if string(b) != "file" {
						_, _ = c.Write(b) // the echo connection
						return
					}
					fileConn = c
					c.SetSendfile(mode.sendfile, 1<<20)
					_, _ = c.Write([]byte("head"))
					if err := writeFile(t, c, path, 0, size); err != nil {
						t.Error(err)
					}
					firstQueued = c.Queued()
					_, _ = c.Write([]byte("tail"))
				},
				blocked:  func(c Conn) { blocked++ },
				writable: func(c Conn) { writable++ },
				close: func(c Conn, err error) {
					if c == fileConn {
						done <- err
					}
				},
			}
			l, addr := startLoop(t, Config{Handler: h, Pool: pool})
			echo := dial(t, addr)
			defer echo.Close()
			roundTrip(t, echo, "warm")
			r := dialRcvbuf(t, addr, 32<<10)
			if _, err := r.Write([]byte("file")); err != nil {
				t.Fatal(err)
			}

			// The echo connection keeps its round trips going during the transfer.
			var maxOut atomic.Int64
			stop := make(chan struct{})
			echoed := make(chan [2]int64, 1) // round trips, slowest in µs
			go func() {
				var n, slowest int64
				for {
					select {
					case <-stop:
						echoed <- [2]int64{n, slowest}
						return
					default:
					}
					began := time.Now()
					_ = echo.SetDeadline(began.Add(20 * time.Second))
					if _, err := echo.Write([]byte("ping")); err != nil {
						t.Error(err)
						echoed <- [2]int64{n, slowest}
						return
					}
					buf := make([]byte, 4)
					if _, err := io.ReadFull(echo, buf); err != nil || string(buf) != "ping" {
						t.Errorf("echo %q: %v", buf, err)
						echoed <- [2]int64{n, slowest}
						return
					}
					n++
					slowest = max(slowest, time.Since(began).Microseconds())
					maxOut.Store(max(maxOut.Load(), pool.Outstanding()))
					time.Sleep(time.Millisecond)
				}
			}()

			// The slow reader: 64 KiB reads, a pause after every MiB.
			began := time.Now()
			hash := sha256.New()
			buf := make([]byte, 64<<10)
			var got int
			head := make([]byte, 4)
			_ = r.SetReadDeadline(time.Now().Add(60 * time.Second))
			if _, err := io.ReadFull(r, head); err != nil || string(head) != "head" {
				t.Fatalf("head %q: %v", head, err)
			}
			for got < size {
				n, err := r.Read(buf[:min(len(buf), size-got)])
				if err != nil {
					t.Fatalf("after %d bytes: %v", got, err)
				}
				hash.Write(buf[:n])
				if got/(1<<20) != (got+n)/(1<<20) {
					maxOut.Store(max(maxOut.Load(), pool.Outstanding()))
					time.Sleep(time.Millisecond)
				}
				got += n
			}
			elapsed := time.Since(began)
			close(stop)
			rt := recv(t, echoed)
			tail := make([]byte, 4)
			if _, err := io.ReadFull(r, tail); err != nil || string(tail) != "tail" {
				t.Fatalf("tail %q: %v", tail, err)
			}
			waitFor(t, "OnWritable", func() bool { var w int; onLoop(t, l, func() { w = writable }); return w > 0 })
			onLoop(t, l, func() { _ = fileConn.Close() })
			if sum := hash.Sum(nil); !bytes.Equal(sum, wantSum[:]) {
				t.Fatal("the file arrived altered")
			}
			if err := recv(t, done); err != nil {
				t.Fatalf("closed with %v", err)
			}
			var b, w, q int
			onLoop(t, l, func() { b, w, q = blocked, writable, firstQueued })
			if q < size-(1<<20) {
				t.Errorf("%d bytes left queued after WriteFile: more than sendfile_max_chunk went out at once", q)
			}
			if b != 1 || w != 1 {
				t.Errorf("OnWriteBlocked %d times, OnWritable %d times, want once each", b, w)
			}
			if rt[0] == 0 {
				t.Error("no echo round trip completed during the transfer")
			}
			// The loop's read buffer, an echo's queued bytes, one read buffer for the file.
			if limit := int64(3); maxOut.Load() > limit {
				t.Errorf("%d pool buffers lent at peak, bound %d", maxOut.Load(), limit)
			}
			if got := pool.Outstanding(); got != 1 {
				t.Errorf("%d buffers lent once closed, want the loop's read buffer only", got)
			}
			t.Logf("%d MiB in %v; %d echo round trips meanwhile, slowest %d µs; %d pool buffers at peak, %d allocated",
				size>>20, elapsed, rt[0], rt[1], maxOut.Load(), pool.Allocated())
		})
	}
}

// TestWriteFileMaxChunk: at most sendfile_max_chunk file bytes go out in one
// round, even to a socket that takes more (a large send buffer).
func TestWriteFileMaxChunk(t *testing.T) {
	const size, bound = 32 << 20, 256 << 10
	path, _ := patternFile(t, size, 5)
	for _, mode := range sendModes {
		for _, chunk := range []int{bound, 0} {
			t.Run(fmt.Sprintf("%s/%d", mode.name, chunk), func(t *testing.T) {
				sent := make(chan int, 1)
				h := &funcHandler{data: func(c Conn, _ []byte) {
					_ = unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
					if sb, _ := unix.GetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF); sb < 4*bound {
						sent <- -sb // net.core.wmem_max keeps the buffer too small to tell
						return
					}
					c.SetSendfile(mode.sendfile, chunk)
					if err := writeFile(t, c, path, 0, size); err != nil {
						t.Error(err)
					}
					sent <- size - c.Queued()
					_ = c.Close()
				}}
				_, addr := startLoop(t, Config{Handler: h})
				r := dial(t, addr)
				defer r.Close()
				if _, err := r.Write([]byte("go")); err != nil {
					t.Fatal(err)
				}
				n := recv(t, sent)
				if n < 0 {
					t.Skipf("send buffer of %d bytes only", -n)
				}
				if chunk > 0 && n > chunk {
					t.Fatalf("%d bytes went out at once, sendfile_max_chunk %d", n, chunk)
				}
				if chunk == 0 && n <= bound {
					t.Fatalf("%d bytes went out at once with no bound: the bounded case proves nothing", n)
				}
				t.Logf("sent at once: %d", n)
				if m, err := io.Copy(io.Discard, r); err != nil || m != size {
					t.Fatalf("got %d bytes: %v", m, err)
				}
			})
		}
	}
}

// TestWriteFileTruncated: a file that shrinks while queued closes the connection
// after what it still had, with an error wrapping ErrFileTruncated (nginx:
// "sendfile() reported that ... was truncated").
func TestWriteFileTruncated(t *testing.T) {
	const size, cut = 4 << 20, 1 << 20
	for _, mode := range sendModes {
		t.Run(mode.name, func(t *testing.T) {
			path, data := patternFile(t, size, 6)
			queued := make(chan int, 1)
			closed := make(chan error, 1)
			h := &funcHandler{
				data: func(c Conn, _ []byte) {
					_ = unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
					c.SetSendfile(mode.sendfile, 0)
					_, _ = c.Write([]byte("head"))
					if err := writeFile(t, c, path, 0, size); err != nil {
						t.Error(err)
					}
					_, _ = c.Write([]byte("tail"))
					queued <- c.Queued()
				},
				close: func(c Conn, err error) { closed <- err },
			}
			_, addr := startLoop(t, Config{Handler: h})
			r := dialRcvbuf(t, addr, 16<<10)
			if _, err := r.Write([]byte("go")); err != nil {
				t.Fatal(err)
			}
			if q := recv(t, queued); q < size-cut {
				t.Fatalf("only %d bytes queued: the cut is already sent", q)
			}
			if err := os.Truncate(path, cut); err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r)
			err := recv(t, closed)
			if !errors.Is(err, ErrFileTruncated) {
				t.Fatalf("closed with %v, want ErrFileTruncated", err)
			}
			t.Log(err)
			if want := append([]byte("head"), data[:cut]...); !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want the %d before the cut; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

// TestWriteFileClose: Close flushes queued file segments; a second Close drops
// them and closes the connection's descriptors; no descriptor outlives the
// connection either way.
func TestWriteFileClose(t *testing.T) {
	const size = 4 << 20
	path, data := patternFile(t, size, 7)
	for _, mode := range sendModes {
		t.Run(mode.name+"/flush", func(t *testing.T) {
			closed := make(chan error, 1)
			h := &funcHandler{
				data: func(c Conn, _ []byte) {
					c.SetSendfile(mode.sendfile, 0)
					for i := range 3 {
						if err := writeFile(t, c, path, int64(i), size-int64(i)); err != nil {
							t.Error(err)
						}
					}
					_ = c.Close()
				},
				close: func(c Conn, err error) { closed <- err },
			}
			_, addr := startLoop(t, Config{Handler: h})
			before := countFds(t)
			r := dialRcvbuf(t, addr, 16<<10)
			if _, err := r.Write([]byte("go")); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append(append([]byte(nil), data...), data[1:]...), data[2:]...)
			if !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
			if err := recv(t, closed); err != nil {
				t.Fatalf("closed with %v", err)
			}
			if after := countFds(t); after != before+1 { // r
				t.Fatalf("fds %d before, %d after: want r's only", before, after)
			}
		})
		t.Run(mode.name+"/second close", func(t *testing.T) {
			var conn Conn
			closed := make(chan error, 1)
			h := &funcHandler{
				open:  func(c Conn) { conn = c },
				close: func(c Conn, err error) { closed <- err },
			}
			l, addr := startLoop(t, Config{Handler: h})
			r := dialRcvbuf(t, addr, 16<<10)
			waitFor(t, "accepted", func() bool { var ok bool; onLoop(t, l, func() { ok = conn != nil }); return ok })
			before := countFds(t)
			var during int
			onLoop(t, l, func() {
				_ = unix.SetsockoptInt(conn.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
				conn.SetSendfile(mode.sendfile, 0)
				for range 3 {
					if err := writeFile(t, conn, path, 0, size); err != nil {
						t.Error(err)
					}
				}
				_ = conn.Close()
				during = countFds(t)
			})
			if during != before+3 {
				t.Fatalf("fds %d with three segments queued, %d before: want one each", during, before)
			}
			onLoop(t, l, func() { _ = conn.Close() })
			if err := recv(t, closed); err != nil {
				t.Fatalf("closed with %v", err)
			}
			if after := countFds(t); after != before-1 {
				t.Fatalf("fds %d before, %d after dropping: want one fewer (the socket)", before, after)
			}
			_ = r.SetReadDeadline(time.Now().Add(20 * time.Second))
			if n, _ := io.Copy(io.Discard, r); n >= 3*size {
				t.Fatalf("all %d bytes arrived although dropped", n)
			}
		})
	}
}

// TestWriteFileWriteTimeout: a file segment the peer does not take closes the
// connection at the write timeout, through a graceful Close too, and its
// descriptor goes with it; one the peer keeps taking does not, however long it takes.
func TestWriteFileWriteTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	path, _ := patternFile(t, 4<<20, 8)
	for _, close := range []bool{false, true} {
		t.Run(fmt.Sprintf("close=%v", close), func(t *testing.T) {
			closed := make(chan error, 1)
			var conn Conn
			h := &funcHandler{
				open:  func(c Conn) { conn = c },
				close: func(c Conn, err error) { closed <- err },
			}
			l, addr := startLoop(t, Config{Handler: h})
			_ = dialRcvbuf(t, addr, 16<<10)
			waitFor(t, "accepted", func() bool { var ok bool; onLoop(t, l, func() { ok = conn != nil }); return ok })
			before := countFds(t)
			began := time.Now()
			onLoop(t, l, func() {
				_ = unix.SetsockoptInt(conn.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
				conn.SetWriteTimeout(timeout)
				if err := writeFile(t, conn, path, 0, 4<<20); err != nil {
					t.Error(err)
				}
				if close {
					_ = conn.Close()
				}
			})
			err := recv(t, closed)
			if d := time.Since(began); !errors.Is(err, ErrWriteTimeout) || d < timeout || d > 10*timeout {
				t.Fatalf("closed after %v with %v", d, err)
			}
			if after := countFds(t); after != before-1 {
				t.Fatalf("fds %d before, %d after: want one fewer (the socket)", before, after)
			}
		})
	}
	t.Run("slow but steady", func(t *testing.T) {
		closed := make(chan error, 1)
		var conn Conn
		h := &funcHandler{
			open:  func(c Conn) { conn = c },
			close: func(c Conn, err error) { closed <- err },
		}
		l, addr := startLoop(t, Config{Handler: h})
		r := dialRcvbuf(t, addr, 16<<10)
		waitFor(t, "accepted", func() bool { var ok bool; onLoop(t, l, func() { ok = conn != nil }); return ok })
		onLoop(t, l, func() {
			_ = unix.SetsockoptInt(conn.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
			conn.SetWriteTimeout(timeout)
			conn.SetSendfile(true, 0)
			if err := writeFile(t, conn, path, 0, 4<<20); err != nil {
				t.Error(err)
			}
		})
		// 16 KiB every timeout/3: the whole takes far longer than the timeout,
		// which never passes between two sends.
		buf := make([]byte, 16<<10)
		for began := time.Now(); time.Since(began) < 5*timeout; time.Sleep(timeout / 3) {
			if _, err := r.Read(buf); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-closed:
			t.Fatalf("closed while the peer was reading: %v", err)
		default:
		}
		var q int
		onLoop(t, l, func() { q = conn.Queued() })
		if q == 0 {
			t.Fatal("the file was all sent: the test proves nothing")
		}
	})
}

// TestWriteFileErrors: what is not a regular file holding the range is refused
// and leaves the connection as it was; a reset peer closes a connection with a
// file pending like one with bytes pending.
func TestWriteFileErrors(t *testing.T) {
	path, _ := patternFile(t, 64<<10, 9)
	var conn Conn
	closed := make(chan error, 1)
	h := echoHandler()
	h.open = func(c Conn) { conn = c }
	h.close = func(c Conn, err error) { closed <- err }
	l, addr := startLoop(t, Config{Handler: h})
	r := dialRcvbuf(t, addr, 16<<10)
	waitFor(t, "accepted", func() bool { var ok bool; onLoop(t, l, func() { ok = conn != nil }); return ok })
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	before := countFds(t)
	onLoop(t, l, func() {
		for _, tc := range []struct {
			name string
			err  error
		}{
			{"pipe", conn.WriteFile(p[0], 0, 1)},
			{"beyond the end", writeFile(t, conn, path, 1, 64<<10)},
			{"negative offset", writeFile(t, conn, path, -1, 1)},
			{"closed fd", conn.WriteFile(1<<20, 0, 1)},
		} {
			if tc.err == nil {
				t.Errorf("%s: accepted", tc.name)
			}
			t.Logf("%s: %v", tc.name, tc.err)
		}
		if conn.Queued() != 0 {
			t.Errorf("%d bytes queued after refused segments", conn.Queued())
		}
	})
	if after := countFds(t); after != before {
		t.Fatalf("fds %d -> %d after refused segments", before, after)
	}
	if got := roundTrip(t, r, "still open"); got != "still open" {
		t.Fatalf("echo %q", got)
	}
	// A reset while a file segment waits.
	onLoop(t, l, func() {
		_ = unix.SetsockoptInt(conn.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
		for range 16 {
			if err := writeFile(t, conn, path, 0, 64<<10); err != nil {
				t.Error(err)
			}
		}
		if conn.Queued() == 0 {
			t.Error("nothing queued")
		}
	})
	_ = r.(*net.TCPConn).SetLinger(0)
	_ = r.Close()
	err := recv(t, closed)
	if !errors.Is(err, unix.ECONNRESET) && !errors.Is(err, unix.EPIPE) {
		t.Fatalf("closed with %v, want a reset", err)
	}
	if after := countFds(t); after != before-2 { // both ends of r's connection
		t.Fatalf("fds %d before, %d after the reset", before, after)
	}
	onLoop(t, l, func() {
		if err := writeFile(t, conn, path, 0, 1); !errors.Is(err, ErrClosed) {
			t.Errorf("WriteFile on a closed connection: %v", err)
		}
	})
}

// TestFileSegment: the helper a Conn without sendfile reads segments with.
func TestFileSegment(t *testing.T) {
	path, data := patternFile(t, 100<<10, 10)
	fd := openFd(t, path)
	before := countFds(t)
	s, err := OpenFileSegment(fd, 10, 50<<10)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(fd) // the segment keeps its own
	var got []byte
	buf := make([]byte, 16<<10)
	for s.Remaining() > 0 {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, data[10:10+50<<10]) {
		t.Fatal("segment read altered")
	}
	if n, err := s.Read(buf); n != 0 || err != nil {
		t.Fatalf("read past the segment: %d %v", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := countFds(t); after != before-1 {
		t.Fatalf("fds %d before, %d after", before, after)
	}
	// Truncated under it.
	fd = openFd(t, path)
	defer unix.Close(fd)
	s, err = OpenFileSegment(fd, 0, 100<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.Truncate(path, 1000); err != nil {
		t.Fatal(err)
	}
	n, err := s.Read(buf)
	if n != 1000 || err != nil {
		t.Fatalf("first read %d %v", n, err)
	}
	if _, err := s.Read(buf); !errors.Is(err, ErrFileTruncated) {
		t.Fatalf("read after the end: %v", err)
	}
	if _, err := OpenFileSegment(fd, 0, 2000); err == nil {
		t.Fatal("a range beyond the end was accepted")
	}
}

// writevFile is the WritevFile of an eventloop connection (a Conn does not have it).
func writevFile(t testing.TB, c Conn, bufs [][]byte, path string, off, n int64) error {
	fd := openFd(t, path)
	defer unix.Close(fd)
	return c.(*conn).WritevFile(bufs, fd, off, n)
}

// dataSegsOut is the number of TCP segments with data fd's socket sent.
func dataSegsOut(t testing.TB, fd int) uint32 {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		t.Fatal(err)
	}
	return info.Data_segs_out
}

// TestWritevFileOneSegment: a response head and a file go out with one writev,
// in one TCP segment (nginx's writev of the head and its first 32 KiB buffer),
// not the head on its own first: without sendfile for the file's first read,
// with sendfile for a file of a few KiB. A larger file with sendfile is the head
// then sendfile (content checked only: the kernel's autocorking may merge the
// two). Fails with WritevFile as Writev then WriteFile (2 segments).
func TestWritevFileOneSegment(t *testing.T) {
	small, smallData := patternFile(t, 4<<10, 11)
	mid, midData := patternFile(t, 20<<10, 12)
	for _, tc := range []struct {
		name     string
		sendfile bool
		path     string
		data     []byte
		segs     uint32
	}{
		{"pread", false, mid, midData, 1},
		{"sendfile small", true, small, smallData, 1},
		{"sendfile larger", true, mid, midData, 0}, // head then sendfile (autocorking may merge them)
	} {
		t.Run(tc.name, func(t *testing.T) {
			segs := make(chan uint32, 1)
			h := &funcHandler{data: func(c Conn, _ []byte) {
				c.SetSendfile(tc.sendfile, 0)
				before := dataSegsOut(t, c.Fd())
				if err := writevFile(t, c, [][]byte{[]byte("head "), nil, []byte("line\r\n")}, tc.path, 0, int64(len(tc.data))); err != nil {
					t.Error(err)
				}
				segs <- dataSegsOut(t, c.Fd()) - before
				_ = c.Close()
			}}
			_, addr := startLoop(t, Config{Handler: h})
			r := dial(t, addr)
			if _, err := r.Write([]byte("go")); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if want := append([]byte("head line\r\n"), tc.data...); !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
			if n := recv(t, segs); tc.segs > 0 && n != tc.segs {
				t.Fatalf("%d segments with data, want %d", n, tc.segs)
			}
		})
	}
}

// TestWritevFileOrder: bytes, a file's first piece and its rest arrive in order
// when the socket takes only part of them: the write ends inside the bytes,
// inside the piece, or after it (the rest read as the socket drains, or sent
// with sendfile); bytes written after wait behind the file; a small file read
// whole and partly sent keeps no descriptor; a bound on the file bytes per event
// and output already queued are honoured.
func TestWritevFileOrder(t *testing.T) {
	big, bigData := patternFile(t, 1<<20+3, 13)
	small, smallData := patternFile(t, 6<<10, 14)
	long := bytes.Repeat([]byte("h"), 200<<10) // more than the socket takes at once
	for _, mode := range sendModes {
		for _, tc := range []struct {
			name      string
			sndbuf    int
			maxChunk  int
			queued    bool // output queued before WritevFile
			bufs      [][]byte
			path      string
			data      []byte
			off, n    int64
			noFdsLeft bool
		}{
			{name: "inside the bytes", sndbuf: 4 << 10, bufs: [][]byte{[]byte("head\r\n"), long}, path: big, data: bigData, n: int64(len(bigData))},
			{name: "inside the piece", sndbuf: 4 << 10, bufs: [][]byte{[]byte("head\r\n")}, path: big, data: bigData, off: 7, n: int64(len(bigData)) - 9},
			{name: "small file", sndbuf: 4 << 10, bufs: [][]byte{long[:30<<10]}, path: small, data: smallData, n: int64(len(smallData)), noFdsLeft: true},
			{name: "max chunk", sndbuf: 0, maxChunk: 1000, bufs: [][]byte{[]byte("head\r\n")}, path: big, data: bigData, n: int64(len(bigData))},
			{name: "queued before", sndbuf: 4 << 10, queued: true, bufs: [][]byte{[]byte("head\r\n")}, path: small, data: smallData, n: int64(len(smallData))},
		} {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				var want bytes.Buffer
				if tc.queued {
					want.Write(long)
				}
				for _, b := range tc.bufs {
					want.Write(b)
				}
				want.Write(tc.data[tc.off : tc.off+tc.n])
				want.WriteString("tail")
				h := &funcHandler{data: func(c Conn, _ []byte) {
					if tc.sndbuf > 0 {
						_ = unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, tc.sndbuf)
					}
					c.SetSendfile(mode.sendfile, tc.maxChunk)
					if tc.queued {
						_, _ = c.Write(long)
					}
					before := countFds(t)
					if err := writevFile(t, c, tc.bufs, tc.path, tc.off, tc.n); err != nil {
						t.Error(err)
					}
					if c.Queued() == 0 {
						t.Error("everything went out at once: nothing left to resume")
					}
					if q := c.Queued(); tc.maxChunk > 0 && q != int(tc.n)-tc.maxChunk {
						t.Errorf("%d bytes queued, want all but the %d file bytes of one event", q, tc.maxChunk)
					}
					if after := countFds(t); tc.noFdsLeft && after != before {
						t.Errorf("fds %d -> %d: a file read whole kept a descriptor", before, after)
					}
					_, _ = c.Write([]byte("tail"))
					_ = c.Close()
				}}
				_, addr := startLoop(t, Config{Handler: h})
				r := dialRcvbuf(t, addr, 16<<10)
				if _, err := r.Write([]byte("go")); err != nil {
					t.Fatal(err)
				}
				_ = r.SetReadDeadline(time.Now().Add(20 * time.Second))
				got, err := io.ReadAll(r)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want.Bytes()) {
					t.Fatalf("got %d bytes, want %d; first difference at %d", len(got), want.Len(), firstDiff(got, want.Bytes()))
				}
			})
		}
	}
}

// TestWritevFileErrors: a range WriteFile refuses is refused before anything
// is sent (the bytes neither), and the connection stays as it was.
func TestWritevFileErrors(t *testing.T) {
	path, _ := patternFile(t, 64<<10, 15)
	var conn Conn
	h := echoHandler()
	h.open = func(c Conn) { conn = c }
	l, addr := startLoop(t, Config{Handler: h})
	r := dial(t, addr)
	waitFor(t, "accepted", func() bool { var ok bool; onLoop(t, l, func() { ok = conn != nil }); return ok })
	before := countFds(t)
	onLoop(t, l, func() {
		for _, sendfile := range []bool{false, true} {
			conn.SetSendfile(sendfile, 0)
			if err := writevFile(t, conn, [][]byte{[]byte("head")}, path, 1, 64<<10); err == nil {
				t.Error("a range beyond the end accepted")
			}
		}
		if conn.Queued() != 0 {
			t.Errorf("%d bytes queued after a refused range", conn.Queued())
		}
	})
	if after := countFds(t); after != before {
		t.Fatalf("fds %d -> %d after refused ranges", before, after)
	}
	if got := roundTrip(t, r, "still open"); got != "still open" {
		t.Fatalf("echo %q: the head of a refused range went out", got)
	}
}

// TestWritevFileSized: with the size of the caller's fstat the connection
// checks the range against that size, not the file (a range beyond it is
// refused though the file holds it: no fstat of its own), and a file truncated
// after the caller's fstat ends the connection after the head and what the
// file still had, with ErrFileTruncated, as one truncated while queued does
// (before, checkFile's fstat refused it and nothing was sent).
func TestWritevFileSized(t *testing.T) {
	const size, cut = 256 << 10, 100 << 10
	for _, mode := range sendModes {
		t.Run(mode.name, func(t *testing.T) {
			path, data := patternFile(t, size, 32)
			closed := make(chan error, 1)
			h := &funcHandler{
				data: func(c Conn, _ []byte) {
					c.SetSendfile(mode.sendfile, 0)
					fd := openFd(t, path)
					defer unix.Close(fd)
					var st unix.Stat_t
					if e := Fstat(fd, &st); e != 0 {
						t.Error(e)
					}
					cc := c.(*conn)
					if err := cc.WritevFileSized([][]byte{[]byte("head")}, fd, 0, 1000, 999); err == nil {
						t.Error("a range beyond the caller's size accepted")
					}
					if err := os.Truncate(path, cut); err != nil {
						t.Error(err)
					}
					err := cc.WritevFileSized([][]byte{[]byte("head")}, fd, 0, st.Size, st.Size)
					if err != nil && !errors.Is(err, ErrFileTruncated) {
						t.Errorf("WritevFileSized: %v", err)
					}
				},
				close: func(c Conn, err error) { closed <- err },
			}
			_, addr := startLoop(t, Config{Handler: h})
			r := dial(t, addr)
			if _, err := r.Write([]byte("go")); err != nil {
				t.Fatal(err)
			}
			_ = r.SetReadDeadline(time.Now().Add(20 * time.Second))
			got, _ := io.ReadAll(r)
			if err := recv(t, closed); !errors.Is(err, ErrFileTruncated) {
				t.Fatalf("closed with %v, want ErrFileTruncated", err)
			}
			if want := append([]byte("head"), data[:cut]...); !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want the %d before the cut; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}
