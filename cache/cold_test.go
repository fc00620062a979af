package cache

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/internal/coldfs"
)

// TestOpenCold: a hit's entry opens and reads right whether its path and pages
// are in the kernel's caches (raw openat2 RESOLVE_CACHED, raw preadv2
// RWF_NOWAIT) or not (a file system just mounted again: EAGAIN, then the
// calls the scheduler sees), for a body read whole with the head and one
// larger than the buffer; a file cut short is still a miss when cold.
func TestOpenCold(t *testing.T) {
	fs := coldfs.New(t)
	z := managedZone(t, Config{Dir: fs.Dir, Levels: []int{1, 2}})
	small := "small body"
	large := string(bytes.Repeat([]byte("0123456789abcdef"), 4096)) // 64 KiB
	ks, kl, kc := store(t, z, "small", small), store(t, z, "large", large), store(t, z, "cut", large)
	cut := string(z.Path(nil, kc))
	if err := os.Truncate(cut, 1000); err != nil {
		t.Fatal(err)
	}
	cached := func(k Key) bool {
		fd, _, ok := eventloop.OpenCached(unix.AT_FDCWD, append(z.Path(nil, k), 0), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if ok && fd >= 0 {
			unix.Close(fd)
		}
		return ok
	}
	for _, cold := range []bool{true, false} {
		for _, c := range []struct {
			k    Key
			text string
			body string
		}{{ks, "small", small}, {kl, "large", large}} {
			if cold {
				fs.Remount(t)
				if cached(c.k) {
					t.Fatal("RESOLVE_CACHED opened a path just remounted")
				}
			} else {
				if _, err := os.Stat(string(z.Path(nil, c.k))); err != nil {
					t.Fatal(err)
				}
				if !cached(c.k) {
					t.Fatal("RESOLVE_CACHED failed on an entry just looked up")
				}
			}
			buf := make([]byte, 4096)
			e, _, err := z.Open(c.k, []byte(c.text), nil, buf)
			if err != nil {
				t.Fatalf("%s cold=%v: %v", c.text, cold, err)
			}
			body := make([]byte, e.BodyLen)
			n := copy(body, buf[e.BodyStart:e.Read])
			if n < len(body) {
				k, err := eventloop.Pread(e.Fd, body[n:], e.BodyStart+int64(n))
				if err != nil || n+k != len(body) {
					t.Fatalf("%s cold=%v: body read %d+%d: %v", c.text, cold, n, k, err)
				}
			}
			unix.Close(e.Fd)
			if string(e.Head) != "HTTP/1.1 200 OK\r\n\r\n" || string(body) != c.body {
				t.Fatalf("%s cold=%v: head %q, body of %d bytes not the stored one", c.text, cold, e.Head, len(body))
			}
		}
		if cold {
			fs.Remount(t)
		}
		if e, _, err := z.Open(kc, []byte("cut"), nil, make([]byte, 4096)); err == nil {
			unix.Close(e.Fd)
			t.Fatalf("cold=%v: a file cut short was opened", cold)
		}
	}
}
