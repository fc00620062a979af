package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Differential tests of proxy directives against nginx: each runs numaproxy and
// Debian's nginx on the same http block, each with an upstream of its own that
// behaves the same, and compares what clients get and what the upstreams receive.

// recReq is one request as a recUpstream received it.
type recReq struct {
	Line   string              // the request line
	Fields map[string][]string // by lower-case name, in order
	Body   string
	// BodyComplete: the body its framing announced arrived whole within bodyWait.
	BodyComplete bool
	Remote       string // the proxy's end of the connection
	Conn         int64  // serial of the connection, from 1
}

func (r recReq) field(name string) string { return strings.Join(r.Fields[name], ", ") }

// bodyWait is how long a recUpstream waits for a request body that its framing
// announces (proxy_pass_request_body off sends the length without the body).
const bodyWait = 300 * time.Millisecond

// recUpstream is a keep-alive upstream on a TCP or unix-domain listener that records
// each request and answers it with answer's raw response. A connection is closed
// after a response that says Connection: close, or a body that did not arrive.
type recUpstream struct {
	Addr     string // 127.0.0.1:port, or the socket's path
	accepted atomic.Int64
	mu       sync.Mutex
	reqs     []recReq
}

func newRecUpstream(t *testing.T, network string, answer func(r recReq) string) *recUpstream {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		dir, err := os.MkdirTemp("", "np") // short: a socket path has 107 bytes at most
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		addr = filepath.Join(dir, "up.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	u := &recUpstream{Addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serial := u.accepted.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					c.SetReadDeadline(time.Now().Add(30 * time.Second))
					r, ok := readRecReq(c, br)
					if r.Line == "" {
						return
					}
					r.Remote, r.Conn = c.RemoteAddr().String(), serial
					u.mu.Lock()
					u.reqs = append(u.reqs, r)
					u.mu.Unlock()
					resp := answer(r)
					c.SetWriteDeadline(time.Now().Add(ioTimeout))
					if _, err := io.WriteString(c, resp); err != nil || !ok || strings.Contains(strings.ToLower(resp), "connection: close") {
						return
					}
				}
			}()
		}
	}()
	return u
}

// readRecReq reads one request; ok is false when its body did not arrive whole.
func readRecReq(c net.Conn, br *bufio.Reader) (recReq, bool) {
	head, err := readHead(br)
	if err != nil {
		return recReq{}, false
	}
	lines := strings.Split(strings.TrimRight(head, "\r\n"), "\r\n")
	r := recReq{Line: lines[0], Fields: map[string][]string{}}
	for _, l := range lines[1:] {
		name, value, _ := strings.Cut(l, ":")
		name = strings.ToLower(name)
		r.Fields[name] = append(r.Fields[name], strings.TrimSpace(value))
	}
	c.SetReadDeadline(time.Now().Add(bodyWait))
	var body io.Reader
	switch {
	case strings.EqualFold(r.field("transfer-encoding"), "chunked"):
		body = httputil.NewChunkedReader(br)
	case r.field("content-length") != "":
		n, _ := strconv.ParseInt(r.field("content-length"), 10, 64)
		body = io.LimitReader(br, n)
	default:
		r.BodyComplete = true
		return r, true
	}
	data, err := io.ReadAll(body)
	r.Body = string(data)
	if err == nil && body != nil {
		if lr, ok := body.(*io.LimitedReader); ok && lr.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	r.BodyComplete = err == nil
	return r, r.BodyComplete
}

func (u *recUpstream) requests() []recReq {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.reqs)
}

func (u *recUpstream) last(t *testing.T) recReq {
	t.Helper()
	r := u.requests()
	if len(r) == 0 {
		t.Fatal("the upstream received no request")
	}
	return r[len(r)-1]
}

// okAnswer answers 200 with a body that names the request line.
func okAnswer(r recReq) string {
	body := r.Line
	return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// proxyTarget is numaproxy or nginx running a test's configuration.
type proxyTarget struct {
	name string
	addr string
	ng   *nginxInstance // nil for numaproxy
	in   *instance      // nil for nginx
}

// startBoth runs numaproxy and nginx, each on the http block conf makes for its
// listen address and its own upstream (made by newUp).
func startBoth[U any](t *testing.T, newUp func() U, conf func(listen string, up U) string) (targets [2]proxyTarget, ups [2]U) {
	t.Helper()
	for i, name := range []string{"numaproxy", "nginx"} {
		ups[i] = newUp()
		addr := addrFor(t)
		targets[i] = proxyTarget{name: name, addr: addr}
		if i == 0 {
			targets[i].in = startHTTP(t, conf(addr, ups[i]), addr)
		} else {
			targets[i].ng = startNginx(t, conf(addr, ups[i]), addr)
		}
	}
	return targets, ups
}

// rawExchange sends raw request bytes on a new connection and reads one response
// (to a request of method); the body is returned, the response's Body is drained.
func rawExchange(t *testing.T, addr, method, req string) (*http.Response, string) {
	t.Helper()
	cl := newClient(t, addr)
	cl.send(req)
	return cl.read(method)
}

// serverToken matches the server's name and version in bodies and fields.
var serverToken = regexp.MustCompile(`(numaproxy|nginx)(/[0-9.]+)?`)

// norm replaces the server's name in s, for comparing pages.
func norm(s string) string { return serverToken.ReplaceAllString(s, "SERVER") }

// sameObservations fails the test where numaproxy's observations differ from nginx's.
func sameObservations(t *testing.T, what string, np, ng []string) {
	t.Helper()
	if !slices.Equal(np, ng) {
		var b strings.Builder
		for i := 0; i < max(len(np), len(ng)); i++ {
			var a, c string
			if i < len(np) {
				a = np[i]
			}
			if i < len(ng) {
				c = ng[i]
			}
			mark := "  "
			if a != c {
				mark = "!="
			}
			fmt.Fprintf(&b, "%s numaproxy %q\n   nginx     %q\n", mark, a, c)
		}
		t.Errorf("%s: numaproxy and nginx differ:\n%s", what, b.String())
	}
}

// TestProxyUnixSocketUpstream: proxy_pass http://unix:/path:/uri and a server
// unix:/path of an upstream block reach a unix-domain socket upstream, with Host
// localhost, $upstream_addr unix:/path, and keep-alive connections reused; a socket
// nobody listens on is 502.
func TestProxyUnixSocketUpstream(t *testing.T) {
	t.Parallel()
	targets, ups := startBoth(t, func() *recUpstream { return newRecUpstream(t, "unix", okAnswer) },
		func(listen string, up *recUpstream) string {
			return `
  upstream us { server unix:` + up.Addr + `; keepalive 4; }
  server {
    listen ` + listen + `;
    location /u/ { proxy_pass http://unix:` + up.Addr + `:/base/; }
    location /plain/ { proxy_pass http://unix:` + up.Addr + `; add_header X-Up $upstream_addr; }
    location /ka/ { proxy_pass http://us; proxy_http_version 1.1; proxy_set_header Connection ""; add_header X-Up $upstream_addr; }
    location /dead/ { proxy_pass http://unix:` + up.Addr + `.none:/; }
  }`
		})
	var obs [2][]string
	for i, tg := range targets {
		up := ups[i]
		c := keepAliveClient(nil)
		for _, path := range []string{"/u/x?y=1", "/plain/z", "/ka/1", "/ka/2", "/ka/3", "/dead/"} {
			resp, body := get(t, c, "http://"+tg.addr+path)
			seen := ""
			if resp.StatusCode == 200 {
				r := up.last(t)
				seen = r.Line + " Host=" + r.field("host") + " Connection=" + r.field("connection") + " conn#" + strconv.FormatInt(r.Conn, 10)
			}
			xup := strings.ReplaceAll(resp.Header.Get("X-Up"), up.Addr, "PATH")
			obs[i] = append(obs[i], fmt.Sprintf("%s: %d %q X-Up=%s | %s", path, resp.StatusCode, norm(body), xup, seen))
		}
		if n := up.accepted.Load(); n != 3 {
			t.Errorf("%s: %d connections to the unix socket, want 3 (two closed, one kept alive for /ka/)", tg.name, n)
		}
	}
	sameObservations(t, "unix-domain upstream", obs[0], obs[1])
	if want := `/u/x?y=1: 200 "GET /base/x?y=1 HTTP/1.0" X-Up= | GET /base/x?y=1 HTTP/1.0 Host=localhost Connection=close conn#1`; obs[0][0] != want {
		t.Errorf("numaproxy: %s\nwant %s", obs[0][0], want)
	}
}

// TestProxyPassRequestBodyHeadersMethod: proxy_pass_request_body off sends the
// client's body length without the body (nginx does: a proxy_set_header
// Content-Length "" removes it), a chunked one counted first;
// proxy_pass_request_headers off sends only the proxy_set_header fields; proxy_method
// with and without variables, and after an error_page redirect (nginx keeps it over
// the redirect's GET); inheritance into nested locations; a client's Content-Length:
// 0 is passed on.
func TestProxyPassRequestBodyHeadersMethod(t *testing.T) {
	t.Parallel()
	targets, ups := startBoth(t, func() *recUpstream { return newRecUpstream(t, "tcp", okAnswer) },
		func(listen string, up *recUpstream) string {
			return `
  server {
    listen ` + listen + `;
    location /body { proxy_pass http://` + up.Addr + `; }
    location /nobody { proxy_pass http://` + up.Addr + `; proxy_pass_request_body off; }
    location /nobody-nocl { proxy_pass http://` + up.Addr + `; proxy_pass_request_body off; proxy_set_header Content-Length ""; }
    location /nohdr { proxy_pass http://` + up.Addr + `; proxy_pass_request_headers off; proxy_set_header X-Set "set $http_x_a"; }
    location /m/ { proxy_pass http://` + up.Addr + `; proxy_method $arg_m; }
    location /put { proxy_pass http://` + up.Addr + `; proxy_method PUT; }
    location /ep { return 404; error_page 404 /put; }
    location /nested/ {
      proxy_pass_request_body off;
      proxy_method PATCH;
      location /nested/in { proxy_pass http://` + up.Addr + `; proxy_http_version 1.1; }
    }
  }`
		})
	reqs := []struct{ method, path, extra, body string }{
		{"POST", "/body", "Content-Length: 5\r\n", "hello"},
		{"POST", "/body", "Content-Length: 0\r\n", ""},
		{"POST", "/nobody", "Content-Length: 5\r\n", "hello"},
		{"POST", "/nobody", "Transfer-Encoding: chunked\r\n", "3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n"},
		{"POST", "/nobody", "Transfer-Encoding: chunked\r\n", "0\r\n\r\n"},
		{"GET", "/nobody", "", ""},
		{"POST", "/nobody-nocl", "Content-Length: 5\r\n", "hello"},
		{"POST", "/nohdr", "Content-Length: 5\r\nX-A: a\r\nUser-Agent: ua\r\n", "hello"},
		{"GET", "/nohdr", "X-A: a\r\n", ""},
		{"GET", "/m/1?m=DELETE", "", ""},
		{"POST", "/m/2?m=PROPFIND", "Content-Length: 2\r\n", "hi"},
		{"GET", "/put?q", "", ""},
		{"HEAD", "/put", "", ""},
		{"GET", "/ep?z", "", ""},
		{"POST", "/nested/in", "Content-Length: 5\r\n", "hello"},
		{"POST", "/nested/in", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"},
	}
	var obs [2][]string
	for i, tg := range targets {
		for _, rq := range reqs {
			n := len(ups[i].requests())
			resp, body := rawExchange(t, tg.addr, rq.method, rq.method+" "+rq.path+" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"+rq.extra+"\r\n"+rq.body)
			line := fmt.Sprintf("%s %s %q: %d %q", rq.method, rq.path, rq.extra, resp.StatusCode, body)
			if got := ups[i].requests(); len(got) > n {
				r := got[n]
				line += fmt.Sprintf(" | %s CL=%q TE=%q body=%q complete=%v X-A=%q UA=%q X-Set=%q Conn=%q",
					r.Line, r.field("content-length"), r.field("transfer-encoding"), r.Body, r.BodyComplete,
					r.field("x-a"), r.field("user-agent"), r.field("x-set"), r.field("connection"))
			}
			obs[i] = append(obs[i], line)
		}
	}
	sameObservations(t, "request body, headers and method", obs[0], obs[1])
	for _, want := range []string{
		`POST /nobody "Content-Length: 5\r\n": 200 "POST /nobody HTTP/1.0" | POST /nobody HTTP/1.0 CL="5" TE="" body="" complete=false`,
		`POST /nobody "Transfer-Encoding: chunked\r\n": 200 "POST /nobody HTTP/1.0" | POST /nobody HTTP/1.0 CL="5" TE="" body="" complete=false`,
		`GET /put?q "": 200 "PUT /put?q HTTP/1.0" | PUT /put?q HTTP/1.0`,
		`GET /ep?z "": 404 "PUT /put HTTP/1.0" | PUT /put HTTP/1.0`,
	} {
		found := false
		for _, o := range obs[0] {
			found = found || strings.HasPrefix(o, want)
		}
		if !found {
			t.Errorf("numaproxy: no observation starts %s", want)
		}
	}

	// Where numaproxy differs on purpose: a proxy_method that evaluates to nothing
	// uses the client's method (nginx sends an empty one), one that is not a token
	// answers 500 (nginx sends it as it is).
	np := targets[0]
	if resp, _ := rawExchange(t, np.addr, "GET", "GET /m/3?m= HTTP/1.1\r\nHost: h\r\n\r\n"); resp.StatusCode != 200 || ups[0].last(t).Line != "GET /m/3?m= HTTP/1.0" {
		t.Errorf("an empty proxy_method: %d, upstream got %q", resp.StatusCode, ups[0].last(t).Line)
	}
	n := len(ups[0].requests())
	if resp, _ := rawExchange(t, np.addr, "GET", "GET /m/4?m=a(b HTTP/1.1\r\nHost: h\r\n\r\n"); resp.StatusCode != 500 || len(ups[0].requests()) != n {
		t.Errorf("an invalid proxy_method: %d, upstream requests %d -> %d", resp.StatusCode, n, len(ups[0].requests()))
	}
	np.in.waitLog(`proxy_method made an invalid method "a(b"`)

	// An upstream connection told of a body it did not get is not reused: the
	// server may take the next request for that body (nginx reuses it).
	ka := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	addr := addrFor(t)
	startHTTP(t, `
  upstream ka { server `+ka.Addr+`; keepalive 2; }
  server {
    listen `+addr+`;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location /withheld { proxy_pass http://ka; proxy_pass_request_body off; }
  }`, addr)
	for i := 0; i < 3; i++ {
		if resp, body := rawExchange(t, addr, "POST", "POST /withheld HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("withheld body: %d %q", resp.StatusCode, body)
		}
	}
	if resp, _ := rawExchange(t, addr, "GET", "GET /withheld HTTP/1.1\r\nHost: h\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if resp, _ := rawExchange(t, addr, "GET", "GET /withheld HTTP/1.1\r\nHost: h\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if n := ka.accepted.Load(); n != 4 {
		t.Errorf("%d upstream connections for 3 requests whose body was withheld and 2 without a body, want 4", n)
	}
}

// TestProxyCookieRewrite: proxy_cookie_domain and proxy_cookie_path rewrite the
// Domain and Path attributes of upstream Set-Cookie fields as nginx does: plain
// domains (any case, leading dots kept), path prefixes, ~regex and ~*regex with
// captures and variables, the first matching rule, "off", inheritance, and the value
// written out again ("; " between attributes) only when something was rewritten.
func TestProxyCookieRewrite(t *testing.T) {
	t.Parallel()
	cookies := []string{
		"a=1; Domain=example.com; Path=/app/x",
		"b=2;domain=.EXAMPLE.com;path=/app/",
		"c=3; Path=/api/v2/items; Domain=x.internal; HttpOnly",
		"d=4 ; path = /CASE/y ; secure",
		"e; domain=example.com; path=/app/",
		"f=5; Max-Age=10",
		"g=6; Domain=sub.example.net; Domain=example.com",
		"h=7;; Path=/app/z;  ",
		"domain=example.com; path=/app/",
		"i=8; Path=/apply; Domain=example.community",
	}
	answer := func(r recReq) string {
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK\r\n")
		for _, c := range cookies {
			b.WriteString("Set-Cookie: " + c + "\r\n")
		}
		b.WriteString("Content-Length: 2\r\n\r\nok")
		return b.String()
	}
	targets, _ := startBoth(t, func() *recUpstream { return newRecUpstream(t, "tcp", answer) },
		func(listen string, up *recUpstream) string {
			return `
  server {
    listen ` + listen + `;
    proxy_cookie_domain example.com $host;
    location /d/ { proxy_pass http://` + up.Addr + `; }
    location /d2/ {
      proxy_pass http://` + up.Addr + `;
      proxy_cookie_domain .Example.COM new.example;
      proxy_cookie_domain ~^(.+)\.internal$ $1.public;
      proxy_cookie_domain "~^sub\.(.*)" sub2.$1;
    }
    location /doff/ { proxy_pass http://` + up.Addr + `; proxy_cookie_domain off; }
    location /p/ {
      proxy_pass http://` + up.Addr + `;
      proxy_cookie_domain off;
      proxy_cookie_path /app/ /p/;
      proxy_cookie_path ~^/api/(v[0-9]+)(.*) /x/$1$2;
      proxy_cookie_path ~*^/case "/lower$uri";
      proxy_cookie_path /app /never/;
    }
    location /both/ {
      proxy_pass http://` + up.Addr + `;
      proxy_cookie_path / /both/;
      location /both/nested { proxy_pass http://` + up.Addr + `; proxy_cookie_path off; }
    }
  }`
		})
	var obs [2][]string
	for i, tg := range targets {
		c := keepAliveClient(nil)
		for _, path := range []string{"/d/1", "/d2/1", "/doff/1", "/p/1", "/both/1", "/both/nested"} {
			resp, _ := get(t, c, "http://"+tg.addr+path, "Host", "front.test")
			for _, v := range resp.Header.Values("Set-Cookie") {
				obs[i] = append(obs[i], path+": "+v)
			}
		}
	}
	sameObservations(t, "Set-Cookie rewriting", obs[0], obs[1])
	for _, want := range []string{
		"/d/1: a=1; Domain=front.test; Path=/app/x",
		"/d2/1: b=2; domain=.new.example; path=/app/",
		"/d2/1: c=3; Path=/api/v2/items; Domain=x.public; HttpOnly",
		"/p/1: c=3; Path=/x/v2/items; Domain=x.internal; HttpOnly",
		"/p/1: d=4; path=/lower/p/1; secure",
		"/p/1: i=8; Path=/never/ly; Domain=example.community",
	} {
		if !slices.Contains(obs[0], want) {
			t.Errorf("numaproxy: no %q in\n%s", want, strings.Join(obs[0], "\n"))
		}
	}
}

// statusAnswer answers with the status NNN named by a "/sNNN" segment of the path
// (200 without one) and a body naming it; a 401 carries two WWW-Authenticate fields.
func statusAnswer(r recReq) string {
	code := "200"
	if i := strings.Index(r.Line, "/s"); i >= 0 && i+5 <= len(r.Line) {
		code = r.Line[i+2 : i+5]
	}
	body := "upstream " + code + " for " + r.Line
	extra := ""
	if code == "401" {
		extra = "WWW-Authenticate: Basic realm=\"a\"\r\nWWW-Authenticate: Bearer\r\n"
	}
	return "HTTP/1.1 " + code + " X\r\n" + extra + "X-Up: 1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestProxyInterceptErrorsRecursive: proxy_intercept_errors replaces upstream
// responses of 300 and more that the location's error_page names (a 401 keeping its
// WWW-Authenticate), leaves the others; recursive_error_pages lets a page's own error
// get a page, up to nginx's 10 internal redirects (then 500); a return with a text
// is sent as it is, without error_page.
func TestProxyInterceptErrorsRecursive(t *testing.T) {
	t.Parallel()
	targets, ups := startBoth(t, func() *recUpstream { return newRecUpstream(t, "tcp", statusAnswer) },
		func(listen string, up *recUpstream) string {
			return `
  server {
    listen ` + listen + `;
    location /ie/ {
      proxy_pass http://` + up.Addr + `;
      proxy_intercept_errors on;
      error_page 404 /err404;
      error_page 401 /err401;
      error_page 302 =200 /err302;
      error_page 503 @named;
      error_page 307 http://example.com/moved;
    }
    location /noie/ { proxy_pass http://` + up.Addr + `; error_page 404 /err404; }
    location /ie-noep/ { proxy_pass http://` + up.Addr + `; proxy_intercept_errors on; }
    location /ie-loop/ { proxy_pass http://` + up.Addr + `; proxy_intercept_errors on; error_page 404 /ie-loop/s404; }
    location /rec/ { proxy_pass http://` + up.Addr + `; proxy_intercept_errors on; recursive_error_pages on; error_page 404 /rec/s404; }
    location /rec2/ { proxy_pass http://` + up.Addr + `; proxy_intercept_errors on; recursive_error_pages on; error_page 404 /rec2/s403; error_page 403 /err404; }
    location = /err404 { return 200 "page404 $uri $args"; }
    location = /err401 { return 401; }
    location = /err302 { return 200 "page302"; }
    location @named { proxy_pass http://` + up.Addr + `; }
    location /ret-text { return 404 "text"; error_page 404 /err404; }
    location /ret-404 { return 404; error_page 404 /err404; }
    location /r1 { return 404; error_page 404 /r2; }
    location /r2 { return 404; error_page 404 /r3; }
    location /r3 { return 200 "r3"; }
    location /r4 { recursive_error_pages on; return 404; error_page 404 /r5; }
    location /r5 { return 404; error_page 404 /r6; }
    location /r6 { return 200 "r6"; }
    location /cyc { recursive_error_pages on; return 404; error_page 404 /cyc; }
  }`
		})
	paths := []string{"/ie/s404?a=1", "/ie/s401", "/ie/s302", "/ie/s503", "/ie/s500", "/ie/s307", "/ie/s200",
		"/noie/s404", "/ie-noep/s404", "/ie-loop/s404", "/rec/s404", "/rec2/s404",
		"/ret-text", "/ret-404", "/r1", "/r4", "/cyc"}
	var obs [2][]string
	for i, tg := range targets {
		c := keepAliveClient(nil)
		for _, p := range paths {
			n := len(ups[i].requests())
			resp, body := get(t, c, "http://"+tg.addr+p)
			// nginx 1.22 passes the first WWW-Authenticate only (1.23 all of them).
			obs[i] = append(obs[i], fmt.Sprintf("%s: %d %q WWW-Authenticate=%q Location=%q X-Up=%q upstream requests %d",
				p, resp.StatusCode, norm(body), resp.Header.Get("WWW-Authenticate"), resp.Header.Get("Location"),
				resp.Header.Get("X-Up"), len(ups[i].requests())-n))
			if i == 0 && p == "/ie/s401" && len(resp.Header.Values("WWW-Authenticate")) != 2 {
				t.Errorf("numaproxy: WWW-Authenticate %q, want both of the upstream's", resp.Header.Values("WWW-Authenticate"))
			}
		}
		resp, body := rawExchange(t, tg.addr, "HEAD", "HEAD /ie/s404 HTTP/1.1\r\nHost: h\r\n\r\n")
		obs[i] = append(obs[i], fmt.Sprintf("HEAD /ie/s404: %d %q", resp.StatusCode, body))
	}
	sameObservations(t, "proxy_intercept_errors and recursive_error_pages", obs[0], obs[1])
	for _, want := range []string{
		`/ie/s404?a=1: 404 "page404 /err404 " WWW-Authenticate="" Location="" X-Up="" upstream requests 1`,
		`/ie/s401: 401 "<html>`,
		`/rec/s404: 500 "<html>`,
		`/cyc: 500 "<html>`,
		`/ret-text: 404 "text"`,
	} {
		found := false
		for _, o := range obs[0] {
			found = found || strings.HasPrefix(o, want)
		}
		if !found {
			t.Errorf("numaproxy: no observation starts %s", want)
		}
	}
	targets[0].in.waitLog("rewrite or internal redirection cycle while internally redirecting to \"/cyc\"")
}

// headOfSize answers /h/N with a response whose head is exactly N bytes, /big with
// a 1 MiB field, /many/N with N small fields; anything else with a small head.
func headOfSize(r recReq) string {
	path := strings.Fields(r.Line)[1]
	const base = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" // 36 bytes
	switch {
	case strings.Contains(path, "/h/"):
		n, _ := strconv.Atoi(path[strings.LastIndex(path, "/")+1:])
		return base + "X-Pad: " + strings.Repeat("p", n-len(base)-len("X-Pad: \r\n\r\n")) + "\r\n\r\nok"
	case strings.HasSuffix(path, "/big"):
		return base + "X-Big: " + strings.Repeat("b", 1<<20) + "\r\n\r\nok"
	case strings.Contains(path, "/many/"):
		n, _ := strconv.Atoi(path[strings.LastIndex(path, "/")+1:])
		return base + strings.Repeat("X-F: f\r\n", n) + "\r\nok"
	}
	return base + "\r\nok"
}

// TestProxyBufferSize: proxy_buffer_size bounds the upstream response head as in
// nginx: a head of exactly that size passes, one byte more (or a 1 MiB field) is
// "upstream sent too big header", an invalid header that proxy_next_upstream can
// pass to the next server and that is otherwise 502.
func TestProxyBufferSize(t *testing.T) {
	t.Parallel()
	type pair struct{ big, ok *recUpstream }
	targets, ups := startBoth(t, func() pair {
		return pair{newRecUpstream(t, "tcp", headOfSize), newRecUpstream(t, "tcp", okAnswer)}
	}, func(listen string, up pair) string {
		return `
  upstream two { server ` + up.big.Addr + `; server ` + up.ok.Addr + `; }
  server {
    listen ` + listen + `;
    location /def/ { proxy_pass http://` + up.big.Addr + `; }
    location /small/ { proxy_pass http://` + up.big.Addr + `; proxy_buffer_size 1k; }
    location /next/ { proxy_pass http://two; proxy_next_upstream invalid_header; }
    location /nonext/ { proxy_pass http://two; proxy_next_upstream off; }
  }`
	})
	// A head of exactly the buffer's size is not compared: nginx 1.22 takes it, then
	// reads the body into the full buffer, gets 0 bytes and reports "upstream
	// prematurely closed connection" (the client sees a truncated response).
	paths := []string{"/def/h/4095", "/def/h/4097", "/def/big", "/def/many/90", "/small/h/1023", "/small/h/1025", "/small/x", "/next/big", "/next/big"}
	var obs [2][]string
	for i, tg := range targets {
		c := keepAliveClient(nil)
		for _, p := range paths {
			resp, body := get(t, c, "http://"+tg.addr+p)
			obs[i] = append(obs[i], fmt.Sprintf("%s: %d %q", p, resp.StatusCode, norm(body)))
		}
		if n := len(ups[i].ok.requests()); n != 2 {
			t.Errorf("%s: the second server of the group got %d requests, want 2", tg.name, n)
		}
	}
	sameObservations(t, "proxy_buffer_size", obs[0], obs[1])
	if !strings.HasPrefix(obs[0][0], "/def/h/4095: 200") || !strings.HasPrefix(obs[0][1], "/def/h/4097: 502") || !strings.HasPrefix(obs[0][2], "/def/big: 502") {
		t.Errorf("numaproxy: %q", obs[0][:3])
	}
	for _, p := range []string{"/def/h/4096", "/small/h/1024"} {
		if resp, body := get(t, keepAliveClient(nil), "http://"+targets[0].addr+p); resp.StatusCode != 200 || body != "ok" {
			t.Errorf("numaproxy %s, a head of exactly proxy_buffer_size: %d %q", p, resp.StatusCode, body)
		}
	}
	targets[0].in.waitLog("upstream sent too big header")
	if !strings.Contains(targets[1].ng.errorLog(), "upstream sent too big header") {
		t.Error("nginx did not log a too big header")
	}
}

// upstreamSocketKeepalive reports SO_KEEPALIVE of every socket of process pid
// connected to peer (a host:port), taken from the process with pidfd_getfd.
func upstreamSocketKeepalive(t *testing.T, pid int, peer string) []int {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(pidfd)
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		if link, _ := os.Readlink(filepath.Join(dir, e.Name())); !strings.HasPrefix(link, "socket:") {
			continue
		}
		n, _ := strconv.Atoi(e.Name())
		fd, err := unix.PidfdGetfd(pidfd, n, 0)
		if err != nil {
			continue // closed meanwhile
		}
		if sa, err := unix.Getpeername(fd); err == nil {
			if in4, ok := sa.(*unix.SockaddrInet4); ok && net.JoinHostPort(net.IP(in4.Addr[:]).String(), strconv.Itoa(in4.Port)) == peer {
				v, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
				out = append(out, v)
			}
		}
		unix.Close(fd)
	}
	return out
}

// TestProxyBindAndSocketKeepalive: proxy_bind sets the source address of upstream
// connections (fixed, with a port, from a variable, empty or invalid: none, with
// transparent, off in a nested location; an address of the wrong family is 500);
// proxy_socket_keepalive sets SO_KEEPALIVE on them, as nginx does.
func TestProxyBindAndSocketKeepalive(t *testing.T) {
	t.Parallel()
	// Each its own source port: the first one's closed connection stays in
	// TIME_WAIT on it, and a bind to it fails for a while (nginx does not set
	// SO_REUSEADDR for TCP either).
	var srcPorts []int
	slowKA := func(r recReq) string {
		if strings.Contains(r.Line, "/ka/") {
			time.Sleep(200 * time.Millisecond) // the two requests overlap: two connections
		}
		return okAnswer(r)
	}
	targets, ups := startBoth(t, func() *recUpstream { return newRecUpstream(t, "tcp", slowKA) },
		func(listen string, up *recUpstream) string {
			srcPort := freePort(t)
			srcPorts = append(srcPorts, srcPort)
			return `
  upstream ka { server ` + up.Addr + `; keepalive 4; }
  server {
    listen ` + listen + `;
    location /fixed { proxy_pass http://` + up.Addr + `; proxy_bind 127.0.0.2; }
    location /port { proxy_pass http://` + up.Addr + `; proxy_bind 127.0.0.2:` + strconv.Itoa(srcPort) + `; }
    location /var { proxy_pass http://` + up.Addr + `; proxy_bind $http_x_src; }
    location /transparent { proxy_pass http://` + up.Addr + `; proxy_bind 127.0.0.4 transparent; }
    location /v6 { proxy_pass http://` + up.Addr + `; proxy_bind ::1; }
    location /outer/ {
      proxy_bind 127.0.0.5;
      location /outer/in { proxy_pass http://` + up.Addr + `; }
      location /outer/off { proxy_pass http://` + up.Addr + `; proxy_bind off; }
    }
    location /ka/on { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_socket_keepalive on; }
    location /ka/off { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }`
		})
	reqs := []struct{ path, src string }{
		{"/fixed", ""}, {"/port", ""}, {"/var", "127.0.0.3"}, {"/var", ""}, {"/var", "nope"},
		{"/transparent", ""}, {"/v6", ""}, {"/outer/in", ""}, {"/outer/off", ""},
	}
	var obs [2][]string
	for i, tg := range targets {
		c := keepAliveClient(nil)
		for _, rq := range reqs {
			n := len(ups[i].requests())
			resp, _ := get(t, c, "http://"+tg.addr+rq.path, "X-Src", rq.src)
			seen := ""
			if got := ups[i].requests(); len(got) > n {
				host, port, _ := net.SplitHostPort(got[n].Remote)
				if port == strconv.Itoa(srcPorts[i]) {
					host += ":SRCPORT"
				}
				seen = host
			}
			obs[i] = append(obs[i], fmt.Sprintf("%s X-Src=%q: %d from %s", rq.path, rq.src, resp.StatusCode, seen))
		}
		pid := 0
		if tg.ng != nil {
			pid = tg.ng.worker(t)
		} else {
			pid = tg.in.cmd.Process.Pid
		}
		get(t, c, "http://"+tg.addr+"/fixed") // a closed connection: not counted below
		// Two requests at once: two kept connections, one with SO_KEEPALIVE.
		var wg sync.WaitGroup
		for _, p := range []string{"/ka/on", "/ka/off"} {
			wg.Add(1)
			go func() { defer wg.Done(); get(t, keepAliveClient(nil), "http://"+tg.addr+p) }()
		}
		wg.Wait()
		keep := upstreamSocketKeepalive(t, pid, ups[i].Addr)
		slices.Sort(keep)
		obs[i] = append(obs[i], fmt.Sprintf("SO_KEEPALIVE of the kept connections: %v", keep))
	}
	sameObservations(t, "proxy_bind and proxy_socket_keepalive", obs[0], obs[1])
	want := []string{
		`/fixed X-Src="": 200 from 127.0.0.2`, `/port X-Src="": 200 from 127.0.0.2:SRCPORT`,
		`/var X-Src="127.0.0.3": 200 from 127.0.0.3`, `/var X-Src="": 200 from 127.0.0.1`, `/var X-Src="nope": 200 from 127.0.0.1`,
		`/transparent X-Src="": 200 from 127.0.0.4`, `/v6 X-Src="": 500 from `,
		`/outer/in X-Src="": 200 from 127.0.0.5`, `/outer/off X-Src="": 200 from 127.0.0.1`,
		`SO_KEEPALIVE of the kept connections: [0 1]`,
	}
	if !slices.Equal(obs[0], want) {
		t.Errorf("numaproxy:\n%s\nwant\n%s", strings.Join(obs[0], "\n"), strings.Join(want, "\n"))
	}
	targets[0].in.waitLog(`invalid local address "nope"`)
	targets[0].in.waitLog(`bind(::1) failed`)
}

// abortUpstream is a keep-alive upstream that answers each request 300 ms late,
// recording whether the proxy closed the connection before that.
type abortUpstream struct {
	*rawUpstream
	mu     sync.Mutex
	events []string // per request: "conn N answered" or "conn N closed early"
}

func newAbortUpstream(t *testing.T) *abortUpstream {
	u := &abortUpstream{}
	var serial atomic.Int64
	u.rawUpstream = newRawUpstream(t, func(c net.Conn) {
		n := serial.Add(1)
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err := br.ReadByte()
			event := fmt.Sprintf("conn %d answered", n)
			if !isTimeout(err) {
				event = fmt.Sprintf("conn %d closed early", n)
			}
			u.mu.Lock()
			u.events = append(u.events, event)
			u.mu.Unlock()
			if !isTimeout(err) {
				return
			}
			c.SetDeadline(time.Now().Add(30 * time.Second))
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")
		}
	})
	return u
}

func (u *abortUpstream) log() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.events)
}

// TestProxyIgnoreClientAbort: a client that closes its connection while its request
// waits for the upstream ends the upstream exchange (the upstream sees its connection
// closed) unless proxy_ignore_client_abort is on: then the response is read whole and
// the upstream connection kept alive for the next request, as nginx does.
func TestProxyIgnoreClientAbort(t *testing.T) {
	t.Parallel()
	targets, ups := startBoth(t, func() *abortUpstream { return newAbortUpstream(t) },
		func(listen string, up *abortUpstream) string {
			return `
  upstream ka { server ` + up.Addr + `; keepalive 4; }
  server {
    listen ` + listen + `;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location /on { proxy_pass http://ka; proxy_ignore_client_abort on; }
    location /off { proxy_pass http://ka; }
  }`
		})
	var obs [2][]string
	for i, tg := range targets {
		up := ups[i]
		for _, loc := range []string{"/on", "/off"} {
			n := len(up.log())
			c := dial(t, tg.addr)
			io.WriteString(c, "GET "+loc+" HTTP/1.1\r\nHost: h\r\n\r\n")
			time.Sleep(50 * time.Millisecond)
			c.Close()
			waitFor(t, "the upstream's verdict", 5*time.Second, func() bool { return len(up.log()) > n })
			time.Sleep(100 * time.Millisecond) // the response on its way to be cached, or not
			if resp, body := get(t, keepAliveClient(nil), "http://"+tg.addr+loc); resp.StatusCode != 200 || body != "done" {
				t.Fatalf("%s %s after an abort: %d %q", tg.name, loc, resp.StatusCode, body)
			}
			obs[i] = append(obs[i], loc+": "+strings.Join(up.log()[n:], ", "))
		}
	}
	sameObservations(t, "proxy_ignore_client_abort", obs[0], obs[1])
	want := []string{"/on: conn 1 answered, conn 1 answered", "/off: conn 1 closed early, conn 2 answered"}
	if !slices.Equal(obs[0], want) {
		t.Errorf("numaproxy: %q, want %q", obs[0], want)
	}

	// An exchange that outlived its client and then fails (the upstream closes
	// without an answer, or sends a body that ends early) releases the request
	// state cleanly (checkNoPanic), and the instance serves on.
	var closed atomic.Int64
	bad := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		head, err := readHead(br)
		if err != nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
		if strings.Contains(head, "/short") {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 50000))
		}
		closed.Add(1)
	})
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    proxy_ignore_client_abort on;
    location / { proxy_pass http://`+bad.Addr+`; }
  }`, addr)
	for _, p := range []string{"/close", "/short"} {
		c := dial(t, addr)
		io.WriteString(c, "GET "+p+" HTTP/1.1\r\nHost: h\r\n\r\n")
		time.Sleep(50 * time.Millisecond)
		c.Close()
	}
	waitFor(t, "the upstream to close twice", 5*time.Second, func() bool { return closed.Load() == 2 })
	time.Sleep(100 * time.Millisecond)
	if resp, _ := get(t, keepAliveClient(nil), "http://"+addr+"/close"); resp.StatusCode != 502 {
		t.Errorf("after the orphaned failures: %d", resp.StatusCode)
	}
}

// TestProxyXAccelBuffering: an upstream's X-Accel-Buffering: no turns proxy_buffering
// off for its response and "yes" on, unless proxy_ignore_headers names the field; it
// is hidden from the client. (numaproxy only: nginx buffers into temporary files, so
// how much it takes ahead of a client is not comparable; TestProxyBuffering measures
// the same way.)
func TestProxyXAccelBuffering(t *testing.T) {
	t.Parallel()
	const total = 16 << 20
	var written, proxyPort sync.Map // path -> *atomic.Int64
	counter := func(m *sync.Map, path string) *atomic.Int64 {
		v, _ := m.LoadOrStore(path, new(atomic.Int64))
		return v.(*atomic.Int64)
	}
	up := newRawUpstream(t, func(c net.Conn) {
		c.(*net.TCPConn).SetWriteBuffer(16 << 10)
		head, err := readHead(bufio.NewReader(c))
		if err != nil {
			return
		}
		path := strings.Fields(head)[1]
		counter(&proxyPort, path).Store(int64(c.RemoteAddr().(*net.TCPAddr).Port))
		xab := map[string]string{"/on/no": "no", "/off/yes": "YES", "/ign/no": "no"}[path]
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Accel-Buffering: "+xab+"\r\nContent-Length: "+strconv.Itoa(total)+"\r\n\r\n")
		chunk := make([]byte, 1<<10)
		for sent := 0; sent < total; sent += len(chunk) {
			n, err := c.Write(chunk)
			counter(&written, path).Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    proxy_max_temp_file_size 0; # read-ahead in memory only: what is held shows
    location /on/ { proxy_pass http://`+up.Addr+`; }
    location /off/ { proxy_pass http://`+up.Addr+`; proxy_buffering off; }
    location /ign/ { proxy_pass http://`+up.Addr+`; proxy_ignore_headers X-Accel-Buffering; }
  }`, addr)
	port := func(a string) int { p, _ := strconv.Atoi(a[strings.LastIndexByte(a, ':')+1:]); return p }
	// held is what the proxy read from the upstream and holds in its own queue once
	// the upstream stalls against a client that reads only the head.
	held := func(path string) int64 {
		c := dial(t, addr)
		defer c.Close()
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
		prev, stable := int64(-1), 0
		for deadline := time.Now().Add(10 * time.Second); stable < 10; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the upstream never stalled", path)
			}
			if n := counter(&written, path).Load(); n == prev && n > 0 {
				stable++
			} else {
				prev, stable = n, 0
			}
		}
		pp, cp := int(counter(&proxyPort, path).Load()), port(c.LocalAddr().String())
		kernel := tcpQueue(t, port(up.Addr), pp, true) + tcpQueue(t, pp, port(up.Addr), false) +
			tcpQueue(t, port(addr), cp, true) + tcpQueue(t, cp, port(addr), false)
		br := bufio.NewReader(c)
		head, err := readHead(br)
		if err != nil || strings.Contains(strings.ToLower(head), "x-accel-buffering") {
			t.Fatalf("%s: head %q %v", path, head, err)
		}
		if n, err := io.CopyN(io.Discard, br, total); err != nil {
			t.Fatalf("%s: got %d of %d: %v", path, n, total, err)
		}
		return prev - kernel
	}
	for _, tc := range []struct {
		path     string
		buffered bool
	}{{"/on/no", false}, {"/off/yes", true}, {"/ign/no", true}} {
		h := held(tc.path)
		t.Logf("%s: the proxy held %d KiB", tc.path, h>>10)
		// As TestProxyBuffering: buffered, between the watermarks (256 and 64 KiB);
		// unbuffered, at most one read (64 KiB).
		if tc.buffered && (h < 128<<10 || h > 330<<10) || !tc.buffered && h > 65<<10 {
			t.Errorf("%s: the proxy held %d bytes; buffered %v", tc.path, h, tc.buffered)
		}
	}
}

// fieldsAnswer answers with the fields its query asks for (h=Name:value, repeated)
// and status=NNN; a path under /a/loop always redirects to itself.
func fieldsAnswer(r recReq) string {
	target := strings.Fields(r.Line)[1]
	u, _ := url.Parse(target)
	status := "200"
	var hdr strings.Builder
	for _, h := range u.Query()["h"] {
		name, value, _ := strings.Cut(h, ":")
		hdr.WriteString(name + ": " + value + "\r\n")
	}
	if s := u.Query().Get("status"); s != "" {
		status = s
	}
	if strings.HasPrefix(u.Path, "/a/loop") {
		hdr.WriteString("X-Accel-Redirect: /a/loop\r\n")
	}
	body := "upstream: " + r.Line
	return "HTTP/1.1 " + status + " X\r\n" + hdr.String() + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestProxyXAccelRedirect: an upstream's X-Accel-Redirect is an internal redirect
// to its URI (arguments included, decoded once, ".." refused with 404) or @named
// location, as GET (HEAD stays), carrying Content-Type, Set-Cookie (rewritten),
// Content-Disposition, Cache-Control, Expires and Accept-Ranges over to the new
// response; proxy_ignore_headers X-Accel-Redirect passes the response instead; the
// fields nginx acts on only with a cache, limit_rate or charset change nothing; an
// error_page target keeps its own arguments; a redirection cycle ends in 500.
func TestProxyXAccelRedirect(t *testing.T) {
	t.Parallel()
	targets, ups := startBoth(t, func() *recUpstream { return newRecUpstream(t, "tcp", fieldsAnswer) },
		func(listen string, up *recUpstream) string {
			return `
  server {
    listen ` + listen + `;
    location /a/ { proxy_pass http://` + up.Addr + `; proxy_cookie_path /up/ /front/; }
    location /ign/ {
      proxy_pass http://` + up.Addr + `;
      proxy_ignore_headers X-Accel-Redirect X-Accel-Expires Expires Cache-Control Set-Cookie Vary X-Accel-Limit-Rate X-Accel-Charset;
    }
    location /target/ { proxy_pass http://` + up.Addr + `; }
    location /ret/ { return 200 "returned $uri $args $request_method"; }
    location @named { return 200 "named $uri $args $request_method"; }
    location /ie/ { proxy_pass http://` + up.Addr + `; proxy_intercept_errors on; error_page 404 /ret/from-error-page?e=1; }
  }`
		})
	q := func(path string, kv ...string) string {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return path + "?" + v.Encode()
	}
	carry := []string{"h", "Content-Type:text/foo", "h", "Set-Cookie:a=1; path=/up/x", "h", "Set-Cookie:b=2",
		"h", "Cache-Control:no-cache", "h", "X-Other:1", "h", "Content-Disposition:attachment",
		"h", "Expires:Thu, 01 Jan 1970 00:00:01 GMT", "h", "Accept-Ranges:bytes", "h", "Vary:Accept"}
	reqs := []struct{ method, path string }{
		{"GET", q("/a/1", append([]string{"h", "X-Accel-Redirect:/target/t?q=1"}, carry...)...)},
		{"GET", q("/a/2", append([]string{"h", "X-Accel-Redirect:/ret/r?z=2"}, carry...)...)},
		{"GET", q("/a/3", "h", "X-Accel-Redirect:@named", "status", "404")},
		{"POST", q("/a/4", "h", "X-Accel-Redirect:/target/p")},
		{"GET", q("/a/5", "h", "X-Accel-Redirect:/../etc")},
		{"GET", q("/a/6", "h", "X-Accel-Redirect:/ret/%41b%2F..x")},
		{"GET", q("/a/7", "h", "X-Accel-Redirect:/ret/a/%2e%2e/b")},
		{"GET", q("/ign/8", append([]string{"h", "X-Accel-Redirect:/ret/x", "h", "X-Accel-Charset:koi8-r", "h", "X-Accel-Expires:10",
			"h", "X-Accel-Limit-Rate:1"}, carry...)...)},
		// (Not X-Accel-Limit-Rate, which nginx acts on and numaproxy does not.)
		{"GET", q("/a/9", "h", "X-Accel-Charset:koi8-r", "h", "Content-Type:text/html", "h", "X-Accel-Expires:5")},
		{"HEAD", q("/a/10", "h", "X-Accel-Redirect:/target/h")},
		{"GET", "/ie/s?status=404"},
		{"GET", "/a/loop"},
	}
	var obs [2][]string
	for i, tg := range targets {
		for _, rq := range reqs {
			n := len(ups[i].requests())
			body := ""
			if rq.method == "POST" {
				body = "Content-Length: 4\r\n\r\nbody"
			} else {
				body = "\r\n"
			}
			resp, got := rawExchange(t, tg.addr, rq.method, rq.method+" "+rq.path+" HTTP/1.1\r\nHost: h\r\n"+body)
			var lines []string
			for _, r := range ups[i].requests()[n:] {
				lines = append(lines, r.Line)
			}
			h := resp.Header
			obs[i] = append(obs[i], fmt.Sprintf("%s %s: %d %q type=%q cookies=%q cc=%q other=%q cd=%q exp=%q ar=%q vary=%q xa=%q | upstream %q",
				rq.method, rq.path, resp.StatusCode, norm(got), h.Get("Content-Type"), h.Values("Set-Cookie"), h.Get("Cache-Control"),
				h.Get("X-Other"), h.Get("Content-Disposition"), h.Get("Expires"), h.Get("Accept-Ranges"), h.Get("Vary"),
				h.Get("X-Accel-Redirect"), lines))
		}
	}
	sameObservations(t, "X-Accel-Redirect", obs[0], obs[1])
	for _, want := range []string{
		`GET /a/2?`, `200 "returned /ret/r z=2 GET" type="text/foo" cookies=["a=1; path=/front/x" "b=2"] cc="no-cache" other="" cd="attachment"`,
		`POST /a/4?`, `200 "upstream: GET /target/p HTTP/1.0"`,
		`GET /ie/s?status=404: 404 "returned /ret/from-error-page e=1 GET"`,
		`GET /a/loop: 500 `,
	} {
		found := false
		for _, o := range obs[0] {
			found = found || strings.Contains(o, want)
		}
		if !found {
			t.Errorf("numaproxy: nothing has %s", want)
		}
	}
}
