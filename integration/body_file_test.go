package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClientBodyInFileOnlyAgainstNginx: client_body_in_file_only on and clean
// write every body read whole to a named file that the upstream can open by
// $request_body_file (the upload offload idiom with proxy_pass_request_body off),
// on keeps it after the request and clean deletes it; $request_body is the body
// when it stayed in memory. What the upstream saw and whether the file is there
// afterwards, compared with nginx on the same http block.
func TestClientBodyInFileOnlyAgainstNginx(t *testing.T) {
	tmp := t.TempDir()
	var mu sync.Mutex
	files := map[string]string{} // the X-File of each request id, as the upstream got it
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("X-File")
		state := "no file"
		if name != "" {
			data, err := os.ReadFile(name)
			switch {
			case err != nil:
				// nginx names the unlinked temp file of a body past
				// client_body_buffer_size too; numaproxy's has no name.
				name = ""
			default:
				state = fmt.Sprintf("file of %d bytes %.10q", len(data), data)
			}
		}
		if name != "" {
			mu.Lock()
			files[r.Header.Get("X-Id")] = name
			mu.Unlock()
		}
		fmt.Fprintf(w, "%s %s Content-Length %d; %s; X-Body %.12q; X-File %s", r.Method, r.URL.Path, r.ContentLength, state,
			r.Header.Get("X-Body"), shapeOfName(name, tmp))
	})
	pass := "proxy_pass http://" + b.Addr + ";"
	hdrs := "proxy_set_header X-File $request_body_file; proxy_set_header X-Body $request_body; proxy_set_header X-Id $http_x_id; "
	conf := func(a []string) string {
		dir := filepath.Join(tmp, strings.ReplaceAll(a[0], ":", "_"))
		return `
server { listen ` + a[0] + `;
	client_body_temp_path ` + dir + `;
	client_body_buffer_size 1k;
	proxy_set_header X-File $request_body_file;
	proxy_set_header X-Body $request_body;
	location /on { client_body_in_file_only on; proxy_pass_request_body off; proxy_set_header Content-Length ""; ` + hdrs + pass + ` }
	location /clean { client_body_in_file_only clean; proxy_pass_request_body off; proxy_set_header Content-Length ""; ` + hdrs + pass + ` }
	location /pass { client_body_in_file_only clean; ` + pass + ` }
	location /levels { client_body_temp_path ` + dir + `/lv 1 2; client_body_in_file_only on; ` + pass + ` }
	location /mem { ` + pass + ` }
	location /stream { proxy_request_buffering off; client_body_in_file_only clean; proxy_set_header X-File $request_body_file; proxy_set_header X-Id $http_x_id; ` + pass + ` }
	location /count { proxy_pass_request_body off; proxy_set_header Content-Length ""; ` + hdrs + pass + ` }
	location /single { client_body_in_single_buffer on; ` + pass + ` }
	location /nested { client_body_in_file_only clean;
		location /nested/off { client_body_in_file_only off; ` + pass + ` } }
}`
	}
	big := strings.Repeat("0123456789", 500)
	bodies := []struct{ name, fields, body string }{
		{"none", "", ""},
		{"empty", "Content-Length: 0\r\n", ""},
		{"small", "Content-Length: 5\r\n", "hello"},
		{"big", fmt.Sprintf("Content-Length: %d\r\n", len(big)), big},
		{"chunked", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"},
	}
	paths := []string{"/on", "/clean", "/pass", "/levels", "/mem", "/single", "/nested/off", "/stream", "/count"}
	differential(t, 1, conf, func(name string, addrs []string) map[string]string {
		out := map[string]string{}
		for _, p := range paths {
			for _, bd := range bodies {
				id := name + p + " " + bd.name
				method := "POST"
				if bd.name == "none" {
					method = "GET"
				}
				raw := exchangeRaw(t, addrs[0], method+" "+p+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Id: "+id+"\r\n"+bd.fields+"\r\n"+bd.body)
				k := p + " " + bd.name
				id = name + k
				out[k] = answer(raw)
			}
		}
		// After the requests: still there (on) or deleted (clean)? nginx deletes
		// once its lingering close of the connection ends: wait for that.
		mu.Lock()
		defer mu.Unlock()
		cleaned := func() bool {
			for id, f := range files {
				if _, err := os.Stat(f); err == nil && strings.HasPrefix(id, name) && !strings.Contains(id, "/on") && !strings.Contains(id, "/levels") {
					return false
				}
			}
			return true
		}
		for end := time.Now().Add(3 * time.Second); !cleaned() && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
		for id, f := range files {
			if k, ok := strings.CutPrefix(id, name); ok {
				_, err := os.Stat(f)
				out[k+" afterwards"] = fmt.Sprintf("file there: %v", err == nil)
			}
		}
		if testing.Verbose() {
			for k, v := range out {
				t.Logf("%s: %s: %q", name, k, v)
			}
		}
		return out
	})
}

var digitsRe = regexp.MustCompile(`\d`)

// levelsRe is a name under levels 1 2: the last digit, the two before it, the name.
var levelsRe = regexp.MustCompile(`/(\d)/(\d\d)/(\d{10})$`)

// shapeOfName is a body file's name without what differs between the servers:
// their temp folders and the file's number.
func shapeOfName(name, tmp string) string {
	if name == "" {
		return "(none)"
	}
	rest := strings.TrimPrefix(name, tmp+"/")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[i:] // the server's own folder
	}
	if m := levelsRe.FindStringSubmatch(rest); m != nil && !strings.HasSuffix(m[3], m[1]) || m != nil && !strings.HasSuffix(m[3][:9], m[2]) {
		return "levels not from the name: " + rest
	}
	return "DIR" + digitsRe.ReplaceAllString(rest, "N")
}
