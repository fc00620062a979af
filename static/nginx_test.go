package static

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

	"github.com/numaproxy/numaproxy/conf"
)

const nginxBin = "/usr/sbin/nginx"

// startNginx runs Debian's nginx (one process, in the foreground) with the given
// http block body in dir, and returns its address. The test's cleanup stops it.
func startNginx(t *testing.T, dir, httpBody string, port int) string {
	t.Helper()
	if _, err := os.Stat(nginxBin); err != nil {
		t.Skip("no " + nginxBin)
	}
	if os.Geteuid() != 0 {
		t.Skip("nginx's `user root;` needs root")
	}
	os.MkdirAll(filepath.Join(dir, "logs"), 0o755)
	cfg := fmt.Sprintf("user root;\nerror_log %s/logs/error.log info;\npid %s/logs/nginx.pid;\nevents { worker_connections 64; }\nhttp {\naccess_log off;\nclient_body_temp_path %s/logs;\n%s\n}\n", dir, dir, dir, httpBody)
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginxBin, "-p", dir+"/", "-c", file, "-g", "daemon off; master_process off;")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not start: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fileTree is the tree both servers serve. Times are fixed so ETags and
// Last-Modified are the same on every run.
type fileTree struct {
	root  string
	mtime time.Time
}

func makeTree(t *testing.T, dir string) *fileTree {
	t.Helper()
	root := filepath.Join(dir, "www")
	ft := &fileTree{root: root, mtime: time.Date(2024, 3, 9, 16, 5, 7, 0, time.UTC)}
	big := make([]byte, 70000)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	files := map[string]string{
		"a.txt":              "hello world\n",
		"page.html":          "<p>page</p>\n",
		"UP.HTML":            "<p>upper</p>\n",
		"noext":              "no extension\n",
		".hidden.txt":        "hidden\n",
		"arch.tar.GZ":        "not really\n",
		"empty.txt":          "",
		"big.bin":            string(big),
		"dir/index.html":     "<p>dir index</p>\n",
		"dir/other.txt":      "other\n",
		"dir2/file one.txt":  "one\n",
		"dir2/<b>&amp\".txt": "markup\n",
		"dir2/sub/x.txt":     "x\n",
		"dir2/also.html":     "also\n",
		"dir2/" + strings.Repeat("long-name-", 6) + ".txt": "long\n",
		"dir2/" + strings.Repeat("é", 30) + ".txt":         "utf8 short\n",
		"dir2/" + strings.Repeat("ü", 60) + ".txt":         "utf8 long\n",
		"dir2/" + strings.Repeat("z", 49) + "/keep":        "dir of 49\n",
		"dir2/" + strings.Repeat("y", 50) + "/keep":        "dir of 50\n",
		"dir2/" + strings.Repeat("<", 55) + ".txt":         "escaped long\n",
		"dir2/k10.bin":    strings.Repeat("k", 10000),
		"dir2/k9.bin":     strings.Repeat("k", 9999),
		"dir2/m.bin":      strings.Repeat("m", 1<<20+600<<10),
		"named/tfn/x":     "named location\n",
		"tf/exists.txt":   "tf exists\n",
		"tf/d/index.html": "tf dir index\n",
		"own/target.txt":  "owned by nobody\n",
		"own/mine.txt":    "owned by root\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(root, "a.txt"), filepath.Join(root, "link.txt")))
	must(os.Symlink(filepath.Join(root, "dir"), filepath.Join(root, "linkdir")))
	must(os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(root, "dir2/broken")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	// if_not_owner: links owned by root to nobody's file (refused), and to root's.
	must(os.Chown(filepath.Join(root, "own/target.txt"), 65534, 65534))
	must(os.Symlink("target.txt", filepath.Join(root, "own/root-link.txt")))
	must(os.Symlink("mine.txt", filepath.Join(root, "own/good-link.txt")))
	must(os.Symlink("target.txt", filepath.Join(root, "own/nobody-link.txt")))
	must(os.Lchown(filepath.Join(root, "own/nobody-link.txt"), 65534, 65534))
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode()&os.ModeSymlink == 0 {
			os.Chtimes(p, ft.mtime, ft.mtime)
		}
		return nil
	})
	return ft
}

// The http block both servers load: the locations under test.
const diffServer = `
	include /etc/nginx/mime.types;
	server {
		listen 127.0.0.1:PORT;
		root ROOT;
		location / { }
		location /exp/ { alias ROOT/; expires 1h; }
		location /expm/ { alias ROOT/; expires modified 2h; }
		location /neg/ { alias ROOT/; expires -1; }
		location /epoch/ { alias ROOT/; expires epoch; }
		location /max/ { alias ROOT/; expires max; }
		location /zero/ { alias ROOT/; expires 0; }
		location /daily/ { alias ROOT/; expires @15h30m; }
		location /cs/ { alias ROOT/; charset utf-8; autoindex on; }
		location /csx/ { alias ROOT/; charset utf-8; source_charset UTF-8; }
		location /csall/ { alias ROOT/; charset iso-8859-1; charset_types *; }
		location /ai/ { alias ROOT/dir2/; autoindex on; }
		location /aiu/ { alias ROOT/dir2/; autoindex on; charset utf-8; }
		location /aie/ { alias ROOT/dir2/; autoindex on; autoindex_exact_size off; }
		location /aij/ { alias ROOT/dir2/; autoindex on; autoindex_format json; }
		location /aijp/ { alias ROOT/dir2/; autoindex on; autoindex_format jsonp; }
		location /aix/ { alias ROOT/dir2/; autoindex on; autoindex_format xml; }
		location /sym/ { alias ROOT/; disable_symlinks on; }
		location /own/ { alias ROOT/own/; disable_symlinks if_not_owner; }
		location /from/ { alias ROOT/; disable_symlinks on from=$document_root; }
		location /ims/ { alias ROOT/; if_modified_since before; }
		location /imsoff/ { alias ROOT/; if_modified_since off; }
		location /noetag/ { alias ROOT/; etag off; }
		location /mr1/ { alias ROOT/; max_ranges 1; }
		location /mr0/ { alias ROOT/; max_ranges 0; }
		location /idx/ { alias ROOT/dir2/; index nope.html also.html; }
		location /idxabs/ { alias ROOT/dir2/; index nope.html /a.txt; }
		location /idxnone/ { alias ROOT/dir2/; index nope.html; }
		location /tf/ { try_files $uri $uri/ /a.txt; }
		location /tf404/ { try_files $uri =404; }
		location /tfn/ { try_files /nope @named; }
		location /tfq/ { try_files /nope /a.txt?x=1; }
		location @named { root ROOT/named; }
		location /int/ { alias ROOT/; internal; }
		location /types/ { alias ROOT/; types { application/x-foo txt; } default_type application/x-default; }
		location = /exact.txt { alias ROOT/a.txt; }
		location ~ ^/re/(.+)$ { alias ROOT/$1; }
		location /noslash { alias ROOT/dir; }
		location /i/ { alias ROOT/dir2; }
		location /oc/ { alias ROOT/; open_file_cache max=10; open_file_cache_errors on; }
	}
`

type diffCase struct {
	method  string
	target  string            // path and query, as sent (escaped)
	headers map[string]string // request headers
}

// nginxAnswer is what a server sent, reduced to what is compared.
type nginxAnswer struct {
	status  int
	headers map[string]string
	body    string // "" for error pages (the core's)
}

var comparedHeaders = []string{"Content-Type", "Content-Length", "Last-Modified", "ETag", "Content-Range", "Accept-Ranges", "Location", "Expires", "Cache-Control"}

func TestDifferentialNginx(t *testing.T) {
	dir := t.TempDir()
	ft := makeTree(t, dir)
	port := freePort(t)
	block := strings.NewReplacer("ROOT", ft.root, "PORT", strconv.Itoa(port)).Replace(diffServer)
	addr := startNginx(t, dir, block, port)
	cfg := mustConf(t, "http {"+block+"}")
	srv := cfg.HTTP.Servers[0]
	h := NewHandler()
	defer h.Close()

	d := ft.mtime
	lm := d.UTC().Format(http.TimeFormat)
	etagA := fmt.Sprintf(`"%x-c"`, d.Unix())
	cases := []diffCase{
		{"GET", "/a.txt", nil},
		{"HEAD", "/a.txt", nil},
		{"GET", "/page.html", nil},
		{"GET", "/UP.HTML", nil},
		{"GET", "/noext", nil},
		{"GET", "/.hidden.txt", nil},
		{"GET", "/arch.tar.GZ", nil},
		{"GET", "/empty.txt", nil},
		{"GET", "/empty.txt", map[string]string{"Range": "bytes=0-"}},
		{"GET", "/missing.txt", nil},
		{"GET", "/a.txt/x", nil},
		{"GET", "/fifo", nil},
		{"POST", "/a.txt", nil},
		{"PUT", "/a.txt", nil},
		{"DELETE", "/dir/", nil},
		{"POST", "/dir/", nil},
		{"POST", "/dir2/", nil},
		{"GET", "/dir", nil},
		{"GET", "/dir?x=1&y", nil},
		{"GET", "/dir%20x", nil},
		{"HEAD", "/dir", nil},
		{"POST", "/dir", nil},
		{"GET", "/dir/", nil},
		{"GET", "/dir2/", nil},
		{"GET", "/nodir/", nil},
		{"GET", "/link.txt", nil},
		// Conditionals.
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": lm}},
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": d.Add(time.Hour).UTC().Format(http.TimeFormat)}},
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": "garbage"}},
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": d.Format("Monday, 02-Jan-06 15:04:05 GMT")}},
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": d.Format("Mon Jan _2 15:04:05 2006")}},
		{"GET", "/ims/a.txt", map[string]string{"If-Modified-Since": d.Add(time.Hour).UTC().Format(http.TimeFormat)}},
		{"GET", "/ims/a.txt", map[string]string{"If-Modified-Since": d.Add(-time.Hour).UTC().Format(http.TimeFormat)}},
		{"GET", "/imsoff/a.txt", map[string]string{"If-Modified-Since": lm}},
		{"GET", "/a.txt", map[string]string{"If-None-Match": etagA}},
		{"GET", "/a.txt", map[string]string{"If-None-Match": `"x", W/` + etagA + ` , "y"`}},
		{"GET", "/a.txt", map[string]string{"If-None-Match": `"x"`}},
		{"GET", "/a.txt", map[string]string{"If-None-Match": `*`}},
		{"GET", "/a.txt", map[string]string{"If-None-Match": etagA, "If-Modified-Since": d.Add(-time.Hour).UTC().Format(http.TimeFormat)}},
		{"GET", "/a.txt", map[string]string{"If-None-Match": `"x"`, "If-Modified-Since": lm}},
		{"GET", "/noetag/a.txt", map[string]string{"If-None-Match": `*`}},
		{"GET", "/noetag/a.txt", map[string]string{"If-None-Match": etagA}},
		{"GET", "/a.txt", map[string]string{"If-Match": etagA}},
		{"GET", "/a.txt", map[string]string{"If-Match": "W/" + etagA}},
		{"GET", "/a.txt", map[string]string{"If-Match": `"nope"`}},
		{"GET", "/exp/a.txt", map[string]string{"If-Match": `"nope"`}},
		{"GET", "/a.txt", map[string]string{"If-Match": `*`}},
		{"GET", "/a.txt", map[string]string{"If-Unmodified-Since": lm}},
		{"GET", "/a.txt", map[string]string{"If-Unmodified-Since": d.Add(-time.Second).UTC().Format(http.TimeFormat)}},
		{"GET", "/a.txt", map[string]string{"If-Unmodified-Since": "garbage"}},
		{"HEAD", "/a.txt", map[string]string{"If-None-Match": etagA}},
		// Ranges.
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-4"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=6-"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=-3"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=-100"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=3-100"}},
		{"GET", "/a.txt", map[string]string{"Range": "BYTES= 1 - 2 , 4-5"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1,3-4,8-"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-5,3-8"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-11,0-11"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=100-"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=100-200,300-"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=-0"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=5-2"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=x"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=1-2x"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=99999999999999999999-"}},
		{"GET", "/a.txt", map[string]string{"Range": "items=0-1"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes="}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": etagA}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": `"other"`}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": lm}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": d.Add(time.Second).UTC().Format(http.TimeFormat)}},
		{"GET", "/noetag/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": etagA}},
		{"GET", "/mr1/a.txt", map[string]string{"Range": "bytes=0-1"}},
		{"GET", "/mr1/a.txt", map[string]string{"Range": "bytes=0-1,3-4"}},
		{"GET", "/mr0/a.txt", map[string]string{"Range": "bytes=0-1"}},
		{"GET", "/mr0/a.txt", nil},
		{"HEAD", "/a.txt", map[string]string{"Range": "bytes=0-1"}},
		{"GET", "/big.bin", map[string]string{"Range": "bytes=1000-1999,65000-"}},
		{"GET", "/cs/page.html", map[string]string{"Range": "bytes=0-1,3-4"}},
		{"GET", "/cs/a.txt", map[string]string{"Range": "bytes=100-"}},
		{"GET", "/exp/a.txt", map[string]string{"Range": "bytes=100-"}},
		{"GET", "/exp/a.txt", map[string]string{"Range": "bytes=0-1"}},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-None-Match": etagA}},
		// Expires.
		{"GET", "/exp/a.txt", nil},
		{"GET", "/exp/a.txt", map[string]string{"If-None-Match": etagA}},
		{"GET", "/exp/dir", nil},
		{"GET", "/exp/missing", nil},
		{"GET", "/expm/a.txt", nil},
		{"GET", "/neg/a.txt", nil},
		{"GET", "/epoch/a.txt", nil},
		{"GET", "/max/a.txt", nil},
		{"GET", "/zero/a.txt", nil},
		{"GET", "/daily/a.txt", nil},
		// Charset.
		{"GET", "/cs/a.txt", nil},
		{"GET", "/cs/page.html", nil},
		{"GET", "/cs/big.bin", nil},
		{"GET", "/cs/dir", nil},
		{"GET", "/cs/missing", nil},
		{"GET", "/cs/a.txt", map[string]string{"If-None-Match": etagA}},
		{"GET", "/csx/a.txt", nil},
		{"GET", "/csall/big.bin", nil},
		{"GET", "/cs/dir2/", nil},
		// Types.
		{"GET", "/types/a.txt", nil},
		{"GET", "/types/page.html", nil},
		// Autoindex.
		{"GET", "/ai/", nil},
		{"HEAD", "/ai/", nil},
		{"POST", "/ai/", nil},
		{"GET", "/aiu/", nil},
		{"GET", "/aie/", nil},
		{"GET", "/aij/", nil},
		{"GET", "/aijp/", nil},
		{"GET", "/aijp/?callback=cb.x_1", nil},
		{"GET", "/aijp/?a=1&CALLBACK=f", nil},
		{"GET", "/aijp/?callback=bad(", nil},
		{"GET", "/aix/", nil},
		{"GET", "/ai/sub/", nil},
		{"GET", "/ai/nosuch/", nil},
		{"GET", "/ai/file%20one.txt/", nil},
		// Index.
		{"GET", "/idx/", nil},
		{"GET", "/idxabs/", nil},
		{"GET", "/idxnone/", nil},
		{"GET", "/idxnone/nosuch/", nil},
		// Symlinks.
		{"GET", "/sym/a.txt", nil},
		{"GET", "/sym/link.txt", nil},
		{"GET", "/sym/linkdir/index.html", nil},
		{"GET", "/sym/linkdir/", nil},
		{"GET", "/sym/linkdir", nil},
		{"GET", "/sym/dir/", nil},
		{"GET", "/own/mine.txt", nil},
		{"GET", "/own/good-link.txt", nil},
		{"GET", "/own/root-link.txt", nil},
		{"GET", "/own/nobody-link.txt", nil},
		{"GET", "/from/a.txt", nil},
		{"GET", "/from/link.txt", nil},
		// try_files, internal, alias forms.
		{"GET", "/tf/exists.txt", nil},
		{"GET", "/tf/d", nil},
		{"GET", "/tf/d/", nil},
		{"GET", "/tf/nope", nil},
		{"GET", "/tf404/nope", nil},
		{"GET", "/tf404/exists.txt", nil},
		{"GET", "/tfn/x", nil},
		{"GET", "/tfq/x", nil},
		{"GET", "/int/a.txt", nil},
		{"GET", "/exact.txt", nil},
		{"GET", "/re/a.txt", nil},
		{"GET", "/re/dir", nil},
		{"GET", "/noslash/index.html", nil},
		{"GET", "/noslash", nil},
		{"GET", "/i/also.html", nil},
		{"GET", "/i/", nil},
		{"GET", "/oc/a.txt", nil},
		{"GET", "/oc/a.txt", nil},
		{"GET", "/oc/missing", nil},
		{"GET", "/oc/missing", nil},
		{"GET", "/oc/dir", nil},
		{"GET", "/oc/dir", nil},
	}
	for _, c := range cases {
		name := c.method + " " + c.target
		if len(c.headers) > 0 {
			name += fmt.Sprint(" ", c.headers)
		}
		want, date := askNginx(t, addr, c)
		got := askPackage(t, h, srv, c, date, port)
		if diff := compareAnswers(want, got); diff != "" {
			t.Errorf("%s:\n%s", name, diff)
		}
	}
}

// askNginx sends the request raw (the headers exactly as given) and reads the answer.
func askNginx(t *testing.T, addr string, c diffCase) (nginxAnswer, int64) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", c.method, c.target, addr)
	for k, v := range c.headers {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	if c.method == "POST" || c.method == "PUT" {
		req.WriteString("Content-Length: 0\r\n")
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: c.method})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := nginxAnswer{status: resp.StatusCode, headers: map[string]string{}, body: string(body)}
	for _, k := range comparedHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			a.headers[k] = strings.Join(v, ", ")
		}
	}
	if resp.ContentLength >= 0 && resp.Header.Get("Content-Length") != "" {
		a.headers["Content-Length"] = strconv.FormatInt(resp.ContentLength, 10)
	}
	if isErrorPage(resp.StatusCode) {
		a.body = ""
		delete(a.headers, "Content-Length") // the core's page
	}
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		t.Fatalf("Date: %v", err)
	}
	return a, date.Unix()
}

// isErrorPage: the statuses nginx answers with its special response page.
func isErrorPage(status int) bool { return status >= 300 && status != 304 }

// testVars gives $uri, $args and regex captures, what the core's registry will.
type testVars struct {
	uri, args string
	captures  []string
}

func (v *testVars) AppendVar(dst []byte, name string) ([]byte, bool) {
	switch name {
	case "uri":
		return append(dst, v.uri...), true
	case "args":
		return append(dst, v.args...), true
	}
	if n, err := strconv.Atoi(name); err == nil && n < len(v.captures) {
		return append(dst, v.captures[n]...), true
	}
	return dst, false
}

// findLocation is enough of nginx's location search for the test's server: exact,
// longest prefix, then regexes in order; named ones by name.
func findLocation(srv *conf.Server, uri string) (*conf.Location, []string) {
	var best *conf.Location
	for _, l := range srv.Locations {
		switch l.Kind {
		case conf.LocNamed:
			if l.Path == uri {
				return l, nil
			}
		case conf.LocExact:
			if l.Path == uri {
				return l, nil
			}
		case conf.LocPrefix, conf.LocPrefixNoRegex:
			if strings.HasPrefix(uri, l.Path) && (best == nil || len(l.Path) > len(best.Path)) {
				best = l
			}
		}
	}
	if best == nil || best.Kind != conf.LocPrefixNoRegex {
		for _, l := range srv.Locations {
			if l.Regex != nil {
				if m := l.Regex.FindStringSubmatch(uri); m != nil {
					return l, m
				}
			}
		}
	}
	return best, nil
}

// askPackage runs the request through the package the way the HTTP core will: find
// the location, try_files, the content handlers and filters, following internal
// redirects.
func askPackage(t *testing.T, h *Handler, srv *conf.Server, c diffCase, now int64, port int) nginxAnswer {
	t.Helper()
	target := c.target
	args := ""
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target, args = target[:i], target[i+1:]
	}
	uri := unescapePath(target)
	internal, named := false, ""
	var r Response
	defer r.File.Close()
	for hops := 0; ; hops++ {
		if hops > 10 {
			t.Fatalf("%s: redirect loop", c.target)
		}
		loc, caps := findLocation(srv, uri)
		if named != "" {
			loc, caps = findLocation(srv, named)
		}
		lc := ServerConf(srv)
		if loc != nil {
			lc = ConfOf(loc)
		}
		vars := &testVars{uri: uri, args: args, captures: caps}
		req := &Request{
			Method: []byte(c.method), URI: []byte(uri), Args: []byte(args), Internal: internal,
			Vars: vars, Now: now, Redirect: &RedirectBase{Host: []byte("127.0.0.1"), Port: port},
		}
		hdr := func(k string) []byte {
			if v, ok := c.headers[k]; ok {
				return []byte(v)
			}
			return nil
		}
		req.IfModifiedSince, req.IfUnmodifiedSince = hdr("If-Modified-Since"), hdr("If-Unmodified-Since")
		req.IfMatch, req.IfNoneMatch, req.IfRange, req.Range = hdr("If-Match"), hdr("If-None-Match"), hdr("If-Range"), hdr("Range")
		if lc.Internal && !internal {
			r.Reset()
			r.fail(404)
			h.Filter(req, lc, &r)
			return answerOf(t, c, &r)
		}
		h.TryFiles(req, lc, &r)
		switch r.Action {
		case Continue:
			uri = string(r.URI)
			req.URI, req.AddURIToAlias = []byte(uri), r.AddURIToAlias
			vars.uri = uri
		case Redirect:
			uri, args, internal, named = string(r.URI), string(r.Args), true, ""
			continue
		case Named:
			named, internal = string(r.URI), true
			continue
		case Send:
			h.Filter(req, lc, &r)
			return answerOf(t, c, &r)
		}
		r.File.Close()
		h.Serve(req, lc, &r)
		if r.Action == Redirect {
			uri, args, internal, named = string(r.URI), string(r.Args), true, ""
			continue
		}
		return answerOf(t, c, &r)
	}
}

func unescapePath(p string) string {
	var b []byte
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			if n, err := strconv.ParseUint(p[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(n))
				i += 2
				continue
			}
		}
		b = append(b, p[i])
	}
	return string(b)
}

// answerOf renders a Response as the core will send it.
func answerOf(t *testing.T, c diffCase, r *Response) nginxAnswer {
	t.Helper()
	if r.Action != Send {
		t.Fatalf("%s: action %d", c.target, r.Action)
	}
	a := nginxAnswer{status: r.Status, headers: map[string]string{}}
	set := func(k string, v []byte) {
		if v != nil {
			a.headers[k] = string(v)
		}
	}
	if len(r.ContentType) > 0 {
		set("Content-Type", r.AppendContentType(nil))
	}
	if r.ContentLength >= 0 && !r.ErrorPage {
		a.headers["Content-Length"] = strconv.FormatInt(r.ContentLength, 10)
	}
	if r.LastModified >= 0 {
		set("Last-Modified", AppendHTTPTime(nil, r.LastModified))
	}
	set("ETag", r.ETag)
	set("Content-Range", r.ContentRange)
	if r.AcceptRanges {
		a.headers["Accept-Ranges"] = "bytes"
	}
	set("Location", r.Location)
	set("Expires", r.Expires)
	set("Cache-Control", r.CacheControl)
	if r.ErrorPage || c.method == "HEAD" {
		return a
	}
	var body []byte
	for _, p := range r.Body {
		if !p.IsFile() {
			body = append(body, p.Data...)
			continue
		}
		buf := make([]byte, p.Len)
		if n, err := syscall.Pread(r.File.Fd, buf, p.Off); err != nil || int64(n) != p.Len {
			t.Fatalf("%s: pread %d at %d: %d, %v", c.target, p.Len, p.Off, n, err)
		}
		body = append(body, buf...)
	}
	if r.ContentLength >= 0 && int64(len(body)) != r.ContentLength {
		t.Errorf("%s: body of %d bytes, Content-Length %d", c.target, len(body), r.ContentLength)
	}
	a.body = string(body)
	return a
}

var boundaryRe = regexp.MustCompile(`boundary=(\d{20})`)

// compareAnswers lists the differences; multipart boundaries are compared by form.
func compareAnswers(want, got nginxAnswer) string {
	norm := func(a *nginxAnswer) {
		if m := boundaryRe.FindStringSubmatch(a.headers["Content-Type"]); m != nil {
			a.headers["Content-Type"] = strings.ReplaceAll(a.headers["Content-Type"], m[1], "BOUNDARY")
			a.body = strings.ReplaceAll(a.body, m[1], "BOUNDARY")
		}
	}
	norm(&want)
	norm(&got)
	var diff strings.Builder
	if want.status != got.status {
		fmt.Fprintf(&diff, "  status: nginx %d, static %d\n", want.status, got.status)
	}
	for _, k := range comparedHeaders {
		w, wok := want.headers[k]
		g, gok := got.headers[k]
		if w != g || wok != gok {
			fmt.Fprintf(&diff, "  %s: nginx %q (%v), static %q (%v)\n", k, w, wok, g, gok)
		}
	}
	if want.body != got.body {
		fmt.Fprintf(&diff, "  body:\n  nginx  %q\n  static %q\n", want.body, got.body)
	}
	return diff.String()
}
