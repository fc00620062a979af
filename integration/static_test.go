package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
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
)

// Static files, numaproxy against Debian's nginx: both serve the same tree from
// the same http block, and every answer is compared (status, the headers that
// matter, bodies; the core's error pages by status and headers only).

// staticZone is the local time zone of both servers (autoindex_localtime,
// expires @time).
const staticZone = "Asia/Tokyo"

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

// staticTree is the tree both servers serve. Times are fixed so ETags and
// Last-Modified are the same on every run.
type staticTree struct {
	root  string
	mtime time.Time
}

func makeStaticTree(t *testing.T, dir string) *staticTree {
	t.Helper()
	root := filepath.Join(dir, "www")
	ft := &staticTree{root: root, mtime: time.Date(2024, 3, 9, 16, 5, 7, 0, time.UTC)}
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

const staticServer = `
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
		location /sf/ { alias ROOT/; sendfile on; tcp_nopush on; }
		location /nosf/ { alias ROOT/; sendfile off; }
		location /chunk/ { alias ROOT/; sendfile on; sendfile_max_chunk 16k; }
		location /ailocked/ { alias ROOT/locked/; autoindex on; }
		location /ret { return 301 /elsewhere; }
		location /ep/ { alias ROOT/; error_page 404 /page.html; expires 1h; }
		location /ep2/ { alias ROOT/; error_page 404 =200 /page.html; }
	}
`

const staticRedirectServers = `
	server { listen 127.0.0.1:PORT1; server_name example.org www.example.org; root ROOT; server_name_in_redirect on; port_in_redirect off; location /ret { return 301 /elsewhere; } location / { } }
	server { listen 127.0.0.1:PORT2; root ROOT; absolute_redirect off; location /ret { return 301 /elsewhere; } location / { } }
`

type staticCase struct {
	method  string
	target  string            // path and query, as sent (escaped)
	headers map[string]string // request headers
	server  int               // 0: the main server; 1, 2: the redirect variants
}

// staticAnswer is what a server sent, reduced to what is compared.
type staticAnswer struct {
	status  int
	headers map[string]string
	body    string // "" for error pages (each server's own)
	date    string
}

var staticHeaders = []string{"Content-Type", "Content-Length", "Last-Modified", "ETag", "Content-Range", "Accept-Ranges", "Location", "Expires", "Cache-Control"}

// extraStaticFiles adds to the tree what the package's comparison has no use for:
// files the servers may not read, a large file.
func extraStaticFiles(t *testing.T, ft *staticTree) {
	t.Helper()
	for name, mode := range map[string]os.FileMode{"secret.txt": 0, "locked/x.txt": 0o644} {
		p := filepath.Join(ft.root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chtimes(p, ft.mtime, ft.mtime)
	}
	os.Chmod(filepath.Join(ft.root, "locked"), 0)
}

func TestStaticDifferential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the tree has files owned by others (disable_symlinks if_not_owner): needs root")
	}
	nginxBinary(t)
	t.Setenv("TZ", staticZone)
	dir := t.TempDir()
	ft := makeStaticTree(t, dir)
	extraStaticFiles(t, ft)
	block := func(ports [3]int) string {
		repl := strings.NewReplacer("ROOT", ft.root, "PORT1", strconv.Itoa(ports[1]), "PORT2", strconv.Itoa(ports[2]), "PORT", strconv.Itoa(ports[0]))
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

	d := ft.mtime
	lm := d.UTC().Format(http.TimeFormat)
	etagA := fmt.Sprintf(`"%x-c"`, d.Unix())
	cases := []staticCase{
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
	cases = append(cases,
		// Encoded traversal and NUL.
		staticCase{"GET", "/%2e%2e/%2e%2e/etc/passwd", nil, 0},
		staticCase{"GET", "/dir/%2e%2e/a.txt", nil, 0},
		staticCase{"GET", "/dir/..%2f..%2f..%2fetc%2fpasswd", nil, 0},
		staticCase{"GET", "/%2e%2e%2fetc/passwd", nil, 0},
		staticCase{"GET", "/a.txt%00", nil, 0},
		staticCase{"GET", "/a.txt%00.html", nil, 0},
		staticCase{"GET", "//../a.txt", nil, 0},
		staticCase{"GET", "/dir//..//a.txt", nil, 0},
		staticCase{"GET", "/i/..%2f..%2fa.txt", nil, 0},
		staticCase{"GET", "/re/..%2fa.txt", nil, 0},
		// Unreadable.
		staticCase{"GET", "/secret.txt", nil, 0},
		staticCase{"GET", "/locked/x.txt", nil, 0},
		staticCase{"GET", "/locked/", nil, 0},
		staticCase{"GET", "/ailocked/", nil, 0},
		// sendfile on and off, a chunked sendfile.
		staticCase{"GET", "/sf/big.bin", nil, 0},
		staticCase{"GET", "/sf/dir2/m.bin", nil, 0},
		staticCase{"GET", "/sf/a.txt", nil, 0},
		staticCase{"GET", "/sf/dir2/m.bin", map[string]string{"Range": "bytes=1000-700000,-100"}, 0},
		staticCase{"GET", "/nosf/big.bin", nil, 0},
		staticCase{"GET", "/nosf/dir2/m.bin", nil, 0},
		staticCase{"GET", "/nosf/a.txt", nil, 0},
		staticCase{"HEAD", "/nosf/dir2/m.bin", nil, 0},
		staticCase{"GET", "/nosf/dir2/m.bin", map[string]string{"Range": "bytes=5-6,1000000-"}, 0},
		staticCase{"GET", "/chunk/dir2/m.bin", nil, 0},
		// A file as an error page.
		staticCase{"GET", "/ep/missing", nil, 0},
		staticCase{"GET", "/ep/missing", map[string]string{"If-None-Match": `*`}, 0},
		staticCase{"GET", "/ep/missing", map[string]string{"Range": "bytes=0-1"}, 0},
		staticCase{"HEAD", "/ep/missing", nil, 0},
		staticCase{"GET", "/ep2/missing", nil, 0},
		staticCase{"GET", "/ep2/missing", map[string]string{"If-None-Match": `*`}, 0},
		staticCase{"GET", "/ep2/missing", map[string]string{"Range": "bytes=0-1"}, 0},
		// The core's redirects.
		staticCase{"GET", "/ret", nil, 0},
		staticCase{"GET", "/ret", nil, 1},
		staticCase{"GET", "/ret", nil, 2},
		staticCase{"GET", "/dir", nil, 2},
	)
	for _, c := range cases {
		name := c.method + " " + c.target
		if len(c.headers) > 0 {
			name += fmt.Sprint(" ", c.headers)
		}
		var want, got staticAnswer
		for try := 0; try < 5; try++ {
			// Times in Expires and Cache-Control count from the Date: ask again
			// when the two answers came in different seconds.
			want = askStatic(t, ngAddrs[c.server], c)
			got = askStatic(t, npAddrs[c.server], c)
			if want.date == got.date {
				break
			}
		}
		if diff := compareStatic(want, got); diff != "" {
			t.Errorf("%s:\n%s", name, diff)
		}
	}

	// nginx's error-log lines, in its words.
	for _, line := range []string{
		`open() "` + ft.root + `/missing.txt" failed (2: No such file or directory)`,
		`open() "` + ft.root + `/secret.txt" failed (13: Permission denied)`,
		`directory index of "` + ft.root + `/dir2/" is forbidden`,
	} {
		np.waitLog(line)
	}

	// Where numaproxy differs on purpose: an alias in a location without a trailing
	// slash lets nginx climb out of the alias ("/ali../a.txt" is www/dir/../a.txt).
	c := staticCase{"GET", "/ali../a.txt", nil, 0}
	want, got := askStatic(t, ngAddrs[0], c), askStatic(t, npAddrs[0], c)
	if want.status != 200 || want.body != "hello world\n" || got.status != 403 {
		t.Errorf("alias traversal: nginx %d %q, numaproxy %d; want nginx 200, numaproxy 403", want.status, want.body, got.status)
	}
}

var portRe = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// askStatic sends the request raw (the headers exactly as given) and reads the answer.
func askStatic(t *testing.T, addr string, c staticCase) staticAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\n", c.method, c.target)
	fmt.Fprintf(&req, "Host: %s\r\n", addr)
	req.WriteString("Connection: close\r\n")
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
		t.Fatalf("%s %s to %s: %v", c.method, c.target, addr, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s to %s: %v", c.method, c.target, addr, err)
	}
	a := staticAnswer{status: resp.StatusCode, headers: map[string]string{}, body: string(body), date: resp.Header.Get("Date")}
	for _, k := range staticHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			a.headers[k] = portRe.ReplaceAllString(strings.Join(v, ", "), "127.0.0.1:PORT")
		}
	}
	if resp.ContentLength >= 0 && resp.Header.Get("Content-Length") != "" {
		a.headers["Content-Length"] = strconv.FormatInt(resp.ContentLength, 10)
	}
	if resp.StatusCode >= 300 && resp.StatusCode != 304 {
		a.body = ""
		delete(a.headers, "Content-Length") // each server's own page
	}
	return a
}

var staticBoundaryRe = regexp.MustCompile(`boundary=(\d{20})`)

// compareStatic lists the differences; multipart boundaries are compared by form.
func compareStatic(want, got staticAnswer) string {
	norm := func(a *staticAnswer) {
		if m := staticBoundaryRe.FindStringSubmatch(a.headers["Content-Type"]); m != nil {
			a.headers["Content-Type"] = strings.ReplaceAll(a.headers["Content-Type"], m[1], "BOUNDARY")
			a.body = strings.ReplaceAll(a.body, m[1], "BOUNDARY")
		}
	}
	norm(&want)
	norm(&got)
	var diff strings.Builder
	if want.status != got.status {
		fmt.Fprintf(&diff, "  status: nginx %d, numaproxy %d\n", want.status, got.status)
	}
	for _, k := range staticHeaders {
		w, wok := want.headers[k]
		g, gok := got.headers[k]
		if w != g || wok != gok {
			fmt.Fprintf(&diff, "  %s: nginx %q (%v), numaproxy %q (%v)\n", k, w, wok, g, gok)
		}
	}
	if want.body != got.body {
		if len(want.body) > 300 || len(got.body) > 300 {
			fmt.Fprintf(&diff, "  body: nginx %d bytes %x, numaproxy %d bytes %x\n", len(want.body), sha256.Sum256([]byte(want.body)), len(got.body), sha256.Sum256([]byte(got.body)))
		} else {
			fmt.Fprintf(&diff, "  body:\n  nginx     %q\n  numaproxy %q\n", want.body, got.body)
		}
	}
	return diff.String()
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
	cases := []staticCase{
		{"GET", "/ct/plain", nil, 0},
		{"GET", "/ct/koi", nil, 0},
		{"GET", "/ct/param", nil, 0},
		{"GET", "/ct/image", nil, 0},
		{"GET", "/ct/lm", nil, 0},
		{"GET", "/ct/lm", map[string]string{"If-Modified-Since": lm}, 0},
		{"GET", "/ct/lm", map[string]string{"If-None-Match": `"abc"`}, 0},
		{"GET", "/ct/lm", map[string]string{"Range": "bytes=0-1"}, 0},
		{"GET", "/ct/cc", nil, 0},
		{"GET", "/ct/redirect", nil, 0},
		{"GET", "/ct/missing", nil, 0},
		{"GET", "/mod/lm", nil, 0},
		{"GET", "/mod/plain", nil, 0},
		{"GET", "/none/nothing", nil, 0},
		{"GET", "/ct/xaccel", nil, 0},
		{"GET", "/ct/xaccel2", nil, 0},
		{"GET", "/ct/xaccel2", map[string]string{"Range": "bytes=0-1"}, 0},
	}
	for _, c := range cases {
		var want, got staticAnswer
		for try := 0; try < 5; try++ {
			want, got = askStatic(t, ngAddr, c), askStatic(t, npAddr, c)
			if want.date == got.date {
				break
			}
		}
		if diff := compareStatic(want, got); diff != "" {
			t.Errorf("%s %s %v:\n%s", c.method, c.target, c.headers, diff)
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
		c := staticCase{"GET", target, nil, 0}
		want, got := askStatic(t, ngAddr, c), askStatic(t, npAddr, c)
		if want.status != got.status || want.body != got.body {
			t.Errorf("%s: nginx %d %q, numaproxy %d %q", target, want.status, want.body, got.status, got.body)
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
