package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/internal/statictest"
)

// Static files, numaproxy against Debian's nginx: both serve the same tree from
// the same http block, and every answer is compared (status, the headers that
// matter, bodies; the core's error pages by status and headers only).

// withoutDACOverride runs argv as root without CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH, so that a file without read permission is unreadable to
// the server as it would be to an unprivileged worker.
func withoutDACOverride(argv ...string) *exec.Cmd {
	return exec.Command("setpriv", append([]string{"--bounding-set=-dac_override,-dac_read_search"}, argv...)...)
}

// startStaticNginx runs nginx (one process) on the http block in its own prefix.
func startStaticNginx(t *testing.T, httpBody string, listen ...string) {
	t.Helper()
	bin := nginxBinary(t)
	cfg := "user root;\nerror_log logs/error.log info;\npid logs/nginx.pid;\nevents { worker_connections 256; }\nhttp {\naccess_log off;\nclient_body_temp_path logs;\n" + httpBody + "\n}\n"
	dir := writeTree(t, map[string]string{"conf/nginx.conf": cfg, "logs/.keep": ""})
	cmd := withoutDACOverride(bin, "-p", dir+"/", "-c", filepath.Join(dir, "conf/nginx.conf"), "-e", filepath.Join(dir, "logs/error.log"), "-g", "daemon off; master_process off;")
	out, err := os.Create(filepath.Join(dir, "stderr.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	for _, a := range listen {
		waitFor(t, "nginx listening on "+a, 10*time.Second, func() bool {
			select {
			case <-exited:
				data, _ := os.ReadFile(filepath.Join(dir, "stderr.txt"))
				log, _ := os.ReadFile(filepath.Join(dir, "logs/error.log"))
				t.Fatalf("nginx exited: %s%s", data, log)
			default:
			}
			return dialOK(a)
		})
	}
}

// startStaticNumaproxy runs numaproxy (one loop) on the http block, as root
// without CAP_DAC_OVERRIDE like nginx above.
func startStaticNumaproxy(t *testing.T, httpBody string, listen ...string) *instance {
	t.Helper()
	cfg := "worker_processes 1;\nerror_log logs/error.log info;\nevents { }\nhttp {\n" + httpBody + "\n}\n"
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": cfg})
	in := &instance{t: t, dir: dir, exited: make(chan error, 1)}
	t.Cleanup(in.checkNoPanic)
	in.cmd = withoutDACOverride(binary, "-p", dir)
	out, err := os.Create(filepath.Join(dir, "stderr.txt"))
	if err != nil {
		t.Fatal(err)
	}
	in.cmd.Stdout, in.cmd.Stderr = out, out
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { in.exited <- in.cmd.Wait(); out.Close() }()
	t.Cleanup(func() {
		in.cmd.Process.Kill()
		<-in.exited
	})
	for _, a := range listen {
		waitFor(t, "numaproxy listening on "+a, 10*time.Second, func() bool {
			select {
			case err := <-in.exited:
				data, _ := os.ReadFile(filepath.Join(dir, "stderr.txt"))
				t.Fatalf("numaproxy exited: %v %s", err, data)
			default:
			}
			return dialOK(a)
		})
	}
	return in
}

func dialOK(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// staticServer is the shared server and the locations only the binary has: the
// core's redirects and error pages, sendfile, an unreadable folder.
var staticServer = statictest.Server(`
		location /sf/ { alias ROOT/; sendfile on; tcp_nopush on; }
		location /nosf/ { alias ROOT/; sendfile off; }
		location /chunk/ { alias ROOT/; sendfile on; sendfile_max_chunk 16k; }
		location /ailocked/ { alias ROOT/locked/; autoindex on; }
		location /ret { return 301 /elsewhere; }
		location /ep/ { alias ROOT/; error_page 404 /page.html; expires 1h; }
		location /ep2/ { alias ROOT/; error_page 404 =200 /page.html; }
`)

const staticRedirectServers = `
	server { listen 127.0.0.1:PORT1; server_name example.org www.example.org; root ROOT; server_name_in_redirect on; port_in_redirect off; location /ret { return 301 /elsewhere; } location / { } }
	server { listen 127.0.0.1:PORT2; root ROOT; absolute_redirect off; location /ret { return 301 /elsewhere; } location / { } }
`

// extraStaticFiles adds to the tree what the package's comparison has no use for:
// files the servers may not read, a large file.
func extraStaticFiles(t *testing.T, ft *statictest.Tree) {
	t.Helper()
	for name, mode := range map[string]os.FileMode{"secret.txt": 0, "locked/x.txt": 0o644} {
		p := filepath.Join(ft.Root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chtimes(p, ft.Mtime, ft.Mtime)
	}
	os.Chmod(filepath.Join(ft.Root, "locked"), 0)
}

func TestStaticDifferential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the tree has files owned by others (disable_symlinks if_not_owner): needs root")
	}
	nginxBinary(t)
	t.Setenv("TZ", statictest.Zone)
	dir := t.TempDir()
	ft := statictest.MakeTree(t, dir)
	extraStaticFiles(t, ft)
	block := func(ports [3]int) string {
		repl := strings.NewReplacer("ROOT", ft.Root, "PORT1", strconv.Itoa(ports[1]), "PORT2", strconv.Itoa(ports[2]), "PORT", strconv.Itoa(ports[0]))
		return repl.Replace(staticServer) + repl.Replace(staticRedirectServers)
	}
	var ngPorts, npPorts [3]int
	var ngAddrs, npAddrs [3]string
	for i := range ngPorts {
		ngPorts[i], npPorts[i] = freePort(t), freePort(t)
		ngAddrs[i], npAddrs[i] = "127.0.0.1:"+strconv.Itoa(ngPorts[i]), "127.0.0.1:"+strconv.Itoa(npPorts[i])
	}
	startStaticNginx(t, block(ngPorts), ngAddrs[:]...)
	np := startStaticNumaproxy(t, block(npPorts), npAddrs[:]...)

	cases := append(statictest.Cases(ft.Mtime), []statictest.Case{
		// Encoded traversal and NUL.
		{Method: "GET", Target: "/%2e%2e/%2e%2e/etc/passwd"},
		{Method: "GET", Target: "/dir/%2e%2e/a.txt"},
		{Method: "GET", Target: "/dir/..%2f..%2f..%2fetc%2fpasswd"},
		{Method: "GET", Target: "/%2e%2e%2fetc/passwd"},
		{Method: "GET", Target: "/a.txt%00"},
		{Method: "GET", Target: "/a.txt%00.html"},
		{Method: "GET", Target: "//../a.txt"},
		{Method: "GET", Target: "/dir//..//a.txt"},
		{Method: "GET", Target: "/i/..%2f..%2fa.txt"},
		{Method: "GET", Target: "/re/..%2fa.txt"},
		// Unreadable.
		{Method: "GET", Target: "/secret.txt"},
		{Method: "GET", Target: "/locked/x.txt"},
		{Method: "GET", Target: "/locked/"},
		{Method: "GET", Target: "/ailocked/"},
		// sendfile on and off, a chunked sendfile.
		{Method: "GET", Target: "/sf/big.bin"},
		{Method: "GET", Target: "/sf/dir2/m.bin"},
		{Method: "GET", Target: "/sf/a.txt"},
		{Method: "GET", Target: "/sf/dir2/m.bin", Headers: map[string]string{"Range": "bytes=1000-700000,-100"}},
		{Method: "GET", Target: "/nosf/big.bin"},
		{Method: "GET", Target: "/nosf/dir2/m.bin"},
		{Method: "GET", Target: "/nosf/a.txt"},
		{Method: "HEAD", Target: "/nosf/dir2/m.bin"},
		{Method: "GET", Target: "/nosf/dir2/m.bin", Headers: map[string]string{"Range": "bytes=5-6,1000000-"}},
		{Method: "GET", Target: "/chunk/dir2/m.bin"},
		// A file as an error page.
		{Method: "GET", Target: "/ep/missing"},
		{Method: "GET", Target: "/ep/missing", Headers: map[string]string{"If-None-Match": `*`}},
		{Method: "GET", Target: "/ep/missing", Headers: map[string]string{"Range": "bytes=0-1"}},
		{Method: "HEAD", Target: "/ep/missing"},
		{Method: "GET", Target: "/ep2/missing"},
		{Method: "GET", Target: "/ep2/missing", Headers: map[string]string{"If-None-Match": `*`}},
		{Method: "GET", Target: "/ep2/missing", Headers: map[string]string{"Range": "bytes=0-1"}},
		// The core's redirects.
		{Method: "GET", Target: "/ret"},
		{Method: "GET", Target: "/ret", Server: 1},
		{Method: "GET", Target: "/ret", Server: 2},
		{Method: "GET", Target: "/dir", Server: 2},
	}...)
	for _, c := range cases {
		name := c.Method + " " + c.Target
		if len(c.Headers) > 0 {
			name += fmt.Sprint(" ", c.Headers)
		}
		if diff := askBoth(t, ngAddrs[c.Server], npAddrs[c.Server], c); diff != "" {
			t.Errorf("%s:\n%s", name, diff)
		}
	}

	// nginx's error-log lines, in its words.
	for _, line := range []string{
		`open() "` + ft.Root + `/missing.txt" failed (2: No such file or directory)`,
		`open() "` + ft.Root + `/secret.txt" failed (13: Permission denied)`,
		`directory index of "` + ft.Root + `/dir2/" is forbidden`,
	} {
		np.waitLog(line)
	}

	// Where numaproxy differs on purpose: an alias in a location without a trailing
	// slash lets nginx climb out of the alias ("/ali../a.txt" is www/dir/../a.txt).
	c := statictest.Case{Method: "GET", Target: "/ali../a.txt"}
	want, got := askStatic(t, ngAddrs[0], c), askStatic(t, npAddrs[0], c)
	if want.Status != 200 || want.Body != "hello world\n" || got.Status != 403 {
		t.Errorf("alias traversal: nginx %d %q, numaproxy %d; want nginx 200, numaproxy 403", want.Status, want.Body, got.Status)
	}
}

var portRe = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// askStatic is statictest.Ask with the addresses in headers masked: each server
// has its own port.
func askStatic(t *testing.T, addr string, c statictest.Case) statictest.Answer {
	t.Helper()
	a := statictest.Ask(t, addr, c)
	for k, v := range a.Headers {
		a.Headers[k] = portRe.ReplaceAllString(v, "127.0.0.1:PORT")
	}
	return a
}

// askBoth sends c to nginx and to numaproxy and lists the differences. Times in
// Expires and Cache-Control count from the Date: it asks again when the two
// answers came in different seconds.
func askBoth(t *testing.T, ngAddr, npAddr string, c statictest.Case) string {
	t.Helper()
	var want, got statictest.Answer
	for try := 0; try < 5; try++ {
		want, got = askStatic(t, ngAddr, c), askStatic(t, npAddr, c)
		if want.Date == got.Date {
			break
		}
	}
	return statictest.Compare(want, got, "numaproxy")
}

// TestStaticSlowReader: a file far larger than the socket buffers, asked for by a
// client that does not read, is sent as the client drains it (sendfile on, off,
// and in chunks), while the loop (numaproxy runs one) keeps answering another
// connection; the slow client then gets every byte.
func TestStaticSlowReader(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 24<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>12)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small.txt"), []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := addrFor(t)
	startHTTP(t, `server { listen `+addr+`; root `+dir+`;
		location /on/ { alias `+dir+`/; sendfile on; tcp_nopush on; }
		location /off/ { alias `+dir+`/; sendfile off; }
		location /chunk/ { alias `+dir+`/; sendfile on; sendfile_max_chunk 64k; }
	}`, addr)
	for _, loc := range []string{"/on/", "/off/", "/chunk/"} {
		slow := dial(t, addr)
		if _, err := io.WriteString(slow, "GET "+loc+"big.bin HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// The slow client reads nothing for a while; the other connection is served.
		fast := dial(t, addr)
		br := bufio.NewReader(fast)
		for i := 0; i < 20; i++ {
			fast.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(fast, "GET "+loc+"small.txt HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: the other connection, request %d, while a large file waits: %v", loc, i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != "small\n" {
				t.Fatalf("%s: %d %q", loc, resp.StatusCode, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		fast.Close()
		slow.SetDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: after %d bytes: %v", loc, len(got), err)
		}
		if resp.StatusCode != 200 || !bytes.Equal(got, big) {
			t.Fatalf("%s: status %d, %d bytes (want %d), equal %v", loc, resp.StatusCode, len(got), len(big), bytes.Equal(got, big))
		}
		slow.Close()
	}
}

// TestStaticFiltersOnProxied: expires and charset apply to proxied responses and
// to the core's error pages, as in nginx (its headers and charset filters), and a
// proxied response is not turned into a 304 or a 206 (nginx only does that for
// responses it may cache, or with proxy_force_ranges).
func TestStaticFiltersOnProxied(t *testing.T) {
	lm := "Sat, 09 Mar 2024 16:05:07 GMT"
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ct/plain":
			w.Header().Set("Content-Type", "text/html")
		case "/ct/koi":
			w.Header().Set("Content-Type", "text/html; charset=koi8-r")
		case "/ct/param":
			w.Header().Set("Content-Type", "text/plain; format=flowed")
		case "/ct/image":
			w.Header().Set("Content-Type", "image/png")
		case "/ct/lm":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Last-Modified", lm)
			w.Header().Set("ETag", `"abc"`)
		case "/ct/cc":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Cache-Control", "private")
			w.Header().Set("Expires", "Thu, 01 Jan 2037 00:00:00 GMT")
		case "/ct/redirect":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(302)
			return
		case "/ct/xaccel":
			w.Header().Set("Content-Type", "application/x-custom")
			w.Header().Set("X-Accel-Redirect", "/files/a.txt")
		case "/ct/xaccel2":
			w.Header().Set("X-Accel-Redirect", "/files2/a.txt")
			w.Header().Set("Accept-Ranges", "none")
			w.Header().Set("Expires", "Thu, 01 Jan 2037 00:00:00 GMT")
			w.Header().Set("Cache-Control", "private")
		case "/ct/missing":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(404)
			return
		}
		io.WriteString(w, "body\n")
	})
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "a.txt"), []byte("file a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2024, 3, 9, 16, 5, 7, 0, time.UTC)
	os.Chtimes(filepath.Join(files, "a.txt"), mtime, mtime)
	block := func(port int) string {
		return `server { listen 127.0.0.1:` + strconv.Itoa(port) + `;
			location /files/ { alias ` + files + `/; internal; }
			location /files2/ { alias ` + files + `/; internal; expires 1h; }
			location /ct/ { proxy_pass http://` + be.Addr + `; expires 1h; charset utf-8; }
			location /mod/ { proxy_pass http://` + be.Addr + `/ct/; expires modified 1d; }
			location /none/ { expires epoch; charset utf-8; }
		}`
	}
	ngPort, npPort := freePort(t), freePort(t)
	ngAddr, npAddr := "127.0.0.1:"+strconv.Itoa(ngPort), "127.0.0.1:"+strconv.Itoa(npPort)
	startNginx(t, block(ngPort), ngAddr)
	startHTTP(t, block(npPort), npAddr)
	cases := []statictest.Case{
		{Method: "GET", Target: "/ct/plain"},
		{Method: "GET", Target: "/ct/koi"},
		{Method: "GET", Target: "/ct/param"},
		{Method: "GET", Target: "/ct/image"},
		{Method: "GET", Target: "/ct/lm"},
		{Method: "GET", Target: "/ct/lm", Headers: map[string]string{"If-Modified-Since": lm}},
		{Method: "GET", Target: "/ct/lm", Headers: map[string]string{"If-None-Match": `"abc"`}},
		{Method: "GET", Target: "/ct/lm", Headers: map[string]string{"Range": "bytes=0-1"}},
		{Method: "GET", Target: "/ct/cc"},
		{Method: "GET", Target: "/ct/redirect"},
		{Method: "GET", Target: "/ct/missing"},
		{Method: "GET", Target: "/mod/lm"},
		{Method: "GET", Target: "/mod/plain"},
		{Method: "GET", Target: "/none/nothing"},
		{Method: "GET", Target: "/ct/xaccel"},
		{Method: "GET", Target: "/ct/xaccel2"},
		{Method: "GET", Target: "/ct/xaccel2", Headers: map[string]string{"Range": "bytes=0-1"}},
	}
	for _, c := range cases {
		if diff := askBoth(t, ngAddr, npAddr, c); diff != "" {
			t.Errorf("%s %s %v:\n%s", c.Method, c.Target, c.Headers, diff)
		}
	}
}

// TestDefaultConfigServesFiles: the repository's default configuration (what `make
// run` serves, ports moved) answers both from the proxy example and from html/.
func TestDefaultConfigServesFiles(t *testing.T) {
	src, err := os.ReadFile("../conf/numaproxy.conf")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../html/index.html")
	if err != nil {
		t.Fatal(err)
	}
	front, app := addrFor(t), addrFor(t)
	cfg := strings.NewReplacer("127.0.0.1:8080", front, "127.0.0.1:8081", app, "worker_processes auto;", "worker_processes 1;").Replace(string(src))
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": cfg, "html/index.html": string(page)})
	start(t, dir)
	waitFor(t, "numaproxy listening on "+front, 10*time.Second, func() bool { return dialOK(front) })
	for _, c := range []struct{ path, want, ctype string }{
		{"/static/", string(page), "text/html; charset=utf-8"},
		{"/static/index.html", string(page), "text/html; charset=utf-8"},
		{"/hello", "Hello from the upstream: GET /hello", "text/plain"},
	} {
		resp, err := http.Get("http://" + front + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(body), c.want) || resp.Header.Get("Content-Type") != c.ctype {
			t.Errorf("%s: %d %q %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// TestStaticVariables: $document_root, $realpath_root and $request_filename, as
// nginx has them, for root, alias (a symbolic link on the way) and a regex alias.
func TestStaticVariables(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "real/sub"), 0o755)
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	block := func(port int) string {
		v := `"$document_root|$realpath_root|$request_filename\n"`
		return `server { listen 127.0.0.1:` + strconv.Itoa(port) + `; root ` + dir + `/link;
			location /r/ { return 200 ` + v + `; }
			location /a/ { alias ` + dir + `/link/sub/; return 200 ` + v + `; }
			location ~ ^/re/(.*)$ { alias ` + dir + `/link/$1; return 200 ` + v + `; }
			location /h/ { alias ` + dir + `/real/; add_header X-Root $document_root; add_header X-File $request_filename; }
		}`
	}
	ngPort, npPort := freePort(t), freePort(t)
	ngAddr, npAddr := "127.0.0.1:"+strconv.Itoa(ngPort), "127.0.0.1:"+strconv.Itoa(npPort)
	startNginx(t, block(ngPort), ngAddr)
	startHTTP(t, block(npPort), npAddr)
	for _, target := range []string{"/r/x.txt", "/a/y/z", "/re/sub/q"} {
		c := statictest.Case{Method: "GET", Target: target}
		want, got := askStatic(t, ngAddr, c), askStatic(t, npAddr, c)
		if want.Status != got.Status || want.Body != got.Body {
			t.Errorf("%s: nginx %d %q, numaproxy %d %q", target, want.Status, want.Body, got.Status, got.Body)
		}
	}
	for _, addr := range []string{ngAddr, npAddr} {
		resp, err := http.Get("http://" + addr + "/h/nothing")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 || resp.Header.Get("X-Root") != "" {
			// add_header without always: not on a 404.
			t.Errorf("%s: %d X-Root %q", addr, resp.StatusCode, resp.Header.Get("X-Root"))
		}
	}
}

// TestStaticPipelined: pipelined requests for files (sent with sendfile, read,
// ranges, errors) come back whole and in order on one connection, behind a file
// the socket did not take at once.
func TestStaticPipelined(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "d"), 0o755)
	addr := addrFor(t)
	startHTTP(t, `server { listen `+addr+`; root `+dir+`; sendfile on; tcp_nopush on;
		location /off/ { alias `+dir+`/; sendfile off; } }`, addr)
	c := dial(t, addr)
	defer c.Close()
	var req strings.Builder
	targets := []string{"/big.bin", "/a.txt", "/d", "/missing", "/off/big.bin", "/a.txt", "/big.bin"}
	for _, tg := range targets {
		req.WriteString("GET " + tg + " HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	req.WriteString("GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=1-2\r\n\r\n")
	if _, err := io.WriteString(c, req.String()); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	want := []struct {
		status int
		body   []byte
	}{{200, big}, {200, []byte("hello\n")}, {301, nil}, {404, nil}, {200, big}, {200, []byte("hello\n")}, {200, big}, {206, []byte("el")}}
	for i, w := range want {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if resp.StatusCode != w.status || w.body != nil && !bytes.Equal(body, w.body) {
			t.Fatalf("response %d: %d, %d bytes; want %d, %d bytes", i, resp.StatusCode, len(body), w.status, len(w.body))
		}
	}
}

// TestStaticOverTLS: files over TLS (userspace records here, the kernel's without
// kTLS), with sendfile on and off, small and larger than the socket takes at once;
// a folder's redirect says https.
func TestStaticOverTLS(t *testing.T) {
	f := newTLSFiles(t)
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "d"), 0o755)
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`server { listen %s ssl; server_name a.test; ssl_certificate %s; ssl_certificate_key %s;
		root %s; sendfile on; tcp_nopush on;
		location /off/ { alias %s/; sendfile off; } }`, addr, f.aEC, f.aECKey, dir, dir), addr)
	cl := httpsClient(f.pool, addr, nil)
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, c := range []struct {
		path   string
		status int
		body   []byte
	}{{"/a.txt", 200, []byte("hello\n")}, {"/big.bin", 200, big}, {"/off/big.bin", 200, big}, {"/off/a.txt", 200, []byte("hello\n")}, {"/d", 301, nil}} {
		resp, err := cl.Get("https://a.test" + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.status || c.body != nil && !bytes.Equal(body, c.body) {
			t.Fatalf("%s: %d, %d bytes, %v", c.path, resp.StatusCode, len(body), err)
		}
		if c.status == 301 && !strings.HasPrefix(resp.Header.Get("Location"), "https://a.test:") {
			t.Errorf("%s: Location %q", c.path, resp.Header.Get("Location"))
		}
	}
}
