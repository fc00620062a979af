package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Side-by-side tests of core directives against Debian's nginx on the same
// configuration: merge_slashes, chunked_transfer_encoding, keepalive_disable,
// reset_timedout_connection and return 444.

// pairWithNginx starts numaproxy and nginx on conf(addr) and returns their addresses.
func pairWithNginx(t *testing.T, conf func(addr string) string) (np, ng string) {
	t.Helper()
	np, ng = addrFor(t), addrFor(t)
	startHTTP(t, conf(np), np)
	startNginx(t, conf(ng), ng)
	return np, ng
}

// TestMergeSlashes: runs of slashes are merged for location matching and $uri unless
// merge_slashes is off, which follows the address's default server (nginx normalises
// the path before Host names the server).
func TestMergeSlashes(t *testing.T) {
	np, ng := pairWithNginx(t, func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location /a/b { return 200 "loc=ab uri=$uri\n"; }
    location / { return 200 "loc=root uri=$uri\n"; }
  }
  server {
    listen ` + addr + `;
    server_name keep;
    merge_slashes off;
    location /a/b { return 200 "keep loc=ab uri=$uri\n"; }
    location / { return 200 "keep loc=root uri=$uri\n"; }
  }`
	})
	unmerged, umNg := pairWithNginx(t, func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    merge_slashes off;
    location /a/b { return 200 "loc=ab uri=$uri\n"; }
    location / { return 200 "loc=root uri=$uri\n"; }
  }`
	})
	for _, c := range []struct{ host, path string }{
		{"h", "//a///b"}, {"keep", "//a///b"}, {"h", "/a//../b"}, {"h", "/a/b//c"},
	} {
		for _, pair := range [][2]string{{np, ng}, {unmerged, umNg}} {
			req := "GET " + c.path + " HTTP/1.1\r\nHost: " + c.host + "\r\nConnection: close\r\n\r\n"
			got := bodyAfterHead(t, pair[0], req)
			want := bodyAfterHead(t, pair[1], req)
			if got != want {
				t.Errorf("%s %s: numaproxy %q, nginx %q", c.host, c.path, got, want)
			}
		}
	}
	// And that the setting is seen at all (the comparison above would pass if both
	// ignored it).
	if got := bodyAfterHead(t, unmerged, "GET //a///b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"); got != "loc=root uri=//a///b\n" {
		t.Errorf("merge_slashes off: %q", got)
	}
}

func bodyAfterHead(t *testing.T, addr, req string) string {
	t.Helper()
	raw, err := roundTripRaw(t, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(raw, "\r\n\r\n")
	return body
}

// TestChunkedTransferEncodingOff: a response of unknown length to an HTTP/1.1 client
// goes out close-delimited, with Connection: close, as nginx does.
func TestChunkedTransferEncodingOff(t *testing.T) {
	up := rawReply(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false)
	np, ng := pairWithNginx(t, func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location / { proxy_pass http://` + up.Addr + `; proxy_http_version 1.1; chunked_transfer_encoding off; }
  }`
	})
	for _, a := range []string{np, ng} {
		raw, err := roundTripRaw(t, a, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		head, body, _ := strings.Cut(raw, "\r\n\r\n")
		if strings.Contains(head, "Transfer-Encoding") || !strings.Contains(head, "Connection: close") || body != "hello" {
			t.Errorf("%s answered %q", a, raw)
		}
	}
}

// TestKeepaliveDisable: the default (msie6) ends keep-alive after a POST from MSIE
// 6 without SV1 but not after a GET; safari ends it for Safari on macOS, not for
// Chrome, which says "Safari/" too.
func TestKeepaliveDisable(t *testing.T) {
	np, ng := pairWithNginx(t, func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location / { return 200 "ok\n"; }
    location /safari { keepalive_disable safari; return 200 "ok\n"; }
    location /none { keepalive_disable none; return 200 "ok\n"; }
  }`
	})
	const (
		msie6  = "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"
		msie6s = "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"
		safari = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15"
		chrome = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
	)
	cases := []struct {
		method, path, ua string
		closes           bool
	}{
		{"POST", "/", msie6, true},
		{"GET", "/", msie6, false},
		{"POST", "/", msie6s, false},
		{"POST", "/none", msie6, false},
		{"GET", "/safari", safari, true},
		{"GET", "/safari", chrome, false},
		{"GET", "/", safari, false},
	}
	for _, c := range cases {
		req := c.method + " " + c.path + " HTTP/1.1\r\nHost: h\r\nUser-Agent: " + c.ua + "\r\nContent-Length: 0\r\n\r\n"
		for _, a := range []string{np, ng} {
			head := firstHead(t, a, req)
			if closes := strings.Contains(head, "Connection: close"); closes != c.closes {
				t.Errorf("%s %s %q on %s: head %q", c.method, c.path, c.ua, a, head)
			}
		}
	}
}

// firstHead sends req on a new connection and returns the response head.
func firstHead(t *testing.T, addr, req string) string {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	head, err := readHead(bufio.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	return head
}

// TestResetTimedoutConnection: with reset_timedout_connection on, a request head that
// stops coming and a return 444 end with an RST (the client's read fails with
// ECONNRESET); off, with a FIN. nginx is run alongside on the same cases.
func TestResetTimedoutConnection(t *testing.T) {
	conf := func(reset string) func(addr string) string {
		return func(addr string) string {
			return `
  client_header_timeout 1s;
  reset_timedout_connection ` + reset + `;
  server {
    listen ` + addr + `;
    location / { return 200 "ok\n"; }
    location /close { return 444; }
  }`
		}
	}
	onNp, onNg := pairWithNginx(t, conf("on"))
	offNp, offNg := pairWithNginx(t, conf("off"))
	for _, c := range []struct {
		name, req string
	}{
		{"partial head", "GET / HTTP/1.1\r\nHost: h\r\n"},
		{"return 444", "GET /close HTTP/1.1\r\nHost: h\r\n\r\n"},
	} {
		for _, a := range []string{onNp, onNg} {
			if err := endOfConn(t, a, c.req); !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("%s with reset on, %s: read ended with %v, want a reset", c.name, a, err)
			}
		}
		for _, a := range []string{offNp, offNg} {
			if err := endOfConn(t, a, c.req); err != io.EOF {
				t.Errorf("%s with reset off, %s: read ended with %v, want EOF", c.name, a, err)
			}
		}
	}
}

// endOfConn sends req and reads until the connection ends; it returns how (io.EOF
// for a FIN, an error wrapping ECONNRESET for an RST). Any response bytes are an
// error: these cases get none.
func endOfConn(t *testing.T, addr, req string) error {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if n > 0 {
		t.Errorf("%s answered %q", addr, buf[:n])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection stayed open", addr)
	}
	return err
}

// TestLimitRate: limit_rate paces a response after one second's worth in advance
// (and after limit_rate_after bytes), with a constant, with variables, and from an
// upstream's X-Accel-Limit-Rate unless proxy_ignore_headers names it; nginx takes
// as long on the same cases (run side by side, at the same time).
func TestLimitRate(t *testing.T) {
	const size = 256 << 10
	body := strings.Repeat("x", size)
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if rate := r.URL.Query().Get("accel"); rate != "" {
			w.Header().Set("X-Accel-Limit-Rate", rate)
		}
		io.WriteString(w, body)
	})
	np, ng := pairWithNginx(t, func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location /rate { limit_rate 64k; proxy_pass http://` + up.Addr + `; }
    location /after { limit_rate 64k; limit_rate_after 128k; proxy_pass http://` + up.Addr + `; }
    location /var { limit_rate $arg_r; proxy_pass http://` + up.Addr + `; }
    location /accel { proxy_pass http://` + up.Addr + `; }
    location /ignored { proxy_ignore_headers X-Accel-Limit-Rate; proxy_pass http://` + up.Addr + `; }
    location /var_show { limit_rate 32k; return 200 "$limit_rate"; }
  }`
	})
	cases := []struct {
		path string
		want time.Duration // (size - after - rate) / rate
	}{
		{"/rate", 3 * time.Second},
		{"/after", time.Second},
		{"/var?r=128k", time.Second},
		{"/accel?accel=65536", 3 * time.Second},
		{"/ignored?accel=65536", 0},
	}
	type result struct {
		took time.Duration
		err  error
	}
	results := make([][2]chan result, len(cases))
	for i, c := range cases {
		for j, a := range []string{np, ng} {
			ch := make(chan result, 1)
			results[i][j] = ch
			go func() {
				began := time.Now()
				resp, err := http.Get("http://" + a + c.path)
				if err == nil {
					var n int64
					n, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && n != size {
						err = fmt.Errorf("%d bytes", n)
					}
				}
				ch <- result{time.Since(began), err}
			}()
		}
	}
	for i, c := range cases {
		got, ngx := <-results[i][0], <-results[i][1]
		if got.err != nil || ngx.err != nil {
			t.Fatalf("%s: numaproxy %v, nginx %v", c.path, got.err, ngx.err)
		}
		lo, hi := c.want-c.want/4-100*time.Millisecond, c.want+c.want/2+700*time.Millisecond
		if got.took < lo || got.took > hi {
			t.Errorf("%s took %v on numaproxy (nginx %v), want about %v", c.path, got.took, ngx.took, c.want)
		}
		if ngx.took < lo-time.Second || ngx.took > hi+time.Second {
			t.Logf("%s: nginx took %v", c.path, ngx.took)
		}
	}
	if got := bodyAfterHead(t, np, "GET /var_show HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"); got != "32768" {
		t.Errorf("$limit_rate = %q", got)
	}
}

// TestProxyRequestBuffering: with proxy_request_buffering on (the default) the
// upstream is not contacted until the whole body is in, gets it with its length
// (a chunked upload too, and one larger than client_body_buffer_size, which went
// through a temporary file), and a retry on the next server resends it; off, the
// body streams and a chunked upload stays chunked. nginx is run alongside.
func TestProxyRequestBuffering(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "len=%d te=%v", r.ContentLength, r.TransferEncoding)
	})
	dead := addrFor(t) // nothing listens: connection refused, the next server is tried
	conf := func(addr string) string {
		return `
  upstream pair { server ` + dead + `; server ` + be.Addr + `; }
  client_body_buffer_size 8k;
  client_max_body_size 10m;
  server {
    listen ` + addr + `;
    location / { proxy_pass http://pair; proxy_http_version 1.1; }
    location /stream { proxy_pass http://` + be.Addr + `; proxy_http_version 1.1; proxy_request_buffering off; }
  }`
	}
	np, ng := pairWithNginx(t, conf)
	big := strings.Repeat("0123456789abcdef", 4096) // 64 KiB: beyond the buffer
	chunked := func(body string) string {
		return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	}
	for _, c := range []struct {
		name, req, want string
	}{
		{"length", "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello", "len=5 te=[]"},
		{"chunked", "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked("hello"), "len=5 te=[]"},
		{"large chunked", "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked(big), "len=65536 te=[]"},
	} {
		for _, a := range []string{np, ng} {
			be.reset()
			if got := bodyAfterHead(t, a, c.req); got != c.want {
				t.Errorf("%s on %s: %q, want %q", c.name, a, got, c.want)
			}
			if c.name == "large chunked" {
				if s := be.last(t); s.Body != big {
					t.Errorf("%s on %s: the upstream got %d bytes", c.name, a, len(s.Body))
				}
			}
		}
	}
	// Off: a chunked body that comes after the head streams, chunked. (nginx sends
	// one that came whole with the head with its length.)
	for _, a := range []string{np, ng} {
		cl := newClient(t, a)
		cl.send("PUT /stream HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
		time.Sleep(100 * time.Millisecond)
		cl.send(chunked("hello"))
		if resp, body := cl.read("PUT"); resp.StatusCode != 200 || body != "len=-1 te=[chunked]" {
			t.Errorf("streamed on %s: %d %q", a, resp.StatusCode, body)
		}
	}
	// On, half a body: no upstream request yet; the rest: one, whole.
	for _, a := range []string{np, ng} {
		be.reset()
		cl := newClient(t, a)
		cl.send("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n01234")
		time.Sleep(300 * time.Millisecond)
		if n := be.count(); n != 0 {
			t.Errorf("%s: %d upstream requests before the body was in", a, n)
		}
		cl.send("56789")
		if resp, body := cl.read("PUT"); resp.StatusCode != 200 || body != "len=10 te=[]" {
			t.Errorf("%s: %d %q", a, resp.StatusCode, body)
		}
	}
}

// TestMiscVariables: $request_id (32 hex digits, new for each request, the same
// within one), $pid, $nginx_version, $tcpinfo_rtt and $upstream_cookie_NAME, beside
// nginx's on the same configuration where the values can match.
func TestMiscVariables(t *testing.T) {
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "other=1; Path=/")
		w.Header().Add("Set-Cookie", "Session = abc123 ; HttpOnly")
		io.WriteString(w, "ok")
	})
	conf := func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location /id { add_header X-Id $request_id; add_header X-Id2 $request_id; return 200 "$request_id"; }
    location /info { return 200 "$nginx_version|$tcpinfo_rtt|$pid"; }
    location /cookie { add_header X-Cookie "[$upstream_cookie_session][$upstream_cookie_other][$upstream_cookie_none]"; proxy_pass http://` + up.Addr + `; }
  }`
	}
	np, ng := pairWithNginx(t, conf)
	seen := map[string]bool{}
	for range 3 {
		raw, err := roundTripRaw(t, np, "GET /id HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		resp := parseResponses(t, raw, "GET")[0]
		id := resp.Header.Get("X-Id")
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" || resp.Header.Get("X-Id2") != id || seen[id] {
			t.Errorf("$request_id %q (second use %q), seen before %v", id, resp.Header.Get("X-Id2"), seen[id])
		}
		seen[id] = true
	}
	ours := strings.Split(bodyAfterHead(t, np, "GET /info HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"), "|")
	theirs := strings.Split(bodyAfterHead(t, ng, "GET /info HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"), "|")
	if len(ours) != 3 || ours[0] != theirs[0] || ours[1] == "" || ours[2] == "" || strings.Trim(ours[1]+ours[2], "0123456789") != "" {
		t.Errorf("numaproxy %q, nginx %q", ours, theirs)
	}
	for _, a := range []string{np, ng} {
		raw, err := roundTripRaw(t, a, "GET /cookie HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		if got := parseResponses(t, raw, "GET")[0].Header.Get("X-Cookie"); got != "[abc123 ][1][]" { // nginx keeps the space before ";"
			t.Errorf("%s: $upstream_cookie_: %q", a, got)
		}
	}
}

// TestProxyRedirectVariablesAndRegex: proxy_redirect with variables in the redirect
// and the replacement, and with a regex whose captures build the replacement, on
// Location and Refresh, beside nginx on the same configuration.
func TestProxyRedirectVariablesAndRegex(t *testing.T) {
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("loc"))
		if ref := r.URL.Query().Get("refresh"); ref != "" {
			w.Header().Set("Refresh", ref)
		}
		w.WriteHeader(302)
	})
	conf := func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location /vars/ {
      proxy_pass http://` + up.Addr + `;
      proxy_redirect http://$host:8000/ http://$host:$server_port/front/;
    }
    location /re/ {
      proxy_pass http://` + up.Addr + `;
      proxy_redirect ~^http://([^:/]+):\d+(/.*)$ https://$1$2;
      proxy_redirect ~*^HTTP://CASE/(.*)$ /case/$1;
    }
  }`
	}
	np, ng := pairWithNginx(t, conf)
	for _, q := range []string{
		"loc=http://h:8000/a/b",
		"loc=http://other:8000/a",
		"loc=http://app:9000/x/y?z=1",
		"loc=http://case/p",
		"loc=http://h:8000/a&refresh=5%3B%20url=http://h:8000/r",
		"loc=http://app:9000/x&refresh=3%3BURL=http://app:9000/q",
	} {
		for _, path := range []string{"/vars/", "/re/"} {
			req := "GET " + path + "?" + q + " HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
			var got [2][2]string
			for i, a := range []string{np, ng} {
				raw, err := roundTripRaw(t, a, req)
				if err != nil {
					t.Fatal(err)
				}
				resp := parseResponses(t, raw, "GET")[0]
				// Each server puts its own port in: compare without it.
				port := a[strings.LastIndexByte(a, ':'):]
				got[i] = [2]string{strings.ReplaceAll(resp.Header.Get("Location"), port, ":PORT"),
					strings.ReplaceAll(resp.Header.Get("Refresh"), port, ":PORT")}
			}
			if got[0] != got[1] {
				t.Errorf("%s?%s: numaproxy %q, nginx %q", path, q, got[0], got[1])
			}
			if strings.Contains(q, "refresh") && got[0][1] == "" {
				t.Errorf("%s?%s: no Refresh came through", path, q)
			}
			if q == "loc=http://app:9000/x/y?z=1" && path == "/re/" && got[0][0] != "https://app/x/y?z=1" {
				t.Errorf("regex with captures: %q", got[0][0])
			}
		}
	}
}
