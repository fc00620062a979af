package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestProxyResponseSpill: a buffered response to a client that does not read goes on
// to a temporary file, so the upstream finishes sending while the client has read
// nothing, as in nginx; the client then gets it whole. proxy_max_temp_file_size
// bounds the file: with 0 the upstream waits for the client, with 1m it sends about
// that much more than the memory buffers hold. The files are unlinked from the start
// (nginx's sit in proxy_temp until the response ends) and no descriptor is left.
func TestProxyResponseSpill(t *testing.T) {
	// Large enough that the kernel's socket buffers on the way (loopback autotunes
	// them to several MiB) cannot hide whether the proxy reads ahead.
	const size = 48 << 20
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	want := sha256.Sum256(body)
	var sentAll, written atomic.Int64
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for off := 0; off < size; off += 64 << 10 {
			if _, err := w.Write(body[off : off+64<<10]); err != nil {
				return
			}
			written.Add(64 << 10)
		}
		sentAll.Add(1)
	})
	conf := func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location / { proxy_pass http://` + up.Addr + `; }
    location /nofile { proxy_max_temp_file_size 0; proxy_pass http://` + up.Addr + `; }
    location /small { proxy_max_temp_file_size 1m; proxy_pass http://` + up.Addr + `; }
  }`
	}
	np, ng := addrFor(t), addrFor(t)
	inst := startHTTP(t, conf(np), np)
	startNginx(t, conf(ng), ng)
	fdsBefore := inst.fdCount()
	name := map[string]string{np: "numaproxy", ng: "nginx"}
	for _, c := range []struct {
		path     string
		finishes bool  // the upstream sends it all while the client reads nothing
		atMost   int64 // else: what it may send meanwhile
	}{
		{"/", true, 0},
		{"/nofile", false, 24 << 20},
		{"/small", false, 25 << 20},
	} {
		for _, a := range []string{np, ng} {
			sentAll.Store(0)
			written.Store(0)
			conn := slowReader(t, a)
			conn.Write([]byte("GET " + c.path + " HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"))
			time.Sleep(2 * time.Second)
			if got := sentAll.Load() == 1; got != c.finishes {
				t.Errorf("%s on %s: the upstream finished: %v (%d bytes written), want %v", c.path, name[a], got, written.Load(), c.finishes)
			}
			if !c.finishes && written.Load() > c.atMost {
				t.Errorf("%s on %s: the upstream wrote %d bytes while the client read nothing, want at most %d", c.path, name[a], written.Load(), c.atMost)
			}
			br := bufio.NewReaderSize(conn, 64<<10)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s on %s: %v", c.path, a, err)
			}
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			if err != nil || n != size || [32]byte(h.Sum(nil)) != want {
				t.Errorf("%s on %s: %d bytes (%v), intact %v", c.path, name[a], n, err, [32]byte(h.Sum(nil)) == want)
			}
			conn.Close()
		}
	}
	if entries, _ := os.ReadDir(inst.path("proxy_temp")); len(entries) != 0 {
		t.Errorf("proxy_temp holds %d entries", len(entries))
	}
	waitFor(t, "the descriptors to go back", 5*time.Second, func() bool { return inst.fdCount() <= fdsBefore })
	logs, _ := filepath.Glob(inst.path("logs/*"))
	var all []byte
	for _, f := range append(logs, inst.path("stderr.txt")) {
		b, _ := os.ReadFile(f)
		all = append(all, b...)
	}
	if !strings.Contains(string(all), "buffered to a temporary file") {
		t.Errorf("no warning in the logs")
	}
}

// slowReader connects with a small receive buffer, so that little of a response fits
// in the kernel on the client's side.
func slowReader(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
