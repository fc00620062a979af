package tls

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// TestWriteFileAndCloseWrite: a userspace TLS connection sends a file segment in
// order between bytes (sealed from pread chunks), then CloseWrite sends
// close_notify and FIN while the connection still reads.
func TestWriteFileAndCloseWrite(t *testing.T) {
	certs(t)
	content := bytes.Repeat([]byte("numaproxy file "), 70_000) // ~1 MiB, not record-aligned
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const off = 7
	n := int64(len(content) - 100)
	gotAfter := make(chan string, 1)
	h := &funcHandler{data: func(c eventloop.Conn, b []byte) {
		if string(b) == "go" {
			c.Write([]byte("head|"))
			if err := c.WriteFile(int(f.Fd()), off, n); err != nil {
				t.Errorf("WriteFile: %v", err)
			}
			c.Write([]byte("|tail"))
			c.CloseWrite()
			return
		}
		gotAfter <- string(b) // still read after CloseWrite
	}}
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, userspace, h)
	c := dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	if _, err := c.Write([]byte("go")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c) // ends at close_notify
	if err != nil {
		t.Fatalf("read: %v (%d bytes)", err, len(got))
	}
	want := append(append([]byte("head|"), content[off:off+n]...), "|tail"...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
	if _, err := c.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-gotAfter:
		if s != "after" {
			t.Fatalf("read %q after CloseWrite", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing read after CloseWrite")
	}
}
