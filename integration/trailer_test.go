package integration

import (
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAddTrailerMatchesNginx: add_trailer as nginx 1.22 has it, on the same http
// block: the fields end a chunked body (a response with a length goes chunked to
// an HTTP/1.1 client, its Content-Length dropped), only for the statuses of
// add_header unless "always", not when the value is empty, not for HEAD; an
// HTTP/1.0 client gets none but $sent_trailer_NAME logs them; a level without
// add_trailer inherits its parent's. The responses (Date and Server aside) and
// the log lines are compared byte for byte (the head's fields sorted).
func TestAddTrailerMatchesNginx(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "9")
		io.WriteString(w, "upstream\n")
	})
	root := writeTree(t, map[string]string{"static/file.txt": strings.Repeat("file text\n", 4)})
	httpBlock := func(addr string) string {
		return `
  log_format tr '$request_method $uri $server_protocol $status t="$sent_trailer_x_t" a="$sent_trailer_x_a" ` +
			`e="$sent_trailer_x_e" srv="$sent_trailer_x_srv" cl="$sent_http_content_length" te="$sent_http_transfer_encoding"';
  server {
    listen ` + addr + `;
    root ` + root + `;
    access_log logs/tr.log tr;
    etag off;
    add_trailer X-Srv "from the server";
    location /t { add_trailer X-T "v-$status"; add_trailer X-E $arg_none; add_trailer X-A a always; return 200 "body"; }
    location /nf { add_trailer X-T t; add_trailer X-A "a $uri" always; return 404 "not here"; }
    location /static/ { add_trailer X-T file; }
    location /p/ { add_trailer X-T proxied; proxy_pass http://` + be.Addr + `; }
    location /inh { return 200 "inherited"; }
    location /off { chunked_transfer_encoding off; add_trailer X-T off; return 200 "no chunks"; }
  }`
	}
	requests := []string{
		"GET /t HTTP/1.1\r\nHost: t\r\n",
		"GET /t HTTP/1.0\r\n",
		"HEAD /t HTTP/1.1\r\nHost: t\r\n",
		"GET /nf HTTP/1.1\r\nHost: t\r\n",
		"GET /static/file.txt HTTP/1.1\r\nHost: t\r\n",
		"GET /p/x HTTP/1.1\r\nHost: t\r\n",
		"GET /inh HTTP/1.1\r\nHost: t\r\n",
		"GET /off HTTP/1.1\r\nHost: t\r\n",
	}
	npAddr, ngAddr := addrFor(t), addrFor(t)
	np := startHTTP(t, httpBlock(npAddr), npAddr)
	ng := startNginx(t, httpBlock(ngAddr), ngAddr)
	exchange := func(addr, req string) string {
		t.Helper()
		c := dial(t, addr)
		defer c.Close()
		io.WriteString(c, req+"Connection: close\r\n\r\n")
		got, err := readToEOF(c)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		// The head's fields in order (nginx puts Accept-Ranges last), the body as is.
		head, body, _ := strings.Cut(got, "\r\n\r\n")
		lines := strings.Split(head, "\r\n")
		var keep []string
		for _, line := range lines[1:] {
			if !strings.HasPrefix(line, "Date: ") && !strings.HasPrefix(line, "Server: ") {
				keep = append(keep, line)
			}
		}
		slices.Sort(keep)
		return lines[0] + "\r\n" + strings.Join(keep, "\r\n") + "\r\n\r\n" + body
	}
	for _, req := range requests {
		a, b := exchange(npAddr, req), exchange(ngAddr, req)
		if a != b {
			t.Errorf("%q:\nnumaproxy %q\nnginx     %q", req, a, b)
		}
	}
	npLines := readLines(t, np.path("logs/tr.log"), len(requests))
	ngLines := readLines(t, filepath.Join(ng.dir, "logs", "tr.log"), len(requests))
	for i := range requests {
		if npLines[i] != ngLines[i] {
			t.Errorf("log line %d:\nnumaproxy %s\nnginx     %s", i+1, npLines[i], ngLines[i])
		}
	}
	if t.Failed() {
		t.Logf("nginx's lines:\n%s", strings.Join(ngLines, "\n"))
	}
}
