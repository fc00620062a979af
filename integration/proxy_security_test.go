package integration

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Regression tests of security findings, each compared with Debian's nginx on the
// same configuration where nginx is the reference.

// pathCase is a request target and what should come of it: the status, and for a
// proxied request the request-target the upstream received.
type pathCase struct {
	target   string
	status   int
	upstream string
}

// uriEcho is an upstream that answers with the request-target it received.
func uriEcho(t *testing.T) *backend {
	return newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up:"+r.RequestURI) })
}

// getTarget sends one GET of target (raw, as written) and returns the status and
// the upstream's request-target ("" when the answer did not come from the upstream).
func getTarget(t *testing.T, addr, target string, header ...string) (int, string) {
	t.Helper()
	req := "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + strings.Join(header, "") + "Connection: close\r\n\r\n"
	raw, err := roundTripRaw(t, addr, req)
	if err != nil {
		t.Fatalf("%s: %v (%q)", target, err, raw)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%s: %v (%q)", target, err, raw)
	}
	body, _ := io.ReadAll(resp.Body)
	up, _ := strings.CutPrefix(string(body), "up:")
	if !strings.HasPrefix(string(body), "up:") {
		up = ""
	}
	return resp.StatusCode, up
}

// TestEncodedSlashLocationGuard: an encoded slash or dot must not take a request
// past a location guard. nginx decodes the whole path before matching locations, so
// /%2Fadmin and /x/..%2Fadmin are /admin there; numaproxy matched them as written and
// passed them to an upstream that decodes them and serves /admin.
func TestEncodedSlashLocationGuard(t *testing.T) {
	be := uriEcho(t)
	conf := func(addr string) string {
		return `
  upstream up { server ` + be.Addr + `; }
  server {
    listen ` + addr + `;
    location /admin { return 403; }
    location / { proxy_pass http://up; }
    location /uri/ { proxy_pass http://up/base/; }
    location = /exact { proxy_pass http://up/e/x; }
  }`
	}
	cases := []pathCase{
		{"/admin/secret.txt", 403, ""},
		{"/%2Fadmin/secret.txt", 403, ""},
		{"/%2fadmin/secret.txt", 403, ""},
		{"/%61dmin/secret.txt", 403, ""},
		{"/x/..%2Fadmin/secret.txt", 403, ""},
		{"/x/..%2fadmin/secret.txt", 403, ""},
		{"/x/%2E%2e%2Fadmin/secret.txt", 403, ""},
		{"//x/%2e%2e//admin", 403, ""},
		{"/admin;x/secret", 403, ""}, // ";" is part of the segment: still under /admin
		{"/uri/..%2Fadmin", 403, ""},
		{"/uri/..%2F..%2Fadmin", 400, ""}, // above the root
		{"/%2F..%2F..", 400, ""},
		{"/uri/%00", 400, ""},
		{"/uri/a%00b", 400, ""},
		// Without a URI part the upstream gets the client's target as received, so it
		// decodes what the locations saw decoded.
		{"/x/%2e%2e/y?a=%2F", 200, "/x/%2e%2e/y?a=%2F"},
		{"/x/a%2Fb", 200, "/x/a%2Fb"},
		{"/ADMIN", 200, "/ADMIN"},
		{"/a%5C..%5Cadmin", 200, "/a%5C..%5Cadmin"}, // a backslash is no separator
		// With one, $uri re-escaped (nginx's ngx_escape_uri) after the URI part.
		{"/uri/a%2Fb", 200, "/base/a/b"},
		{"/uri/A%2fB", 200, "/base/A/B"},
		{"/uri/a%252Fb", 200, "/base/a%252Fb"}, // decoded once
		{"/uri/a%5C..%5Cadmin", 200, "/base/a%5C..%5Cadmin"},
		{"/uri/a;p=..%2F/x", 200, "/base/a;p=../x"},
		{"/uri/a%3Bp=1/x", 200, "/base/a;p=1/x"},
		{"/uri/a%3Fb?q=1", 200, "/base/a%3Fb?q=1"},
		{"/uri/a%23b", 200, "/base/a%23b"},
		{"/uri/a%20b", 200, "/base/a%20b"},
		{"/uri/%e2%82%ac", 200, "/base/%E2%82%AC"},
		{"/uri/a%0D%0Ab", 200, "/base/a%0D%0Ab"},
		{"/uri//x/./y/../z", 200, "/base/x/z"}, // no escape in the path: nothing re-escaped
		{"/uri/a|b", 200, "/base/a|b"},
		{"/uri/a|%41", 200, "/base/a%7CA"},
		{"/ex%61ct", 200, "/e/x"},
		{"http://test/uri/a%2Fb", 200, "/base/a/b"},
		{"http://test?q=1", 200, "/?q=1"}, // absolute-form without a path is "/"
	}
	addr := addrFor(t)
	startHTTP(t, conf(addr), addr)
	for _, tc := range cases {
		if status, up := getTarget(t, addr, tc.target); status != tc.status || up != tc.upstream {
			t.Errorf("%s: %d, upstream got %q; want %d, %q", tc.target, status, up, tc.status, tc.upstream)
		}
	}

	t.Run("nginx", func(t *testing.T) {
		ngAddr := addrFor(t)
		startNginx(t, conf(ngAddr), ngAddr)
		for _, tc := range cases {
			if status, up := getTarget(t, ngAddr, tc.target); status != tc.status || up != tc.upstream {
				t.Errorf("nginx: %s: %d, upstream got %q; want %d, %q", tc.target, status, up, tc.status, tc.upstream)
			}
		}
	})
}

// TestProxyPassURIClimb: with "location /api" and "proxy_pass http://up/v1/", nginx
// sends /api../admin upstream as /v1/../admin, which the upstream resolves to /admin,
// outside /v1/. numaproxy answers 400 (a deliberate difference).
func TestProxyPassURIClimb(t *testing.T) {
	be := uriEcho(t)
	conf := func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location /api { proxy_pass http://` + be.Addr + `/v1/; }
  }`
	}
	addr := addrFor(t)
	startHTTP(t, conf(addr), addr)
	for _, tc := range []pathCase{
		{"/api../admin", 400, ""},
		{"/api%2E%2E/admin", 400, ""},
		{"/api..", 400, ""},
		{"/api.../x", 200, "/v1/.../x"},
		{"/api/x", 200, "/v1//x"}, // as nginx
		{"/apix", 200, "/v1/x"},
	} {
		if status, up := getTarget(t, addr, tc.target); status != tc.status || up != tc.upstream {
			t.Errorf("%s: %d, upstream got %q; want %d, %q", tc.target, status, up, tc.status, tc.upstream)
		}
	}
	t.Run("nginx", func(t *testing.T) {
		ngAddr := addrFor(t)
		startNginx(t, conf(ngAddr), ngAddr)
		if status, up := getTarget(t, ngAddr, "/api../admin"); status != 200 || up != "/v1/../admin" {
			t.Errorf("nginx: %d %q", status, up)
		}
	})
}

// TestDecodedURINoHeaderSplitting: $uri is decoded, so %0D%0A in a path is CR LF in
// it. A header built from it (return's Location, add_header, proxy_set_header) must
// not end there and start a field of the client's choosing: numaproxy percent-encodes
// control characters in header values made from variables. nginx 1.22 lets them
// through (checked below): "return 302 $uri" is a known response-splitting pattern.
func TestDecodedURINoHeaderSplitting(t *testing.T) {
	be := newBackend(t, nil)
	conf := func(addr string) string {
		return `
  server {
    listen ` + addr + `;
    location /redir/ { return 302 $uri; }
    location /hdr/ { add_header X-URI "[$uri]"; return 200 ok; }
    location /up/ { proxy_pass http://` + be.Addr + `; proxy_set_header X-URI $uri; }
  }`
	}
	addr := addrFor(t)
	startHTTP(t, conf(addr), addr)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	inject := "x%0D%0ASet-Cookie:%20evil=1%0AX-Evil:%201%0D%0A%0D%0A<html>"
	decoded := "x%0D%0ASet-Cookie: evil=1%0AX-Evil: 1%0D%0A%0D%0A<html>" // controls encoded again

	resp := wantClosedResponse(t, addr, "GET /redir/"+inject+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n", 302)
	if loc := resp.Header.Get("Location"); loc != "http://test:"+port+"/redir/"+decoded || resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Evil") != "" {
		t.Errorf("return 302 $uri: Location %q, header %v", loc, resp.Header)
	}
	resp = wantClosedResponse(t, addr, "GET /hdr/"+inject+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n", 200)
	if v := resp.Header.Get("X-Uri"); v != "[/hdr/"+decoded+"]" || resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Evil") != "" {
		t.Errorf("add_header $uri: X-URI %q, header %v", v, resp.Header)
	}
	wantClosedResponse(t, addr, "GET /up/"+inject+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n", 200)
	if s := be.last(t); s.Header.Get("X-Uri") != "/up/"+decoded || s.Header.Get("X-Evil") != "" || s.URI != "/up/"+inject {
		t.Errorf("proxy_set_header $uri: upstream saw %q %v", s.URI, s.Header)
	}

	t.Run("nginx", func(t *testing.T) {
		ngAddr := addrFor(t)
		startNginx(t, conf(ngAddr), ngAddr)
		raw, _ := roundTripRaw(t, ngAddr, "GET /redir/"+inject+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
		if !strings.Contains(raw, "\r\nSet-Cookie: evil=1\n") {
			t.Errorf("nginx no longer splits the response: %q", raw)
		}
	})
}

// hasField reports whether h has a field called name (any case, as received).
func hasField(h http.Header, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// fieldValues is every value of the fields called name, joined with " | ".
func fieldValues(h http.Header, name string) string {
	var vs []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			vs = append(vs, v...)
		}
	}
	return strings.Join(vs, " | ")
}

// sendHead sends a raw head on a new connection and returns the response.
func sendHead(t *testing.T, addr, head string) *http.Response {
	t.Helper()
	raw, err := roundTripRaw(t, addr, head)
	if err != nil {
		t.Fatalf("%q: %v (%q)", head, err, raw)
	}
	return parseResponses(t, raw, "GET")[0]
}

// TestUnderscoreHeadersDropped: nginx drops request fields whose names hold "_" or
// characters other than letters, digits and "-" (underscores_in_headers off,
// ignore_invalid_headers on). numaproxy passed them on, so behind proxy_set_header
// X-Forwarded-For $proxy_add_x_forwarded_for a client's X_Forwarded_For reached a
// CGI or WSGI upstream as HTTP_X_FORWARDED_FOR. The settings follow the default
// server until Host names a server, as nginx reads a head.
func TestUnderscoreHeadersDropped(t *testing.T) {
	be := newBackend(t, nil)
	loc := `location / { proxy_pass http://` + be.Addr + `; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; proxy_set_header X-Var "[$http_x_custom]"; }`
	conf := func(one, mixed string) string {
		return `
  server { listen ` + one + `; server_name d.test; ` + loc + ` }
  server { listen ` + mixed + ` default_server; server_name d.test; ` + loc + ` }
  server { listen ` + mixed + `; server_name u.test; underscores_in_headers on; ` + loc + ` }
  server { listen ` + mixed + `; server_name k.test; ignore_invalid_headers off; ` + loc + ` }`
	}
	type want struct {
		xff, xvar string
		has       []string // fields the upstream must get
		hasNot    []string // fields it must not get
	}
	spoof := "X_Forwarded_For: 6.6.6.6\r\nX_Custom: c\r\nX.Dot: 1\r\nX-Ok: 1\r\n"
	cases := []struct {
		mixed bool // on the address whose servers differ
		head  string
		want  want
	}{
		{false, "Host: d.test\r\n" + spoof, want{"127.0.0.1", "[]", []string{"X-Ok"}, []string{"X_Forwarded_For", "X_Custom", "X.Dot"}}},
		{false, "Host: u.test\r\n" + spoof, want{"127.0.0.1", "[]", []string{"X-Ok"}, []string{"X_Forwarded_For", "X_Custom", "X.Dot"}}},
		{true, "Host: d.test\r\n" + spoof, want{"127.0.0.1", "[]", []string{"X-Ok"}, []string{"X_Forwarded_For", "X_Custom", "X.Dot"}}},
		// underscores_in_headers on: kept, and $http_x_custom sees X_Custom as in nginx.
		{true, "Host: u.test\r\n" + spoof, want{"127.0.0.1", "[c]", []string{"X-Ok", "X_Forwarded_For", "X_Custom"}, []string{"X.Dot"}}},
		// Fields before Host follow the default server.
		{true, spoof + "Host: u.test\r\n", want{"127.0.0.1", "[]", []string{"X-Ok"}, []string{"X_Forwarded_For", "X_Custom", "X.Dot"}}},
		{true, "X_Custom: c\r\nHost: k.test\r\nX_Before: b\r\n", want{"127.0.0.1", "[]", []string{"X_Before"}, []string{"X_Custom"}}},
		// ignore_invalid_headers off: everything passes.
		{true, "Host: k.test\r\n" + spoof, want{"127.0.0.1", "[c]", []string{"X-Ok", "X_Forwarded_For", "X_Custom", "X.Dot"}, nil}},
		// An absolute-form target names the server for the whole head.
		{true, spoof, want{"127.0.0.1", "[c]", []string{"X-Ok", "X_Forwarded_For", "X_Custom"}, []string{"X.Dot"}}},
	}
	run := func(t *testing.T, who, one, mixed string) {
		for _, tc := range cases {
			addr, target := one, "/"
			if tc.mixed {
				addr = mixed
			}
			if !strings.Contains(tc.head, "Host:") {
				target = "http://u.test/"
				tc.head += "Host: d.test\r\n"
			}
			if resp := sendHead(t, addr, "GET "+target+" HTTP/1.1\r\n"+tc.head+"Connection: close\r\n\r\n"); resp.StatusCode != 200 {
				t.Fatalf("%s: %q: status %d", who, tc.head, resp.StatusCode)
			}
			s := be.last(t)
			if xff := fieldValues(s.Header, "X-Forwarded-For"); xff != tc.want.xff || s.Header.Get("X-Var") != tc.want.xvar {
				t.Errorf("%s: %q (mixed %v): X-Forwarded-For %q X-Var %q, want %q %q", who, tc.head, tc.mixed, xff, s.Header.Get("X-Var"), tc.want.xff, tc.want.xvar)
			}
			for _, f := range tc.want.has {
				if !hasField(s.Header, f) {
					t.Errorf("%s: %q (mixed %v): the upstream did not get %s: %v", who, tc.head, tc.mixed, f, s.Header)
				}
			}
			for _, f := range tc.want.hasNot {
				if hasField(s.Header, f) {
					t.Errorf("%s: %q (mixed %v): the upstream got %s: %v", who, tc.head, tc.mixed, f, s.Header)
				}
			}
		}
	}
	one, mixed := addrFor(t), addrFor(t)
	startHTTP(t, conf(one, mixed), one, mixed)
	run(t, "numaproxy", one, mixed)
	t.Run("nginx", func(t *testing.T) {
		one, mixed := addrFor(t), addrFor(t)
		startNginx(t, conf(one, mixed), one, mixed)
		run(t, "nginx", one, mixed)
	})
}

// TestConnectionListedFieldsForwarded: a client naming end-to-end fields in
// Connection must not make the proxy drop them (nginx forwards them): only the fixed
// hop-by-hop fields and proxy_set_header decide.
func TestConnectionListedFieldsForwarded(t *testing.T) {
	be := newBackend(t, nil)
	conf := func(addr string) string {
		return `
  server { listen ` + addr + `;
    location / { proxy_pass http://` + be.Addr + `; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }
  }`
	}
	head := "GET / HTTP/1.1\r\nHost: test\r\nConnection: close, Authorization, X-Api-Key, X-Forwarded-For, TE\r\n" +
		"Authorization: Bearer secret\r\nX-Api-Key: k\r\nX-Forwarded-For: 10.0.0.1\r\nTE: trailers\r\nKeep-Alive: timeout=5\r\nUpgrade: h2c\r\n\r\n"
	check := func(t *testing.T, who, addr string) {
		if resp := sendHead(t, addr, head); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", who, resp.StatusCode)
		}
		s := be.last(t)
		if s.Header.Get("Authorization") != "Bearer secret" || s.Header.Get("X-Api-Key") != "k" || s.Header.Get("X-Forwarded-For") != "10.0.0.1, 127.0.0.1" {
			t.Errorf("%s: the upstream got %v", who, s.Header)
		}
		for _, f := range []string{"TE", "Keep-Alive", "Upgrade"} {
			if hasField(s.Header, f) || len(s.TE) > 0 {
				t.Errorf("%s: the upstream got hop-by-hop %s: %v %v", who, f, s.Header, s.TE)
			}
		}
	}
	addr := addrFor(t)
	startHTTP(t, conf(addr), addr)
	check(t, "numaproxy", addr)
	t.Run("nginx", func(t *testing.T) {
		addr := addrFor(t)
		startNginx(t, conf(addr), addr)
		check(t, "nginx", addr)
	})
}

// TestHostTrailingDotAndForwardedFor: $host drops a trailing dot as nginx's does
// (ngx_http_validate_host), server_name matches without it, and
// $proxy_add_x_forwarded_for and $http_x_forwarded_for join every X-Forwarded-For
// field, not only the first.
func TestHostTrailingDotAndForwardedFor(t *testing.T) {
	be := newBackend(t, nil)
	conf := func(addr string) string {
		return `
  server { listen ` + addr + ` default_server; server_name default.test; return 200 "default"; }
  server { listen ` + addr + `; server_name named.test;
    location / { proxy_pass http://` + be.Addr + `;
      proxy_set_header Host $host;
      proxy_set_header X-Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Http-XFF $http_x_forwarded_for;
    }
    location /r { return 302 /x; }
  }`
	}
	check := func(t *testing.T, who, addr string) {
		port := addr[strings.LastIndexByte(addr, ':')+1:]
		if resp := sendHead(t, addr, "GET / HTTP/1.1\r\nHost: Named.Test.:"+port+"\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2, 3.3.3.3\r\nX-Forwarded-For: \r\nConnection: close\r\n\r\n"); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", who, resp.StatusCode)
		}
		s := be.last(t)
		if s.Host != "named.test" || s.Header.Get("X-Host") != "named.test" {
			t.Errorf("%s: Host %q X-Host %q", who, s.Host, s.Header.Get("X-Host"))
		}
		if got := s.Header.Get("X-Forwarded-For"); got != "1.1.1.1, 2.2.2.2, 3.3.3.3, , 127.0.0.1" {
			t.Errorf("%s: X-Forwarded-For %q", who, got)
		}
		if got := s.Header.Get("X-Http-XFF"); got != "1.1.1.1, 2.2.2.2, 3.3.3.3, " && got != "1.1.1.1, 2.2.2.2, 3.3.3.3," {
			t.Errorf("%s: $http_x_forwarded_for %q", who, got)
		}
		resp := sendHead(t, addr, "GET /r HTTP/1.1\r\nHost: NAMED.test.\r\nConnection: close\r\n\r\n")
		if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || loc != "http://named.test:"+port+"/x" {
			t.Errorf("%s: %d Location %q", who, resp.StatusCode, loc)
		}
		if resp := sendHead(t, addr, "GET / HTTP/1.1\r\nHost: .\r\nConnection: close\r\n\r\n"); resp.StatusCode != 400 {
			t.Errorf("%s: Host \".\": %d", who, resp.StatusCode)
		}
	}
	addr := addrFor(t)
	startHTTP(t, conf(addr), addr)
	check(t, "numaproxy", addr)
	t.Run("nginx", func(t *testing.T) {
		addr := addrFor(t)
		startNginx(t, conf(addr), addr)
		check(t, "nginx", addr)
	})
}
