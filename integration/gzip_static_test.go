package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gzip_static (nginx's ngx_http_gzip_static_module, built into Debian's nginx)
// and the range filter on a response gzip compresses on the fly, compared with
// nginx on the same files and http block.

const gzipStaticServer = `
server {
    listen 127.0.0.1:PORT;
    root ROOT;
    location /on/ { gzip_static on; }
    location /always/ { gzip_static always; }
    location /vary/ { gzip_static on; gzip_vary on; }
    location /gunzip/ { gzip_static always; gunzip on; gzip_vary on; }
    location /proxied/ { gzip_static on; gzip_proxied any; gzip_http_version 1.0; }
    location /expires/ { gzip_static on; expires 1h; charset utf-8; charset_types text/css; }
    location /err/ { gzip_static on; error_page 404 /on/a.css; }
    location /nosendfile/ { gzip_static on; sendfile off; }
    location /otf/ { gzip on; gzip_types text/plain; gzip_min_length 1; gzip_vary on; }
    location /otfstatic/ { gzip on; gzip_static on; gzip_types text/plain text/css; gzip_min_length 1; }
}
`

// gzipStaticTree writes the same files in every location's folder: a.css with a
// precompressed a.css.gz (not what on-the-fly gzip would make: the body tells
// which was sent), b.txt without one, c.txt whose .gz is a folder, an index.html
// with its .gz.
func gzipStaticTree(t *testing.T) (root string, gz []byte) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "www")
	css := []byte(strings.Repeat("body { color: red; }\n", 40))
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(css)
	zw.Close()
	gz = bytes.Clone(buf.Bytes())
	mtime := time.Date(2024, 3, 9, 16, 5, 7, 0, time.UTC)
	// A .gz far larger than a socket buffer: sent with sendfile (or read in
	// pieces with sendfile off), a partial send resumed.
	noise := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	buf.Reset()
	zw, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(noise)
	zw.Close()
	bigGz := bytes.Clone(buf.Bytes())
	for _, d := range []string{"on", "always", "vary", "gunzip", "proxied", "expires", "err", "otf", "otfstatic", "nosendfile"} {
		files := map[string][]byte{
			"a.css":           css,
			"a.css.gz":        gz,
			"b.txt":           []byte(strings.Repeat("plain text, no .gz beside it\n", 30)),
			"c.txt":           []byte("c\n"),
			"index.html":      []byte("<p>index</p>\n"),
			"index.html.gz":   gz,
			"c.txt.gz/keep":   []byte("a folder\n"),
			"empty.txt":       nil,
			"empty.txt.gz":    nil,
			"sub/deep.css":    css,
			"sub/deep.css.gz": gz,
			"big.js":          []byte("plain"),
			"big.js.gz":       bigGz,
		}
		for name, data := range files {
			p := filepath.Join(root, d, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root, gz
}

type gzCase struct {
	method, target string
	headers        []string // "Name: value"
	proto          string   // "HTTP/1.1" when empty
}

var gzStaticHeaders = []string{"Content-Type", "Content-Length", "Content-Encoding", "Vary", "Last-Modified", "ETag",
	"Content-Range", "Accept-Ranges", "Expires", "Cache-Control", "Transfer-Encoding"}

// askGz sends c raw and reduces the answer to what is compared: the status, the
// fields above, and the body (gunzipped when it came compressed on the fly, as
// zlib's and numaproxy's compressed bytes differ; precompressed bodies as sent).
func askGz(t *testing.T, addr string, c gzCase, otf bool) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	proto := c.proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	req := fmt.Sprintf("%s %s %s\r\nHost: x\r\nConnection: close\r\n", c.method, c.target, proto)
	for _, h := range c.headers {
		req += h + "\r\n"
	}
	if c.method == "POST" {
		req += "Content-Length: 0\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: c.method})
	if err != nil {
		t.Fatalf("%v to %s: %v", c, addr, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%v to %s: %v", c, addr, err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%d\n", resp.StatusCode)
	if resp.ContentLength >= 0 && resp.Header.Get("Content-Length") == "" && resp.StatusCode != 304 {
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	if len(resp.TransferEncoding) > 0 {
		resp.Header.Set("Transfer-Encoding", strings.Join(resp.TransferEncoding, ","))
	}
	for _, k := range gzStaticHeaders {
		if k == "Content-Length" && resp.StatusCode >= 300 && resp.StatusCode != 304 {
			continue // each server's own error page
		}
		if v := resp.Header.Values(k); len(v) > 0 {
			if otf && k == "Content-Length" && resp.Header.Get("Content-Encoding") == "gzip" {
				continue
			}
			if k == "Expires" {
				// From the response's Date (this test's expires is relative,
				// 1h): the two servers answer moments
				// apart, sometimes in different seconds.
				if e, d := parseHTTPTime(v[0]), parseHTTPTime(resp.Header.Get("Date")); !e.IsZero() && !d.IsZero() {
					fmt.Fprintf(&out, "Expires: Date%+ds\n", int(e.Sub(d).Seconds()))
					continue
				}
			}
			fmt.Fprintf(&out, "%s: %s\n", k, strings.Join(v, ", "))
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode != 304 {
		return out.String() // each server's own error page
	}
	if otf && resp.Header.Get("Content-Encoding") == "gzip" && len(body) > 0 {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%v to %s: %v", c, addr, err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%v to %s: %v", c, addr, err)
		}
		out.WriteString("(gunzipped) ")
	}
	fmt.Fprintf(&out, "body %d %x %q", len(body), sha256.Sum256(body), bytes.ToValidUTF8(body[:min(len(body), 40)], []byte("?")))
	return out.String()
}

func TestGzipStaticLikeNginx(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nginx runs as root here")
	}
	nginxBinary(t)
	root, gz := gzipStaticTree(t)
	ngPort, npPort := freePort(t), freePort(t)
	block := func(port int) string {
		return strings.NewReplacer("ROOT", root, "PORT", strconv.Itoa(port)).Replace(gzipStaticServer)
	}
	ngAddr, npAddr := "127.0.0.1:"+strconv.Itoa(ngPort), "127.0.0.1:"+strconv.Itoa(npPort)
	t.Logf("nginx on %s, numaproxy on %s", ngAddr, npAddr)
	startStaticNginx(t, block(ngPort), ngAddr)
	startStaticNumaproxy(t, block(npPort), npAddr)

	lm := "Sat, 09 Mar 2024 16:05:07 GMT"
	gzETag := fmt.Sprintf(`"%x-%x"`, time.Date(2024, 3, 9, 16, 5, 7, 0, time.UTC).Unix(), len(gz))
	var cases []gzCase
	for _, d := range []string{"on", "always", "vary", "gunzip", "proxied", "expires", "err", "otfstatic", "nosendfile"} {
		p := "/" + d + "/"
		cases = append(cases,
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p + "a.css", nil, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: deflate, gzip;q=0.5"}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip;q=0"}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: br"}, ""},
			gzCase{"HEAD", p + "a.css", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"POST", p + "a.css", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip", "Range: bytes=0-9"}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip", "Range: bytes=0-4,10-14"}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip", "Range: bytes=99999-"}, ""},
			gzCase{"GET", p + "a.css", []string{"Range: bytes=0-9"}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip", "If-Modified-Since: " + lm}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip", "If-None-Match: " + gzETag}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip", "If-Range: " + gzETag, "Range: bytes=1-3"}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip", "Via: 1.1 cache"}, ""},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip"}, "HTTP/1.0"},
			gzCase{"GET", p + "a.css", []string{"Accept-Encoding: gzip", "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"}, ""},
			gzCase{"GET", p + "b.txt", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p + "c.txt", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p + "empty.txt", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p, []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p + "sub", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p + "sub/deep.css", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p + "missing.css", []string{"Accept-Encoding: gzip"}, ""},
			gzCase{"GET", p + "big.js", []string{"Accept-Encoding: gzip"}, ""},
		)
	}
	// On-the-fly gzip: a Range is not honoured on a response gzip compresses (nginx's
	// gzip filter clears allow_ranges before the range filter), and is on one it
	// does not.
	for _, h := range [][]string{
		{"Accept-Encoding: gzip", "Range: bytes=0-9"},
		{"Accept-Encoding: gzip", "Range: bytes=0-4,10-14"},
		{"Accept-Encoding: gzip", "Range: bytes=99999-"},
		{"Range: bytes=0-9"},
		{"Accept-Encoding: gzip;q=0", "Range: bytes=0-9"},
		{"Accept-Encoding: gzip", "Range: bytes=0-9", "Via: 1.1 cache"},
		{"Accept-Encoding: gzip", "Range: bytes=0-9"},
	} {
		cases = append(cases, gzCase{"GET", "/otf/b.txt", h, ""}, gzCase{"GET", "/otf/a.css", h, ""}, gzCase{"GET", "/otfstatic/b.txt", h, ""})
	}
	cases = append(cases, gzCase{"GET", "/otf/b.txt", []string{"Accept-Encoding: gzip", "Range: bytes=0-9"}, "HTTP/1.0"})

	for _, c := range cases {
		otf := strings.HasPrefix(c.target, "/otf")
		want, got := askGz(t, ngAddr, c, otf), askGz(t, npAddr, c, otf)
		if want != got {
			t.Errorf("%s %s %s %q:\nnginx:\n%s\nnumaproxy:\n%s", c.method, c.target, c.proto, c.headers, want, got)
		}
	}
}

// TestBrotliZstdStatic: brotli_static and zstd_static serve FILE.br and FILE.zst
// as ngx_brotli's static module does (Debian's nginx has no brotli module to
// compare with): "on" reads only whether Accept-Encoding names the coding, br is
// tried before zstd and gzip, "always" serves it to any client.
func TestBrotliZstdStatic(t *testing.T) {
	root := filepath.Join(t.TempDir(), "www")
	for _, d := range []string{"on", "always", "zgz"} {
		for name, data := range map[string]string{"a.css": "plain", "a.css.br": "BROTLI", "a.css.zst": "ZSTD", "a.css.gz": "GZIP"} {
			p := filepath.Join(root, d, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.Remove(filepath.Join(root, "zgz", "a.css.br"))
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	startStaticNumaproxy(t, `server { listen `+addr+`; root `+root+`; gzip_vary on;
		location /on/ { brotli_static on; zstd_static on; gzip_static on; }
		location /always/ { brotli_static always; }
		location /zgz/ { zstd_static on; gzip_static on; }
	}`, addr)
	for _, c := range []struct {
		path, ae, want string
	}{
		{"/on/a.css", "br", "br BROTLI Vary"},
		{"/on/a.css", "gzip, deflate, br, zstd", "br BROTLI Vary"},
		{"/on/a.css", "br;q=0, gzip", "br BROTLI Vary"}, // ngx_brotli reads no q-value
		{"/on/a.css", "zstd, gzip", "zstd ZSTD Vary"},
		{"/on/a.css", "gzip", "gzip GZIP Vary"},
		{"/on/a.css", "xbr, brx", "- plain Vary"},
		{"/on/a.css", "", "- plain Vary"},
		{"/always/a.css", "", "br BROTLI -"},
		{"/always/a.css", "gzip", "br BROTLI -"},
		{"/zgz/a.css", "br, zstd", "zstd ZSTD Vary"},
		{"/zgz/a.css", "br", "- plain Vary"},
	} {
		hs := []string{}
		if c.ae != "" {
			hs = append(hs, "Accept-Encoding: "+c.ae)
		}
		got := askGz(t, addr, gzCase{"GET", c.path, hs, ""}, false)
		ce, vary := "-", "-"
		for _, l := range strings.Split(got, "\n") {
			if v, ok := strings.CutPrefix(l, "Content-Encoding: "); ok {
				ce = v
			}
			if strings.HasPrefix(l, "Vary: ") {
				vary = "Vary"
			}
		}
		body := got[strings.LastIndex(got, " ")+1:]
		if s := ce + " " + strings.Trim(body, `"`) + " " + vary; s != c.want {
			t.Errorf("%s with %q: %s, want %s\n%s", c.path, c.ae, s, c.want, got)
		}
	}
}

// parseHTTPTime is an HTTP date, the zero time when v is not one.
func parseHTTPTime(v string) time.Time {
	t, _ := http.ParseTime(v)
	return t
}
