package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAuthRequestStaticFileIgnoresRangesLikeNginx: an auth_request subrequest
// answered from a file is not shaped by the client's Range and conditional
// fields, which are the main request's: nginx's range and not modified filters
// leave a subrequest's response alone. A range past the (small) auth file's end
// made the subrequest 416, an If-None-Match of its ETag 304, and either made the
// protected request 500 instead of nginx's 206 or 200.
func TestAuthRequestStaticFileIgnoresRangesLikeNginx(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "auth.txt"), []byte(strings.Repeat("a", 20000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.txt"), []byte(strings.Repeat("m", 300000)), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "auth.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// nginx's ETag: the modification time and size in hex.
	authETag := `"` + strconvHex(fi.ModTime().Unix()) + "-" + strconvHex(fi.Size()) + `"`
	body := `
  server {
    listen %[1]s;
    location = /auth { internal; alias ` + dir + `/auth.txt; tcp_nopush on; }
    location / { auth_request /auth; root ` + dir + `; }
  }`
	srvs := bothServers(t, strings.ReplaceAll(body, "%[2]s", ""), "")
	for _, field := range []string{
		"Range: bytes=100000-",
		"Range: bytes=0-0,2-2,4-4",
		"If-None-Match: " + authETag,
		`If-Match: "other"`,
	} {
		var lines []string
		for _, s := range srvs {
			raw, err := roundTripRaw(t, s.addr, "GET /main.txt HTTP/1.1\r\nHost: t\r\n"+field+"\r\nConnection: close\r\n\r\n")
			if err != nil {
				t.Fatalf("%s %s: %v", s.name, field, err)
			}
			line, _, _ := strings.Cut(raw, "\r\n")
			lines = append(lines, line)
		}
		t.Logf("%s: numaproxy %q, nginx %q", field, lines[0], lines[1])
		if lines[0] != lines[1] {
			t.Errorf("%s: numaproxy %q, nginx %q", field, lines[0], lines[1])
		}
	}
}

func strconvHex(n int64) string { return strings.ToLower(strconv.FormatInt(n, 16)) }
