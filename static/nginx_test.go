package static

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/numaproxy/numaproxy/httpcore"
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
	"github.com/numaproxy/numaproxy/internal/testport"
)

const nginxBin = "/usr/sbin/nginx"

// testZone is the local time zone of both servers in the differential test.
const testZone = "Asia/Tokyo"

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
	cmd.Env = append(os.Environ(), "TZ="+testZone) // local times (autoindex_localtime, expires @time) are not UTC
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

func freePort(t *testing.T) int { return testport.Free(t) }

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
		location /ail/ { alias ROOT/dir2/; autoindex on; autoindex_localtime on; autoindex_exact_size off; }
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
		location /tfa/ { alias ROOT/tf/; try_files $uri $uri/ =404; }
		location /ali { alias ROOT/dir/; }
		location /tfas/ { alias ROOT/tf/; try_files /exists.txt =404; }
		location ~ ^/tfre/(.*)$ { alias ROOT/tf/$1; try_files "" /d/ =410; }
	}
`

type diffCase struct {
	method  string
	target  string            // path and query, as sent (escaped)
	headers map[string]string // request headers
	server  int               // 0: the shared server; 1, 2: the nginx-only redirect variants
}

// redirectServers are nginx-only servers with the same root as the shared one,
// differing in the core's redirect directives, which the package takes as input.
const redirectServers = `
	server { listen 127.0.0.1:PORT1; server_name example.org www.example.org; root ROOT; server_name_in_redirect on; port_in_redirect off; }
	server { listen 127.0.0.1:PORT2; root ROOT; absolute_redirect off; }
`

// nginxAnswer is what a server sent, reduced to what is compared.
type nginxAnswer struct {
	status  int
	headers map[string]string
	body    string // "" for error pages (the core's)
}

var comparedHeaders = []string{"Content-Type", "Content-Length", "Last-Modified", "ETag", "Content-Range", "Accept-Ranges", "Location", "Expires", "Cache-Control"}

func TestDifferentialNginx(t *testing.T) {
	zone, err := time.LoadLocation(testZone)
	if err != nil {
		t.Skip(err)
	}
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = zone
	dir := t.TempDir()
	ft := makeTree(t, dir)
	port, port1, port2 := freePort(t), freePort(t), freePort(t)
	repl := strings.NewReplacer("ROOT", ft.root, "PORT1", strconv.Itoa(port1), "PORT2", strconv.Itoa(port2), "PORT", strconv.Itoa(port))
	block := repl.Replace(diffServer)
	addr := startNginx(t, dir, block+repl.Replace(redirectServers), port)
	addrs := []string{addr, "127.0.0.1:" + strconv.Itoa(port1), "127.0.0.1:" + strconv.Itoa(port2)}
	cfg := mustConf(t, "http {"+block+"}")
	srv := cfg.HTTP.Servers[0]
	h := NewHandler()
	defer h.Close()

	d := ft.mtime
	lm := d.UTC().Format(http.TimeFormat)
	etagA := fmt.Sprintf(`"%x-c"`, d.Unix())
	cases := []diffCase{
		{"GET", "/a.txt", nil, 0},
		{"HEAD", "/a.txt", nil, 0},
		{"GET", "/page.html", nil, 0},
		{"GET", "/UP.HTML", nil, 0},
		{"GET", "/noext", nil, 0},
		{"GET", "/.hidden.txt", nil, 0},
		{"GET", "/arch.tar.GZ", nil, 0},
		{"GET", "/empty.txt", nil, 0},
		{"GET", "/empty.txt", map[string]string{"Range": "bytes=0-"}, 0},
		{"GET", "/missing.txt", nil, 0},
		{"GET", "/a.txt/x", nil, 0},
		{"GET", "/fifo", nil, 0},
		{"POST", "/a.txt", nil, 0},
		{"PUT", "/a.txt", nil, 0},
		{"DELETE", "/dir/", nil, 0},
		{"POST", "/dir/", nil, 0},
		{"POST", "/dir2/", nil, 0},
		{"GET", "/dir", nil, 0},
		{"GET", "/dir?x=1&y", nil, 0},
		{"GET", "/dir%20x", nil, 0},
		{"HEAD", "/dir", nil, 0},
		{"POST", "/dir", nil, 0},
		{"GET", "/dir/", nil, 0},
		{"GET", "/dir2/", nil, 0},
		{"GET", "/nodir/", nil, 0},
		{"GET", "/link.txt", nil, 0},
		// Conditionals.
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": lm}, 0},
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": d.Add(time.Hour).UTC().Format(http.TimeFormat)}, 0},
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": "garbage"}, 0},
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": d.Format("Monday, 02-Jan-06 15:04:05 GMT")}, 0},
		{"GET", "/a.txt", map[string]string{"If-Modified-Since": d.Format("Mon Jan _2 15:04:05 2006")}, 0},
		{"GET", "/ims/a.txt", map[string]string{"If-Modified-Since": d.Add(time.Hour).UTC().Format(http.TimeFormat)}, 0},
		{"GET", "/ims/a.txt", map[string]string{"If-Modified-Since": d.Add(-time.Hour).UTC().Format(http.TimeFormat)}, 0},
		{"GET", "/imsoff/a.txt", map[string]string{"If-Modified-Since": lm}, 0},
		{"GET", "/a.txt", map[string]string{"If-None-Match": etagA}, 0},
		{"GET", "/a.txt", map[string]string{"If-None-Match": `"x", W/` + etagA + ` , "y"`}, 0},
		{"GET", "/a.txt", map[string]string{"If-None-Match": `"x"`}, 0},
		{"GET", "/a.txt", map[string]string{"If-None-Match": `*`}, 0},
		{"GET", "/a.txt", map[string]string{"If-None-Match": etagA, "If-Modified-Since": d.Add(-time.Hour).UTC().Format(http.TimeFormat)}, 0},
		{"GET", "/a.txt", map[string]string{"If-None-Match": `"x"`, "If-Modified-Since": lm}, 0},
		{"GET", "/noetag/a.txt", map[string]string{"If-None-Match": `*`}, 0},
		{"GET", "/noetag/a.txt", map[string]string{"If-None-Match": etagA}, 0},
		{"GET", "/a.txt", map[string]string{"If-Match": etagA}, 0},
		{"GET", "/a.txt", map[string]string{"If-Match": "W/" + etagA}, 0},
		{"GET", "/a.txt", map[string]string{"If-Match": `"nope"`}, 0},
		{"GET", "/exp/a.txt", map[string]string{"If-Match": `"nope"`}, 0},
		{"GET", "/a.txt", map[string]string{"If-Match": `*`}, 0},
		{"GET", "/a.txt", map[string]string{"If-Unmodified-Since": lm}, 0},
		{"GET", "/a.txt", map[string]string{"If-Unmodified-Since": d.Add(-time.Second).UTC().Format(http.TimeFormat)}, 0},
		{"GET", "/a.txt", map[string]string{"If-Unmodified-Since": "garbage"}, 0},
		{"HEAD", "/a.txt", map[string]string{"If-None-Match": etagA}, 0},
		// Ranges.
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-4"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=6-"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=-3"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=-100"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=3-100"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "BYTES= 1 - 2 , 4-5"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1,3-4,8-"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-5,3-8"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-11,0-11"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=100-"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=100-200,300-"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=-0"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=5-2"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=x"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=1-2x"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=99999999999999999999-"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "items=0-1"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes="}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": etagA}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": `"other"`}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": lm}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": d.Add(time.Second).UTC().Format(http.TimeFormat)}, 0},
		{"GET", "/noetag/a.txt", map[string]string{"Range": "bytes=0-1", "If-Range": etagA}, 0},
		{"GET", "/mr1/a.txt", map[string]string{"Range": "bytes=0-1"}, 0},
		{"GET", "/mr1/a.txt", map[string]string{"Range": "bytes=0-1,3-4"}, 0},
		{"GET", "/mr0/a.txt", map[string]string{"Range": "bytes=0-1"}, 0},
		{"GET", "/mr0/a.txt", nil, 0},
		{"HEAD", "/a.txt", map[string]string{"Range": "bytes=0-1"}, 0},
		{"GET", "/big.bin", map[string]string{"Range": "bytes=1000-1999,65000-"}, 0},
		{"GET", "/cs/page.html", map[string]string{"Range": "bytes=0-1,3-4"}, 0},
		{"GET", "/cs/a.txt", map[string]string{"Range": "bytes=100-"}, 0},
		{"GET", "/exp/a.txt", map[string]string{"Range": "bytes=100-"}, 0},
		{"GET", "/exp/a.txt", map[string]string{"Range": "bytes=0-1"}, 0},
		{"GET", "/a.txt", map[string]string{"Range": "bytes=0-1", "If-None-Match": etagA}, 0},
		// Expires.
		{"GET", "/exp/a.txt", nil, 0},
		{"GET", "/exp/a.txt", map[string]string{"If-None-Match": etagA}, 0},
		{"GET", "/exp/dir", nil, 0},
		{"GET", "/exp/missing", nil, 0},
		{"GET", "/expm/a.txt", nil, 0},
		{"GET", "/neg/a.txt", nil, 0},
		{"GET", "/epoch/a.txt", nil, 0},
		{"GET", "/max/a.txt", nil, 0},
		{"GET", "/zero/a.txt", nil, 0},
		{"GET", "/daily/a.txt", nil, 0},
		// Charset.
		{"GET", "/cs/a.txt", nil, 0},
		{"GET", "/cs/page.html", nil, 0},
		{"GET", "/cs/big.bin", nil, 0},
		{"GET", "/cs/dir", nil, 0},
		{"GET", "/cs/missing", nil, 0},
		{"GET", "/cs/a.txt", map[string]string{"If-None-Match": etagA}, 0},
		{"GET", "/csx/a.txt", nil, 0},
		{"GET", "/csall/big.bin", nil, 0},
		{"GET", "/cs/dir2/", nil, 0},
		// Types.
		{"GET", "/types/a.txt", nil, 0},
		{"GET", "/types/page.html", nil, 0},
		// Autoindex.
		{"GET", "/ai/", nil, 0},
		{"HEAD", "/ai/", nil, 0},
		{"POST", "/ai/", nil, 0},
		{"GET", "/aiu/", nil, 0},
		{"GET", "/aie/", nil, 0},
		{"GET", "/aij/", nil, 0},
		{"GET", "/aijp/", nil, 0},
		{"GET", "/aijp/?callback=cb.x_1", nil, 0},
		{"GET", "/aijp/?a=1&CALLBACK=f", nil, 0},
		{"GET", "/aijp/?callback=bad(", nil, 0},
		{"GET", "/aix/", nil, 0},
		{"GET", "/ail/", nil, 0},
		{"GET", "/ai/sub/", nil, 0},
		{"GET", "/ai/nosuch/", nil, 0},
		{"GET", "/ai/file%20one.txt/", nil, 0},
		// Index.
		{"GET", "/idx/", nil, 0},
		{"GET", "/dir3/", nil, 0},
		{"GET", "/idxabs/", nil, 0},
		{"GET", "/idxnone/", nil, 0},
		{"GET", "/idxnone/nosuch/", nil, 0},
		// Symlinks.
		{"GET", "/sym/a.txt", nil, 0},
		{"GET", "/sym/link.txt", nil, 0},
		{"GET", "/sym/linkdir/index.html", nil, 0},
		{"GET", "/sym/linkdir/", nil, 0},
		{"GET", "/sym/linkdir", nil, 0},
		{"GET", "/sym/dir/", nil, 0},
		{"GET", "/own/mine.txt", nil, 0},
		{"GET", "/own/good-link.txt", nil, 0},
		{"GET", "/own/root-link.txt", nil, 0},
		{"GET", "/own/nobody-link.txt", nil, 0},
		{"GET", "/from/a.txt", nil, 0},
		{"GET", "/from/link.txt", nil, 0},
		// try_files, internal, alias forms.
		{"GET", "/tf/exists.txt", nil, 0},
		{"GET", "/tf/d", nil, 0},
		{"GET", "/tf/d/", nil, 0},
		{"GET", "/tf/nope", nil, 0},
		{"GET", "/tf404/nope", nil, 0},
		{"GET", "/tf404/exists.txt", nil, 0},
		{"GET", "/tfn/x", nil, 0},
		{"GET", "/tfq/x", nil, 0},
		{"GET", "/int/a.txt", nil, 0},
		{"GET", "/exact.txt", nil, 0},
		{"GET", "/re/a.txt", nil, 0},
		{"GET", "/re/dir", nil, 0},
		{"GET", "/noslash/index.html", nil, 0},
		{"GET", "/noslash", nil, 0},
		{"GET", "/i/also.html", nil, 0},
		{"GET", "/i/", nil, 0},
		{"GET", "/oc/a.txt", nil, 0},
		{"GET", "/oc/a.txt", nil, 0},
		{"GET", "/oc/missing", nil, 0},
		{"GET", "/oc/missing", nil, 0},
		{"GET", "/oc/dir", nil, 0},
		{"GET", "/oc/dir", nil, 0},
		{"GET", "/a%20b%23c%3Fd", nil, 0},
		{"GET", "/a%20b%23c%3Fd?q=%20", nil, 0},
		{"GET", "/a%20b%23c%3Fd/", nil, 0},
		{"GET", "/tfa/exists.txt", nil, 0},
		{"GET", "/tfa/d", nil, 0},
		{"GET", "/tfa/d/", nil, 0},
		{"GET", "/tfa/nope", nil, 0},
		{"GET", "/tfas/anything", nil, 0},
		{"GET", "/tfre/exists.txt", nil, 0},
		{"GET", "/tfre/nope", nil, 0},
		{"GET", "/dir?a=b", nil, 1},
		{"GET", "/a%20b%23c%3Fd", nil, 1},
		{"GET", "/dir?a=b", nil, 2},
	}
	for _, c := range cases {
		name := c.method + " " + c.target
		if len(c.headers) > 0 {
			name += fmt.Sprint(" ", c.headers)
		}
		want, date := askNginx(t, addrs[c.server], c)
		base := []*RedirectBase{{Host: []byte("127.0.0.1"), Port: port}, {Host: []byte("example.org")}, nil}[c.server]
		got := askPackage(t, h, srv, c, date, base)
		if diff := compareAnswers(want, got); diff != "" {
			t.Errorf("%s:\n%s", name, diff)
		}
	}

	// Where numaproxy differs on purpose: an alias in a location without a trailing
	// slash lets nginx climb out of the alias ("/ali../a.txt" is www/dir/../a.txt).
	c := diffCase{"GET", "/ali../a.txt", nil, 0}
	want, date := askNginx(t, addr, c)
	got := askPackage(t, h, srv, c, date, nil)
	if want.status != 200 || want.body != "hello world\n" || got.status != 403 {
		t.Errorf("alias traversal: nginx %d %q, static %d; want nginx 200, static 403", want.status, want.body, got.status)
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
func askPackage(t *testing.T, h *Handler, srv *conf.Server, c diffCase, now int64, base *RedirectBase) nginxAnswer {
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
			Vars: vars, Now: now, Redirect: base,
		}
		hdr := func(k string) []byte {
			if v, ok := c.headers[k]; ok {
				return []byte(v)
			}
			return nil
		}
		req.IfModifiedSince, req.IfUnmodifiedSince = hdr("If-Modified-Since"), hdr("If-Unmodified-Since")
		req.IfMatch, req.IfNoneMatch, req.IfRange, req.Range = hdr("If-Match"), hdr("If-None-Match"), hdr("If-Range"), hdr("Range")
		if loc != nil && httpcore.LocationConf(loc).Internal() && !internal {
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
