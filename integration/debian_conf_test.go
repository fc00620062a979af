package integration

import (
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
)

// TestDebianStockConfig: Debian's own /etc/nginx (nginx.conf, mime.types, the
// default site in sites-enabled/, an empty modules-enabled/ and conf.d/) copied into
// a prefix, its absolute paths moved under it and port 80 moved to a test port,
// passes `numaproxy -t` and serves: the Debian welcome page through try_files and
// index, a file with its mime.types type, 404 for what is missing, gzip for HTML, an
// access log line in nginx's combined format, the user switched to www-data. Debian's
// nginx runs on a copy of the same tree and answers the same.
func TestDebianStockConfig(t *testing.T) {
	needRoot(t)
	for _, f := range []string{"/etc/nginx/nginx.conf", "/etc/nginx/mime.types", "/etc/nginx/sites-available/default"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("Debian's nginx configuration is not installed: %v", err)
		}
	}
	if _, err := exec.Command("id", "-u", "www-data").Output(); err != nil {
		t.Skip("no user www-data here")
	}
	np, ng := freePort(t), freePort(t)
	npDir, npConf := debianTree(t, np)
	ngDir, ngConf := debianTree(t, ng)

	if out, err := exec.Command(binary, "-t", "-p", npDir, "-c", npConf).CombinedOutput(); err != nil {
		t.Fatalf("numaproxy -t: %v\n%s", err, out)
	}
	cmd := exec.Command(binary, "-p", npDir, "-c", npConf)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGQUIT); cmd.Wait() })
	ngCmd := exec.Command(nginxBinary(t), "-p", ngDir, "-c", ngConf, "-g", "daemon off;")
	ngCmd.Stdout, ngCmd.Stderr = os.Stderr, os.Stderr
	if err := ngCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ngCmd.Process.Signal(syscall.SIGQUIT); ngCmd.Wait() })
	for _, p := range []int{np, ng} {
		a := "127.0.0.1:" + strconv.Itoa(p)
		waitFor(t, "listening on "+a, 10*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}

	type answer struct {
		status                         int
		ctype, encoding, lastMod, etag string
		length                         int64
		body                           string
	}
	get := func(port int, path string, gzip bool) answer {
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strconv.Itoa(port)+path, nil)
		req.Header.Set("User-Agent", "debian-conf-test")
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		c := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 5 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		// Error pages name the server: the rest must match.
		body := serverTokenRe.ReplaceAllString(string(b), "SERVER")
		return answer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"),
			resp.Header.Get("Last-Modified"), resp.Header.Get("ETag"), resp.ContentLength, body}
	}
	for _, c := range []struct {
		path string
		gzip bool
	}{{"/", false}, {"/", true}, {"/index.nginx-debian.html", false}, {"/style.css", false}, {"/data.json", false},
		{"/archive.tar.gz", false}, {"/noext", false}, {"/missing", false}, {"/sub", false}, {"/sub/", false}} {
		ours, theirs := get(np, c.path, c.gzip), get(ng, c.path, c.gzip)
		if ours.status != theirs.status || ours.ctype != theirs.ctype || ours.encoding != theirs.encoding ||
			ours.lastMod != theirs.lastMod || ours.etag != theirs.etag || (!c.gzip && ours.body != theirs.body) {
			t.Errorf("%s (gzip %v):\nnumaproxy %+v\nnginx     %+v", c.path, c.gzip, ours, theirs)
		}
	}
	if a := get(np, "/", false); a.status != 200 || !strings.Contains(a.body, "Welcome to nginx") {
		t.Errorf("the welcome page: %d %q", a.status, a.body)
	}

	// The access log: one line per request in the combined format, as nginx's (the
	// line of /sub/ compared: lines of different loops may come in either order).
	logLine := func(dir string) string {
		var line string
		waitFor(t, "the access log line of /sub/ in "+dir, 5*time.Second, func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, "var/log/nginx/access.log"))
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, `"GET /sub/ HTTP/1.1"`) {
					line = l
					return true
				}
			}
			return false
		})
		return line
	}
	ours, theirs := logLine(npDir), logLine(ngDir)
	mask := func(l string) string { // the time differs
		if i, j := strings.IndexByte(l, '['), strings.IndexByte(l, ']'); i >= 0 && j > i {
			return l[:i] + l[j:]
		}
		return l
	}
	if mask(ours) != mask(theirs) || !strings.Contains(ours, `"GET /sub/ HTTP/1.1" `) {
		t.Errorf("access log line:\nnumaproxy %s\nnginx     %s", ours, theirs)
	}
	// The loops run as www-data, as nginx's workers.
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if !strings.Contains(string(status), "Uid:\t33\t") {
		t.Errorf("numaproxy does not run as www-data:\n%s", status)
	}
}

var serverTokenRe = regexp.MustCompile(`(numaproxy|nginx)/[0-9.]+`)

// debianTree copies /etc/nginx into a fresh prefix, moves its absolute paths (the
// configuration, logs, pid file, document root) under the prefix and port 80 to
// port, and fills the document root with Debian's welcome page and a few files. It
// returns the prefix and the nginx.conf to start with.
func debianTree(t *testing.T, port int) (dir, conf string) {
	t.Helper()
	dir = t.TempDir()
	openToAll(t, dir) // www-data reads the document root
	if err := os.Mkdir(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", "/etc/nginx", filepath.Join(dir, "etc")+"/").CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, d := range []string{"var/log/nginx", "run", "var/www/html/sub", "etc/nginx/sites-enabled"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	etc := filepath.Join(dir, "etc", "nginx")
	// sites-enabled/default is a symlink to /etc/nginx/sites-available/default on a
	// Debian system; here a copy, rewritten like the rest.
	os.Remove(filepath.Join(etc, "sites-enabled", "default"))
	rewrite := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer(
			"/etc/nginx/", etc+"/",
			"/var/log/nginx/", filepath.Join(dir, "var/log/nginx")+"/",
			"/run/nginx.pid", filepath.Join(dir, "run/nginx.pid"),
			"/var/www/html", filepath.Join(dir, "var/www/html"),
			"listen 80 default_server;", "listen 127.0.0.1:"+strconv.Itoa(port)+" default_server;",
			"listen [::]:80 default_server;", "listen [::1]:"+strconv.Itoa(port)+" default_server;",
		).Replace(string(b))
		if err := os.WriteFile(dst, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rewrite("/etc/nginx/nginx.conf", filepath.Join(etc, "nginx.conf"))
	rewrite("/etc/nginx/sites-available/default", filepath.Join(etc, "sites-enabled", "default"))
	welcome := "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1>" +
		strings.Repeat("<p>If you see this page, the nginx web server is successfully installed and working.</p>\n", 20) + "</body></html>\n"
	files := map[string]string{
		"index.nginx-debian.html": welcome, "style.css": "body { color: #333; }\n", "data.json": `{"a": 1}` + "\n",
		"archive.tar.gz": "not really gzip\n", "noext": "plain\n", "sub/index.html": "<p>sub</p>\n",
	}
	mtime := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for name, body := range files {
		p := filepath.Join(dir, "var/www/html", name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, mtime, mtime) // both trees give the same Last-Modified and ETag
	}
	return dir, filepath.Join(etc, "nginx.conf")
}
