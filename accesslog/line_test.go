package accesslog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/internal/looptest"
)

// TestLinesInTheBuffer: lines formatted in a file's buffer itself reach the file
// whole and in order, among them one longer than what is left in the buffer and
// than the room kept for a line (its formatting outgrows the buffer: it goes the
// long way, after the buffer), and lines of varied lengths across buffers.
func TestLinesInTheBuffer(t *testing.T) {
	addr := looptest.Addr(t)
	dir := startWorker(t, addr, `
  log_format f '$http_user_agent';
  server {
    listen `+addr+`;
    location / { access_log logs/f.log f buffer=16k; return 200 "ok\n"; }
  }`)
	k := looptest.Dial(t, addr)
	var want strings.Builder
	send := func(ua string) {
		want.WriteString(ua + "\n")
		req := "GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: " + ua + "\r\n\r\n"
		if st := k.RoundTrip(t, []byte(req)); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	// 240 lines of 64 bytes leave 1 KiB of a 16 KiB buffer, the room kept for
	// a line: the next one, of 3000 bytes, is formatted there and outgrows it.
	for i := range 240 {
		send(fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 59)))
	}
	send("long-" + strings.Repeat("y", 2995))
	for i := range 300 {
		n := 10 + i%50
		if i%37 == 5 {
			n = 1000 + i*30%6000
		}
		send(fmt.Sprintf("%d-%s", i, strings.Repeat("z", n)))
	}
	Flush()
	got, err := os.ReadFile(filepath.Join(dir, "logs/f.log"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want.String(), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d: got %.80q, want %.80q (%d lines, want %d)", i, gl[i], wl[i], len(gl), len(wl))
			}
		}
		t.Fatalf("%d lines, want %d", len(gl), len(wl))
	}
}
