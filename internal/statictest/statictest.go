// Package statictest is what the two differential tests of static files share:
// static's, which runs the package's handlers, and integration's, which runs the
// binary; both compare with nginx serving the same tree with the same locations,
// request by request. For tests only.
package statictest

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Zone is the local time zone of both servers (autoindex_localtime, expires
// @time).
const Zone = "Asia/Tokyo"

// Tree is the tree both servers serve. Times are fixed so ETags and Last-Modified
// are the same on every run.
type Tree struct {
	Root  string
	Mtime time.Time
}

// MakeTree writes the tree in dir/www (as root: some files belong to nobody).
func MakeTree(t *testing.T, dir string) *Tree {
	t.Helper()
	root := filepath.Join(dir, "www")
	ft := &Tree{Root: root, Mtime: time.Date(2024, 3, 9, 16, 5, 7, 0, time.UTC)}
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
			os.Chtimes(p, ft.Mtime, ft.Mtime)
		}
		return nil
	})
	return ft
}

// Server is the http block both servers load, with ROOT and PORT to replace: the
// locations under test, and more (locations) in the same server.
func Server(more string) string {
	return `
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
` + more + "\t}\n"
}

// Case is one request: to the main server (Server 0), or to a test's redirect
// variants of it (1, 2).
type Case struct {
	Method  string
	Target  string            // path and query, as sent (escaped)
	Headers map[string]string // request headers
	Server  int
}

// Cases are the requests both tests send, for a tree of modification time d.
func Cases(d time.Time) []Case {
	lm := d.UTC().Format(http.TimeFormat)
	etagA := fmt.Sprintf(`"%x-c"`, d.Unix())
	return []Case{
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
}

// Headers are the response headers compared.
var Headers = []string{"Content-Type", "Content-Length", "Last-Modified", "ETag", "Content-Range", "Accept-Ranges", "Location", "Expires", "Cache-Control"}

var boundaryRe = regexp.MustCompile(`boundary=(\d{20})`)

// NormBoundary replaces a multipart answer's boundary in its Content-Type and
// body, so that answers compare by form.
func NormBoundary(headers map[string]string, body *string) {
	if m := boundaryRe.FindStringSubmatch(headers["Content-Type"]); m != nil {
		headers["Content-Type"] = strings.ReplaceAll(headers["Content-Type"], m[1], "BOUNDARY")
		*body = strings.ReplaceAll(*body, m[1], "BOUNDARY")
	}
}

// Answer is what a server sent, reduced to what is compared.
type Answer struct {
	Status  int
	Headers map[string]string // those of Headers it sent
	Body    string            // "" for error pages (each server's own)
	Date    string
}

// IsErrorPage: the statuses nginx answers with its special response page.
func IsErrorPage(status int) bool { return status >= 300 && status != 304 }

// Ask sends c to addr raw (the headers exactly as given) and reads the answer.
func Ask(t *testing.T, addr string, c Case) Answer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", c.Method, c.Target, addr)
	for k, v := range c.Headers {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	if c.Method == "POST" || c.Method == "PUT" {
		req.WriteString("Content-Length: 0\r\n")
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: c.Method})
	if err != nil {
		t.Fatalf("%s %s to %s: %v", c.Method, c.Target, addr, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s to %s: %v", c.Method, c.Target, addr, err)
	}
	a := Answer{Status: resp.StatusCode, Headers: map[string]string{}, Body: string(body), Date: resp.Header.Get("Date")}
	for _, k := range Headers {
		if v := resp.Header.Values(k); len(v) > 0 {
			a.Headers[k] = strings.Join(v, ", ")
		}
	}
	if resp.ContentLength >= 0 && resp.Header.Get("Content-Length") != "" {
		a.Headers["Content-Length"] = strconv.FormatInt(resp.ContentLength, 10)
	}
	if IsErrorPage(resp.StatusCode) {
		a.Body = ""
		delete(a.Headers, "Content-Length") // each server's own page
	}
	return a
}

// Compare lists how got (from the server called name) differs from nginx's want;
// multipart boundaries are compared by form, long bodies by digest.
func Compare(want, got Answer, name string) string {
	NormBoundary(want.Headers, &want.Body)
	NormBoundary(got.Headers, &got.Body)
	var diff strings.Builder
	if want.Status != got.Status {
		fmt.Fprintf(&diff, "  status: nginx %d, %s %d\n", want.Status, name, got.Status)
	}
	for _, k := range Headers {
		w, wok := want.Headers[k]
		g, gok := got.Headers[k]
		if w != g || wok != gok {
			fmt.Fprintf(&diff, "  %s: nginx %q (%v), %s %q (%v)\n", k, w, wok, name, g, gok)
		}
	}
	if want.Body != got.Body {
		if len(want.Body) > 300 || len(got.Body) > 300 {
			fmt.Fprintf(&diff, "  body: nginx %d bytes %x, %s %d bytes %x\n", len(want.Body), sha256.Sum256([]byte(want.Body)), name, len(got.Body), sha256.Sum256([]byte(got.Body)))
		} else {
			fmt.Fprintf(&diff, "  body:\n  %-*s %q\n  %-*s %q\n", len(name), "nginx", want.Body, len(name), name, got.Body)
		}
	}
	return diff.String()
}
