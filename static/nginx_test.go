package static

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/statictest"
	"github.com/numaproxy/numaproxy/internal/testport"
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
	cmd.Env = append(os.Environ(), "TZ="+statictest.Zone) // local times (autoindex_localtime, expires @time) are not UTC
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

// redirectServers are nginx-only servers with the same root as the shared one,
// differing in the core's redirect directives, which the package takes as input.
const redirectServers = `
	server { listen 127.0.0.1:PORT1; server_name example.org www.example.org; root ROOT; server_name_in_redirect on; port_in_redirect off; }
	server { listen 127.0.0.1:PORT2; root ROOT; absolute_redirect off; }
`

func TestDifferentialNginx(t *testing.T) {
	zone, err := time.LoadLocation(statictest.Zone)
	if err != nil {
		t.Skip(err)
	}
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = zone
	dir := t.TempDir()
	ft := statictest.MakeTree(t, dir)
	port, port1, port2 := freePort(t), freePort(t), freePort(t)
	repl := strings.NewReplacer("ROOT", ft.Root, "PORT1", strconv.Itoa(port1), "PORT2", strconv.Itoa(port2), "PORT", strconv.Itoa(port))
	block := repl.Replace(statictest.Server(""))
	addr := startNginx(t, dir, block+repl.Replace(redirectServers), port)
	addrs := []string{addr, "127.0.0.1:" + strconv.Itoa(port1), "127.0.0.1:" + strconv.Itoa(port2)}
	cfg := mustConf(t, "http {"+block+"}")
	srv := cfg.HTTP.Servers[0]
	h := NewHandler()
	defer h.Close()

	for _, c := range statictest.Cases(ft.Mtime) {
		name := c.Method + " " + c.Target
		if len(c.Headers) > 0 {
			name += fmt.Sprint(" ", c.Headers)
		}
		want, date := askNginx(t, addrs[c.Server], c)
		base := []*RedirectBase{{Host: []byte("127.0.0.1"), Port: port}, {Host: []byte("example.org")}, nil}[c.Server]
		got := askPackage(t, h, srv, c, date, base)
		if diff := statictest.Compare(want, got, "static"); diff != "" {
			t.Errorf("%s:\n%s", name, diff)
		}
	}

	// Where numaproxy differs on purpose: an alias in a location without a trailing
	// slash lets nginx climb out of the alias ("/ali../a.txt" is www/dir/../a.txt).
	c := statictest.Case{Method: "GET", Target: "/ali../a.txt"}
	want, date := askNginx(t, addr, c)
	got := askPackage(t, h, srv, c, date, nil)
	if want.Status != 200 || want.Body != "hello world\n" || got.Status != 403 {
		t.Errorf("alias traversal: nginx %d %q, static %d; want nginx 200, static 403", want.Status, want.Body, got.Status)
	}
}

// askNginx is statictest.Ask; it returns the Date too, as a Unix time.
func askNginx(t *testing.T, addr string, c statictest.Case) (statictest.Answer, int64) {
	t.Helper()
	a := statictest.Ask(t, addr, c)
	date, err := http.ParseTime(a.Date)
	if err != nil {
		t.Fatalf("Date: %v", err)
	}
	return a, date.Unix()
}

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
func askPackage(t *testing.T, h *Handler, srv *conf.Server, c statictest.Case, now int64, base *RedirectBase) statictest.Answer {
	t.Helper()
	target := c.Target
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
			t.Fatalf("%s: redirect loop", c.Target)
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
			Method: []byte(c.Method), URI: []byte(uri), Args: []byte(args), Internal: internal,
			Vars: vars, Now: now, Redirect: base,
		}
		hdr := func(k string) []byte {
			if v, ok := c.Headers[k]; ok {
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
func answerOf(t *testing.T, c statictest.Case, r *Response) statictest.Answer {
	t.Helper()
	if r.Action != Send {
		t.Fatalf("%s: action %d", c.Target, r.Action)
	}
	a := statictest.Answer{Status: r.Status, Headers: map[string]string{}}
	set := func(k string, v []byte) {
		if v != nil {
			a.Headers[k] = string(v)
		}
	}
	if len(r.ContentType) > 0 {
		set("Content-Type", r.AppendContentType(nil))
	}
	if r.ContentLength >= 0 && !r.ErrorPage {
		a.Headers["Content-Length"] = strconv.FormatInt(r.ContentLength, 10)
	}
	if r.LastModified >= 0 {
		set("Last-Modified", AppendHTTPTime(nil, r.LastModified))
	}
	set("ETag", r.ETag)
	set("Content-Range", r.ContentRange)
	if r.AcceptRanges {
		a.Headers["Accept-Ranges"] = "bytes"
	}
	set("Location", r.Location)
	set("Expires", r.Expires)
	set("Cache-Control", r.CacheControl)
	if r.ErrorPage || c.Method == "HEAD" {
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
			t.Fatalf("%s: pread %d at %d: %d, %v", c.Target, p.Len, p.Off, n, err)
		}
		body = append(body, buf...)
	}
	if r.ContentLength >= 0 && int64(len(body)) != r.ContentLength {
		t.Errorf("%s: body of %d bytes, Content-Length %d", c.Target, len(body), r.ContentLength)
	}
	a.Body = string(body)
	return a
}
