package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProxyPassHeaders checks proxy_pass URI replacement, proxy_set_header (defaults,
// variables, removal, inheritance), hop-by-hop fields both ways, proxy_hide_header,
// proxy_pass_header, proxy_http_version and proxy_redirect.
func TestProxyPassHeaders(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Server", "upstream-server")
		h.Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
		h.Set("X-Secret", "s")
		h.Set("X-Accel-Buffering", "no")
		h.Set("X-Kept", "k")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Upgrade", "h2c")
		h.Set("Proxy-Connection", "keep-alive")
		if loc := r.URL.Query().Get("loc"); loc != "" {
			h.Set("Location", loc)
			h.Set("Refresh", "3; url="+loc)
			w.WriteHeader(302)
			return
		}
		io.WriteString(w, r.RequestURI)
	})
	hop := newRawUpstream(t, func(c net.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Listed, close\r\nX-Listed: l\r\nX-Other: o\r\nKeep-Alive: timeout=3\r\nContent-Length: 2\r\n\r\nok")
	})
	addr := addrFor(t)
	startHTTP(t, `
  upstream be { server `+be.Addr+`; }
  proxy_set_header X-Top top;
  server {
    listen `+addr+`;
    location /a/ { proxy_pass http://be/x/; }
    location /b/ { proxy_pass http://be; }
    location = /exact { proxy_pass http://be/target; }
    location /c { proxy_pass http://`+be.Addr+`/; }
    location ~ ^/re/ { proxy_pass http://be; }
    location /own/ {
      proxy_pass http://be;
      proxy_set_header X-Own "$request_method-$arg_a-$http_x_in";
      proxy_set_header User-Agent "";
      proxy_set_header Host $host;
    }
    location /v11/ {
      proxy_pass http://be;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_hide_header X-Secret;
      proxy_pass_header Server;
      proxy_pass_header Date;
    }
    location /rd/ { proxy_pass http://be/base/; }
    location /rn/ { proxy_pass http://be; }
    location /roff/ { proxy_pass http://be; proxy_redirect off; }
    location /rc/ { proxy_pass http://be; proxy_redirect http://other/ /o/; }
    location /hop/ { proxy_pass http://`+hop.Addr+`; }
  }`, addr)
	c := keepAliveClient(nil)
	url := "http://" + addr

	t.Run("proxy_pass URI", func(t *testing.T) {
		for _, tc := range []struct{ path, want string }{
			{"/a/b?q=1", "/x/b?q=1"},
			{"/a/./b//c", "/x/b/c"},
			{"/a/b%20c", "/x/b%20c"},
			{"/b/%7Ec/../d?q", "/b/%7Ec/../d?q"}, // without a URI part: as received
			{"/exact?z", "/target?z"},
			{"/c/d", "//d"},
			{"/re/x?y", "/re/x?y"},
		} {
			if resp, body := get(t, c, url+tc.path); resp.StatusCode != 200 || body != tc.want {
				t.Errorf("%s: %d %q, want %q", tc.path, resp.StatusCode, body, tc.want)
			}
		}
	})

	t.Run("request headers", func(t *testing.T) {
		get(t, c, url+"/b/1", "User-Agent", "ua", "X-In", "in", "Connection", "X-Drop", "X-Drop", "d",
			"Keep-Alive", "timeout=1", "TE", "trailers", "Upgrade", "websocket", "Proxy-Connection", "keep-alive")
		s := be.last(t)
		if s.Host != "be" || s.Header.Get("Connection") != "close" || s.Header.Get("X-Top") != "top" ||
			s.Header.Get("User-Agent") != "ua" || s.Proto != "HTTP/1.0" {
			t.Errorf("defaults: %+v", s)
		}
		for _, hop := range []string{"Keep-Alive", "Te", "Upgrade", "Proxy-Connection"} {
			if v := s.Header.Get(hop); v != "" {
				t.Errorf("hop-by-hop %s forwarded: %q", hop, v)
			}
		}
		// A field the client names in Connection is passed, as nginx does.
		if v := s.Header.Get("X-Drop"); v != "d" {
			t.Errorf("X-Drop, listed in Connection: %q", v)
		}
		get(t, c, url+"/own/2?a=1", "User-Agent", "ua", "X-In", "in", "Host", "Front.Example:8080")
		s = be.last(t)
		if s.Header.Get("X-Own") != "GET-1-in" || s.Header.Get("X-Top") != "" || len(s.Header.Values("User-Agent")) != 0 || s.Host != "front.example" {
			t.Errorf("own level: host %q %v", s.Host, s.Header)
		}
		get(t, c, url+"/c/1")
		if s = be.last(t); s.Host != be.Addr {
			t.Errorf("Host for a host:port proxy_pass: %q", s.Host)
		}
		get(t, c, url+"/v11/1")
		if s = be.last(t); s.Proto != "HTTP/1.1" || s.Header.Get("Connection") != "" {
			t.Errorf("1.1: %s Connection %q", s.Proto, s.Header.Get("Connection"))
		}
	})

	t.Run("response headers", func(t *testing.T) {
		resp, _ := get(t, c, url+"/b/1")
		h := resp.Header
		if h.Get("Server") != "numaproxy/0.1.0" || h.Get("Date") == "Mon, 02 Jan 2006 15:04:05 GMT" || h.Get("Date") == "" ||
			h.Get("X-Accel-Buffering") != "" || h.Get("X-Secret") != "s" || h.Get("X-Kept") != "k" {
			t.Errorf("defaults: %v", h)
		}
		for _, hop := range []string{"Keep-Alive", "Upgrade", "Proxy-Connection"} {
			if v := h.Get(hop); v != "" {
				t.Errorf("hop-by-hop %s passed to the client: %q", hop, v)
			}
		}
		// net/http drops a Connection field it is given: a raw upstream lists one.
		resp, body := get(t, c, url+"/hop/1")
		h = resp.Header
		if body != "ok" || h.Get("X-Listed") != "" || h.Get("X-Other") != "o" || h.Get("Keep-Alive") != "" || h.Get("Connection") != "keep-alive" {
			t.Errorf("Connection-listed field passed: %v", h)
		}
		resp, _ = get(t, c, url+"/v11/1")
		h = resp.Header
		if len(h.Values("Server")) != 1 || h.Get("Server") != "upstream-server" || h.Get("Date") != "Mon, 02 Jan 2006 15:04:05 GMT" || h.Get("X-Secret") != "" {
			t.Errorf("hide/pass: %v", h)
		}
	})

	t.Run("proxy_redirect", func(t *testing.T) {
		abs := "http://" + addr
		for _, tc := range []struct{ path, loc, want string }{
			{"/rd/1", "http://be/base/x?y", abs + "/rd/x?y"},
			{"/rd/1", "http://be/other", "http://be/other"},
			{"/rn/1", "http://be/foo", abs + "/foo"},
			{"/roff/1", "http://be/foo", "http://be/foo"},
			{"/rc/1", "http://other/p", abs + "/o/p"},
			{"/rn/1", "/rel", "/rel"},
		} {
			resp, _ := get(t, c, url+tc.path+"?loc="+tc.loc)
			if resp.StatusCode != 302 || resp.Header.Get("Location") != tc.want {
				t.Errorf("%s %s: %d Location %q, want %q", tc.path, tc.loc, resp.StatusCode, resp.Header.Get("Location"), tc.want)
			}
			if tc.path == "/rd/1" && tc.want != tc.loc && resp.Header.Get("Refresh") != "3; url=/rd/x?y" {
				t.Errorf("Refresh %q", resp.Header.Get("Refresh"))
			}
		}
	})
}

// TestProxyLocalResponses checks return (with variables), add_header [always],
// server_tokens, keepalive_timeout's header, keepalive_requests and error_page.
func TestProxyLocalResponses(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		if code == 0 {
			code = 200
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "%s %s", r.Method, r.RequestURI)
	})
	dead := addrFor(t)
	addr := addrFor(t)
	addr2 := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    keepalive_timeout 30s 25s;
    keepalive_requests 3;
    add_header X-Server s;
    location /ret/text { return 200 "$request_method $uri $arg_a"; }
    location /ret/rel { return 302 /else/$arg_a; }
    location /ret/abs { return 301 http://example.com$uri; }
    location /ret/url { return https://example.org/x; }
    location /ret/404 { return 404; }
    location /ret/204 { return 204; }
    location /ret/418 { return 418 "teapot"; }
    location /hdr/ {
      proxy_pass http://`+be.Addr+`;
      add_header X-A a;
      add_header X-B "$status $upstream_status" always;
    }
    location /hdr404 { add_header X-A a; add_header X-B b always; return 404; }
    location /inherit { return 200 "i"; }
    location /ep/uri { proxy_pass http://`+dead+`; error_page 502 /err; }
    location /ep/code { proxy_pass http://`+dead+`; error_page 502 =200 /err; }
    location /ep/own { proxy_pass http://`+dead+`; error_page 502 = /status201; }
    location /ep/named { proxy_pass http://`+dead+`; error_page 500 502 @fallback; }
    location /ep/url { proxy_pass http://`+dead+`; error_page 502 http://example.com/sorry; }
    location /ep/url301 { proxy_pass http://`+dead+`; error_page 502 =301 http://example.com/moved; }
    location /ep/upstream404 { proxy_pass http://`+be.Addr+`; error_page 404 /err; }
    location /ep/once { return 404; error_page 404 /missing; }
    location = /err { return 200 "error page for $uri"; }
    location = /status201 { return 201 "own status"; }
    location = /missing { return 404; }
    location @fallback { proxy_pass http://`+be.Addr+`; }
  }
  server {
    listen `+addr2+`;
    server_tokens off;
    keepalive_timeout 0;
    location / { return 404; }
  }`, addr, addr2)

	t.Run("return", func(t *testing.T) {
		abs := "http://" + addr
		for _, tc := range []struct {
			path   string
			status int
			body   string
			loc    string
		}{
			{"/ret/text?a=1", 200, "GET /ret/text 1", ""},
			{"/ret/rel?a=z", 302, "", abs + "/else/z"},
			{"/ret/abs", 301, "", "http://example.com/ret/abs"},
			{"/ret/url", 302, "", "https://example.org/x"},
			{"/ret/404", 404, "404 Not Found", ""},
			{"/ret/204", 204, "", ""},
			{"/ret/418", 418, "teapot", ""},
		} {
			cl := newClient(t, addr)
			cl.send("GET " + tc.path + " HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")
			resp, body := cl.read("GET")
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.body) || resp.Header.Get("Location") != tc.loc {
				t.Errorf("%s: %d %q Location %q", tc.path, resp.StatusCode, body, resp.Header.Get("Location"))
			}
			if tc.status == 200 && resp.Header.Get("Content-Type") != "text/plain" {
				t.Errorf("%s: Content-Type %q", tc.path, resp.Header.Get("Content-Type"))
			}
			if tc.status == 302 && !strings.Contains(body, "302 Found") && !strings.Contains(body, "302 Moved Temporarily") {
				t.Errorf("%s: page %q", tc.path, body)
			}
		}
	})

	t.Run("add_header", func(t *testing.T) {
		c := keepAliveClient(nil)
		url := "http://" + addr
		for _, tc := range []struct {
			path   string
			status int
			a, b   string
		}{
			{"/hdr/x", 200, "a", "200 200"},
			{"/hdr/x?code=201", 201, "a", "201 201"},
			{"/hdr/x?code=500", 500, "", "500 500"},
			{"/hdr/x?code=404", 404, "", "404 404"},
			{"/hdr404", 404, "", "b"},
		} {
			resp, _ := get(t, c, url+tc.path)
			if resp.StatusCode != tc.status || resp.Header.Get("X-A") != tc.a || resp.Header.Get("X-B") != tc.b || resp.Header.Get("X-Server") != "" {
				t.Errorf("%s: %d %v", tc.path, resp.StatusCode, resp.Header)
			}
		}
		if resp, _ := get(t, c, url+"/inherit"); resp.Header.Get("X-Server") != "s" {
			t.Errorf("inherited add_header: %v", resp.Header)
		}
	})

	t.Run("keepalive", func(t *testing.T) {
		cl := newClient(t, addr)
		for i := 1; i <= 3; i++ {
			cl.send("GET /inherit HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, _ := cl.read("GET")
			if i < 3 && (resp.Close || resp.Header.Get("Keep-Alive") != "timeout=25") {
				t.Fatalf("request %d: %v", i, resp.Header)
			}
			if i == 3 && !resp.Close {
				t.Fatalf("request 3 of keepalive_requests 3: %v", resp.Header)
			}
		}
		cl.wantEOF()
		// keepalive_timeout 0 and server_tokens off.
		resp := wantClosedResponse(t, addr2, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 404)
		if resp.Header.Get("Server") != "numaproxy" || strings.Contains(bodyOf(resp), "0.1") || !strings.Contains(bodyOf(resp), "<center>numaproxy</center>") {
			t.Errorf("server_tokens off: %v %q", resp.Header, bodyOf(resp))
		}
	})

	t.Run("error_page", func(t *testing.T) {
		c := keepAliveClient(nil)
		url := "http://" + addr
		for _, tc := range []struct {
			path   string
			status int
			body   string
			loc    string
		}{
			{"/ep/uri?x=1", 502, "error page for /err", ""},
			{"/ep/code", 200, "error page for /err", ""},
			{"/ep/own", 201, "own status", ""},
			{"/ep/named?q=2", 502, "GET /ep/named?q=2", ""},
			{"/ep/url", 302, "", "http://example.com/sorry"},
			{"/ep/url301", 301, "", "http://example.com/moved"},
			{"/ep/upstream404?code=404", 404, "GET /ep/upstream404?code=404", ""}, // error_page is for the proxy's own errors
			{"/ep/once", 404, "404 Not Found", ""},
		} {
			resp, body := get(t, c, url+tc.path)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.body) || resp.Header.Get("Location") != tc.loc {
				t.Errorf("%s: %d %q Location %q", tc.path, resp.StatusCode, body, resp.Header.Get("Location"))
			}
		}
		// A POST redirected to an error page goes on as a GET without its body, which
		// was read (or is dropped): the connection carries the next request, as with
		// nginx.
		cl := newClient(t, addr)
		for range 2 {
			cl.send("POST /ep/uri HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")
			if resp, body := cl.read("POST"); resp.StatusCode != 502 || body != "error page for /err" || resp.Close {
				t.Errorf("POST: %d %q close=%v", resp.StatusCode, body, resp.Close)
			}
		}
	})
	_ = time.Second
}
