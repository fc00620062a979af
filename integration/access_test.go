package integration

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The differential tests of realip, allow/deny, auth_basic, auth_request and satisfy:
// the same http block runs in nginx and numaproxy, the same requests go to both, and
// the status, the fields that matter and what the upstream saw must be equal.

// echoAddrBackend answers with what it was told of the client: the fields the
// configurations below set from $remote_addr, $remote_port and $realip_*.
func echoAddrBackend(t *testing.T) *backend {
	return newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "rip=%s xff=%s rport=%s ra=%s rp=%s end",
			r.Header.Get("X-Real-IP"), r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Remote-Port"),
			r.Header.Get("X-Realip-Addr"), r.Header.Get("X-Realip-Port"))
	})
}

// exchangeRaw sends one raw HTTP/1.0 request and returns the response with the
// client's own port written as PEER, so that answers through nginx and numaproxy
// compare.
func exchangeRaw(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	port := strconv.Itoa(c.LocalAddr().(*net.TCPAddr).Port)
	return strings.ReplaceAll(string(raw), "="+port+" ", "=PEER ")
}

// answer is the part of a response two servers must agree on: the status line,
// chosen fields and the body (whose error pages name each server differently).
func answer(raw string, fields ...string) string {
	head, body, _ := strings.Cut(raw, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	out := lines[0]
	for _, f := range fields {
		for _, l := range lines[1:] {
			if name, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(name, f) {
				out += "\n" + name + ":" + v
			}
		}
	}
	if strings.HasPrefix(body, "<html>") {
		body = "(error page)"
	}
	return out + "\n" + body
}

// differential runs the http block conf(addrs...) in nginx and in numaproxy, each
// with servers on its own n addresses, and calls each for both.
func differential(t *testing.T, n int, conf func(addrs []string) string, each func(name string, addrs []string) map[string]string) {
	t.Helper()
	var ngAddrs, npAddrs []string
	for i := 0; i < n; i++ {
		ngAddrs = append(ngAddrs, addrFor(t))
		npAddrs = append(npAddrs, addrFor(t))
	}
	startNginx(t, conf(ngAddrs), ngAddrs...)
	in := startHTTP(t, conf(npAddrs), npAddrs...)
	want := each("nginx", ngAddrs)
	got := each("numaproxy", npAddrs)
	for k, w := range want {
		if g := got[k]; g != w {
			t.Errorf("%s:\nnginx:     %q\nnumaproxy: %q", k, w, g)
		}
	}
	in.checkNoPanic()
}

// TestRealIPAgainstNginx: X-Forwarded-For chains with real_ip_recursive off and on,
// X-Real-IP, another field, a location's own settings, trusted and untrusted peers
// (the test's client is 127.0.0.1), and what the upstream then sees in X-Real-IP
// and X-Forwarded-For set from $remote_addr.
func TestRealIPAgainstNginx(t *testing.T) {
	b := echoAddrBackend(t)
	conf := func(a []string) string {
		return `
proxy_set_header X-Real-IP $remote_addr;
proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
proxy_set_header X-Remote-Port $remote_port;
proxy_set_header X-Realip-Addr $realip_remote_addr;
proxy_set_header X-Realip-Port $realip_remote_port;
server { listen ` + a[0] + `; set_real_ip_from 127.0.0.1; real_ip_header X-Forwarded-For;
	location / { proxy_pass http://` + b.Addr + `; } }
server { listen ` + a[1] + `; set_real_ip_from 127.0.0.0/8; set_real_ip_from 10.0.0.0/8; set_real_ip_from 2001:db8::/32;
	real_ip_header X-Forwarded-For; real_ip_recursive on;
	location / { proxy_pass http://` + b.Addr + `; } }
server { listen ` + a[2] + `; set_real_ip_from 10.0.0.0/8;
	location / { proxy_pass http://` + b.Addr + `; } }
server { listen ` + a[3] + `; set_real_ip_from 127.0.0.1;
	location / { proxy_pass http://` + b.Addr + `; }
	location /client { real_ip_header X-Client; proxy_pass http://` + b.Addr + `; }
	location /untrusted { set_real_ip_from 192.0.2.1; proxy_pass http://` + b.Addr + `; } }
server { listen ` + a[4] + `;
	location / { proxy_pass http://` + b.Addr + `; }
	location /loc { set_real_ip_from 127.0.0.1; real_ip_header X-Forwarded-For; real_ip_recursive on; proxy_pass http://` + b.Addr + `; } }
`
	}
	cases := []struct {
		server int
		path   string
		fields string
	}{
		{0, "/", ""},
		{0, "/", "X-Forwarded-For: 203.0.113.7\r\n"},
		{0, "/", "X-Forwarded-For: 203.0.113.7, 10.1.1.1\r\n"},
		{0, "/", "X-Forwarded-For: 203.0.113.7,10.1.1.1 , \r\n"},
		{0, "/", "X-Forwarded-For: 198.51.100.1\r\nX-Forwarded-For: 203.0.113.7, 10.1.1.1\r\n"},
		{0, "/", "X-Forwarded-For: 203.0.113.7:8080\r\n"},
		{0, "/", "X-Forwarded-For: [2001:db8::5]:443\r\n"},
		{0, "/", "X-Forwarded-For: 2001:db8::5\r\n"},
		{0, "/", "X-Forwarded-For: garbage\r\n"},
		{0, "/", "X-Forwarded-For: 203.0.113.7, garbage\r\n"},
		{0, "/", "X-Forwarded-For: \r\n"},
		{1, "/", "X-Forwarded-For: 203.0.113.7, 10.1.1.1, 127.0.0.5\r\n"},
		{1, "/", "X-Forwarded-For: 203.0.113.7, 198.51.100.9, 10.1.1.1\r\n"},
		{1, "/", "X-Forwarded-For: 10.2.2.2, 10.1.1.1\r\n"},
		{1, "/", "X-Forwarded-For: garbage, 10.1.1.1\r\n"},
		{1, "/", "X-Forwarded-For: 198.51.100.1\r\nX-Forwarded-For: 10.1.1.1\r\n"},
		{1, "/", "X-Forwarded-For: 198.51.100.1, 10.3.3.3\r\nX-Forwarded-For: 10.1.1.1, 10.2.2.2\r\n"},
		{1, "/", "X-Forwarded-For: 10.9.9.9\r\nX-Forwarded-For: 10.1.1.1\r\n"},
		{1, "/", "X-Forwarded-For: 2001:db8::7, [2001:db8::8]:99\r\n"},
		{1, "/", "X-Forwarded-For: 192.0.2.1:1234, 2001:db8::8\r\n"},
		{2, "/", "X-Real-IP: 203.0.113.7\r\n"},
		{3, "/", "X-Real-IP: 203.0.113.7\r\n"},
		{3, "/", "X-Real-IP: 203.0.113.7\r\nX-Real-IP: 198.51.100.1\r\n"},
		{3, "/", "X-Real-IP: 203.0.113.7:99\r\n"},
		{3, "/", "X-Real-IP: 203.0.113.7, 198.51.100.1\r\n"},
		{3, "/", "X-Real-IP: not-an-address\r\n"},
		{3, "/client", "X-Real-IP: 203.0.113.7\r\nX-Client: 198.51.100.3\r\n"},
		{3, "/client", "X-Client: 198.51.100.3\r\nX-Client: 198.51.100.4\r\n"},
		{3, "/untrusted", "X-Real-IP: 203.0.113.7\r\n"},
		{4, "/", "X-Forwarded-For: 203.0.113.7\r\n"},
		{4, "/loc", "X-Forwarded-For: 203.0.113.7, 127.0.0.9\r\n"},
	}
	differential(t, 5, conf, func(name string, addrs []string) map[string]string {
		out := map[string]string{}
		for i, c := range cases {
			raw := exchangeRaw(t, addrs[c.server], "GET "+c.path+" HTTP/1.0\r\nHost: x\r\n"+c.fields+"\r\n")
			out[fmt.Sprintf("%d server %d %s %q", i, c.server, c.path, c.fields)] = answer(raw)
		}
		return out
	})
}

// TestAccessAgainstNginx: allow and deny in nginx's order (first match, one list per
// family, "all" in each), inheritance (a level with rules replaces the parent's),
// IPv6 and IPv4-mapped clients, satisfy any with access alone. The client address
// comes from X-Real-IP through realip, so one loopback client plays many.
func TestAccessAgainstNginx(t *testing.T) {
	b := newBackend(t, nil)
	pass := "proxy_pass http://" + b.Addr + ";"
	conf := func(a []string) string {
		return `
set_real_ip_from 127.0.0.1;
server { listen ` + a[0] + `;
	deny 10.0.0.1; allow all;
	location /inherit { ` + pass + ` }
	location /own { allow 10.0.0.1; deny all; ` + pass + ` }
	location /a { allow 10.0.0.0/8; deny all; ` + pass + ` }
	location /b { deny 10.1.0.0/16; allow 10.0.0.0/8; deny all; ` + pass + ` }
	location /c { allow 2001:db8::/32; deny all; ` + pass + ` }
	location /d { deny 2001:db8::1; ` + pass + ` }
	location /e { allow 192.168.1.1/24; deny all; ` + pass + ` }
	location /f { allow ::ffff:10.0.0.0/104; deny all; ` + pass + ` }
	location /g { satisfy any; deny all; ` + pass + ` }
	location /h { satisfy any; allow 10.0.0.1; deny all; ` + pass + ` }
	location /i { allow unix:; deny 127.0.0.1; ` + pass + ` }
	location /nested { allow 10.0.0.0/8; deny all;
		location /nested/in { ` + pass + ` }
		location /nested/own { deny 10.0.0.2; ` + pass + ` } }
}`
	}
	paths := []string{"/inherit", "/own", "/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h", "/i", "/nested/in", "/nested/own"}
	clients := []string{"", "10.0.0.1", "10.0.0.2", "10.1.2.3", "10.200.0.1", "192.168.1.77", "192.168.2.1",
		"2001:db8::1", "2001:db8::2", "2001:dead::1", "::ffff:10.0.0.1", "::ffff:172.16.0.1"}
	differential(t, 1, conf, func(name string, addrs []string) map[string]string {
		out := map[string]string{}
		for _, p := range paths {
			for _, cl := range clients {
				f := ""
				if cl != "" {
					f = "X-Real-IP: " + cl + "\r\n"
				}
				raw := exchangeRaw(t, addrs[0], "GET "+p+" HTTP/1.0\r\nHost: x\r\n"+f+"\r\n")
				out[p+" from "+cl] = answer(raw)
			}
		}
		if n := strings.Count(fmt.Sprint(out), "403 Forbidden"); n < 20 || n > len(out)-20 {
			t.Errorf("%s: %d of %d requests forbidden: the table tests little", name, n, len(out))
		}
		return out
	})
}

// htpasswdFixture is authbasic's user file (one user per scheme nginx reads on
// Debian) and each supported user's password.
func htpasswdFixture(t *testing.T) (path string, users map[string]string) {
	t.Helper()
	data, err := os.ReadFile("../authbasic/testdata/htpasswd")
	if err != nil {
		t.Fatal(err)
	}
	special := map[string]string{"utf8": "pässwörd ✓", "colon": "a:b:c", "empty": "",
		"long-bcrypt": strings.Repeat("L", 80), "bsdi": "pw-bsdi-long-password", "bigcrypt": "pw-bigcrypt-long"}
	unsupported := map[string]bool{"yescrypt": true, "sunmd5": true, "nt": true, "bcrypt-2x": true} // documented in authbasic
	users = map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		name, _, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, "#") || unsupported[name] {
			continue
		}
		pw, ok := special[name]
		if !ok {
			pw = "pw-" + name
		}
		users[name] = pw
	}
	path = filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, users
}

func basicAuth(user, pw string) string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw)) + "\r\n"
}

// TestAuthBasicAgainstNginx: a login with each htpasswd scheme nginx supports, wrong
// passwords, unknown users, no or broken credentials, auth_basic off, inheritance,
// a missing file, and satisfy all/any with allow/deny (clients from X-Real-IP).
func TestAuthBasicAgainstNginx(t *testing.T) {
	file, users := htpasswdFixture(t)
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "user=%q", r.Header.Get("X-Remote-User")) })
	pass := "proxy_pass http://" + b.Addr + ";"
	conf := func(a []string) string {
		return `
set_real_ip_from 127.0.0.1;
proxy_set_header X-Remote-User $remote_user;
server { listen ` + a[0] + `;
	auth_basic "Server realm"; auth_basic_user_file ` + file + `;
	location / { ` + pass + ` }
	location /own { auth_basic 'say "hi"'; ` + pass + ` }
	location /off { auth_basic off; ` + pass + ` }
	location /missing { auth_basic_user_file ` + file + `.missing; ` + pass + ` }
	location /all { allow 10.0.0.0/8; deny all; ` + pass + ` }
	location /any { satisfy any; allow 10.0.0.0/8; deny all; ` + pass + ` }
	location /anyerr { satisfy any; deny all; auth_basic_user_file ` + file + `.missing; ` + pass + ` }
	location /anyonly { satisfy any; ` + pass + ` }
	location /ep { error_page 401 /please; error_page 403 =200 /forbidden; ` + pass + ` }
	location /ep-deny { deny all; error_page 403 =200 /forbidden; ` + pass + ` }
	location = /please { auth_basic off; return 200 "please log in"; }
	location = /forbidden { auth_basic off; return 200 "not for you"; }
}`
	}
	type tc struct{ path, fields string }
	var cases []tc
	for u, pw := range users {
		cases = append(cases, tc{"/", basicAuth(u, pw)}, tc{"/", basicAuth(u, pw+"x")})
	}
	for _, p := range []string{"/", "/own", "/off", "/missing", "/all", "/any", "/anyerr", "/anyonly", "/ep", "/ep-deny"} {
		for _, from := range []string{"", "X-Real-IP: 10.1.1.1\r\n"} {
			for _, auth := range []string{"", basicAuth("plain", "pw-plain"), basicAuth("plain", "nope"),
				basicAuth("nobody", "x"), "Authorization: Basic !!!\r\n", "Authorization: Bearer x\r\n",
				basicAuth("sha512", "pw-sha512")} {
				cases = append(cases, tc{p, from + auth})
			}
		}
	}
	differential(t, 1, conf, func(name string, addrs []string) map[string]string {
		out := map[string]string{}
		for _, c := range cases {
			raw := exchangeRaw(t, addrs[0], "GET "+c.path+" HTTP/1.0\r\nHost: x\r\n"+c.fields+"\r\n")
			out[c.path+" "+strings.TrimSpace(c.fields)] = answer(raw, "WWW-Authenticate")
		}
		if !strings.Contains(fmt.Sprint(out), `user="plain"`) {
			t.Errorf("%s: no request passed $remote_user", name)
		}
		if n := strings.Count(fmt.Sprint(out), "200 OK"); n < 30 || n > len(out)-30 {
			t.Errorf("%s: %d of %d requests allowed: the table tests little", name, n, len(out))
		}
		return out
	})
}

// ssoBackend is an SSO service for auth_request: it answers by the X-Token field
// of the request it checks, and records what it received.
func ssoBackend(t *testing.T) *backend {
	return newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Token") {
		case "ok":
			w.Header().Set("X-User", "alice")
			w.Header().Set("X-Groups", "admin,dev")
			io.WriteString(w, "a body nobody reads")
		case "nocontent":
			w.WriteHeader(204)
		case "deny":
			w.WriteHeader(403)
		case "login":
			w.Header().Set("WWW-Authenticate", `Bearer realm="sso"`)
			w.Header().Add("WWW-Authenticate", `Basic realm="other"`)
			w.WriteHeader(401)
		case "login-bare":
			w.WriteHeader(401)
		case "redirect":
			w.Header().Set("Location", "http://sso.example/login")
			w.WriteHeader(302)
		case "teapot":
			w.WriteHeader(418)
		default:
			w.WriteHeader(500)
		}
	})
}

// TestAuthRequestAgainstNginx: auth_request through an internal location proxied to
// an SSO service: 2xx allows (with auth_request_set values passed upstream), 401
// passes the SSO's WWW-Authenticate through, 403 passes, anything else is 500; an
// unreachable SSO and a missing location are 500; the location cannot be asked for
// directly; a POST's body goes to the application and not to the SSO; satisfy any
// and all with allow/deny and auth_basic. What the SSO and the application saw is
// compared too.
func TestAuthRequestAgainstNginx(t *testing.T) {
	file, _ := htpasswdFixture(t)
	sso := ssoBackend(t)
	app := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app %s %s user=%q groups=%q status=%q", r.Method, r.RequestURI,
			r.Header.Get("X-User"), r.Header.Get("X-Groups"), r.Header.Get("X-Auth-Status"))
	})
	dead := addrFor(t) // nothing listens there
	conf := func(a []string) string {
		return `
set_real_ip_from 127.0.0.1;
server { listen ` + a[0] + `;
	location = /auth { internal; proxy_pass http://` + sso.Addr + `/check;
		proxy_pass_request_body off; proxy_set_header Content-Length "";
		proxy_set_header X-Original-URI $request_uri; proxy_set_header X-Original-Method $request_method; }
	location = /auth-dead { internal; proxy_pass http://` + dead + `; }
	location / { auth_request /auth;
		auth_request_set $user $upstream_http_x_user; auth_request_set $groups $upstream_http_x_groups;
		auth_request_set $auth_status $upstream_status;
		proxy_set_header X-User $user; proxy_set_header X-Groups $groups; proxy_set_header X-Auth-Status $auth_status;
		proxy_pass http://` + app.Addr + `; }
	location /off { auth_request off; proxy_pass http://` + app.Addr + `; }
	location /dead { auth_request /auth-dead; proxy_pass http://` + app.Addr + `; }
	location /missing { auth_request /nowhere; proxy_pass http://` + app.Addr + `; }
	location /any { satisfy any; allow 10.0.0.0/8; deny all; auth_request /auth; proxy_pass http://` + app.Addr + `; }
	location /all { allow 10.0.0.0/8; deny all; auth_request /auth; proxy_pass http://` + app.Addr + `; }
	location /basic-any { satisfy any; auth_basic "r"; auth_basic_user_file ` + file + `; auth_request /auth; proxy_pass http://` + app.Addr + `; }
	location /basic-all { auth_basic "r"; auth_basic_user_file ` + file + `; auth_request /auth; proxy_pass http://` + app.Addr + `; }
}
server { listen ` + a[1] + `;
	location = /auth { internal; return 204; }
	location = /auth403 { internal; return 403; }
	location /a { auth_request /auth; proxy_pass http://` + app.Addr + `; }
	location /b { auth_request /auth403; proxy_pass http://` + app.Addr + `; }
}`
	}
	tokens := []string{"", "ok", "nocontent", "deny", "login", "login-bare", "redirect", "teapot", "err"}
	type tc struct {
		server int
		req    string
	}
	var cases []tc
	for _, tok := range tokens {
		f := ""
		if tok != "" {
			f = "X-Token: " + tok + "\r\n"
		}
		cases = append(cases, tc{0, "GET /page?x=1 HTTP/1.0\r\nHost: x\r\n" + f + "\r\n"},
			tc{0, "POST /form HTTP/1.0\r\nHost: x\r\nContent-Length: 5\r\n" + f + "\r\nhello"},
			tc{0, "HEAD /page HTTP/1.0\r\nHost: x\r\n" + f + "\r\n"})
		for _, p := range []string{"/any", "/all"} {
			for _, from := range []string{"", "X-Real-IP: 10.0.0.1\r\n"} {
				cases = append(cases, tc{0, "GET " + p + " HTTP/1.0\r\nHost: x\r\n" + f + from + "\r\n"})
			}
		}
		for _, p := range []string{"/basic-any", "/basic-all"} {
			for _, auth := range []string{"", basicAuth("plain", "pw-plain"), basicAuth("plain", "bad"), basicAuth("bcrypt-2y", "pw-bcrypt-2y")} {
				cases = append(cases, tc{0, "GET " + p + " HTTP/1.0\r\nHost: x\r\n" + f + auth + "\r\n"})
			}
		}
	}
	for _, p := range []string{"/auth", "/off", "/dead", "/missing"} {
		cases = append(cases, tc{0, "GET " + p + " HTTP/1.0\r\nHost: x\r\nX-Token: ok\r\n\r\n"})
	}
	cases = append(cases, tc{1, "GET /a HTTP/1.0\r\nHost: x\r\n\r\n"}, tc{1, "GET /b HTTP/1.0\r\nHost: x\r\n\r\n"},
		tc{1, "GET /auth HTTP/1.0\r\nHost: x\r\n\r\n"})
	differential(t, 2, conf, func(name string, addrs []string) map[string]string {
		out := map[string]string{}
		for i, c := range cases {
			sso.reset()
			app.reset()
			raw := exchangeRaw(t, addrs[c.server], c.req)
			k := fmt.Sprintf("%03d %q", i, c.req)
			out[k] = answer(raw, "WWW-Authenticate", "Location", "X-User")
			for _, s := range sso.requests() {
				out[k] += fmt.Sprintf("\nsso saw %s %s orig=%q/%q cl=%q te=%q body=%q", s.Method, s.URI,
					s.Header.Get("X-Original-Method"), s.Header.Get("X-Original-URI"), s.Header.Get("Content-Length"), s.TE, s.Body)
			}
			for _, s := range app.requests() {
				out[k] += fmt.Sprintf("\napp saw %s %s body=%q", s.Method, s.URI, s.Body)
			}
		}
		// The table must reach the cases that matter.
		for _, want := range []string{`app GET /page?x=1 user="alice" groups="admin,dev" status="200"`, `app POST /form user="alice"`,
			`body="hello"`, "401 Unauthorized\nWww-Authenticate: Bearer", "403 Forbidden", "500 Internal", "404 Not Found"} {
			if !strings.Contains(fmt.Sprint(out), want) {
				t.Errorf("%s: no answer has %q", name, want)
			}
		}
		return out
	})
}

// TestAuthRequestClientGoneAndPipelined: a client that closes while its auth
// subrequest waits for a slow SSO leaves no trace (the subrequest and its upstream
// connection end, the loop serves on); a request whose subrequest waits while the
// client pipelines a head large enough to move the connection's input keeps its
// fields for auth_request_set (the subrequest reads the parent's head).
func TestAuthRequestClientGoneAndPipelined(t *testing.T) {
	release := make(chan struct{})
	sso := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") == "slow" {
			select {
			case <-release:
			case <-time.After(3 * time.Second):
			}
		}
		w.Header().Set("X-User", "u-"+r.Header.Get("X-Token"))
	})
	app := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "user=%s tok=%s", r.Header.Get("X-User"), r.Header.Get("X-Tok"))
	})
	addr := addrFor(t)
	in := startHTTP(t, `server { listen `+addr+`;
	location = /auth { internal; proxy_pass http://`+sso.Addr+`; proxy_read_timeout 10s; }
	location / { auth_request /auth; auth_request_set $user $upstream_http_x_user; auth_request_set $tok $http_x_token;
		proxy_set_header X-User $user; proxy_set_header X-Tok $tok; proxy_pass http://`+app.Addr+`; } }`, addr)

	// The client goes while the SSO thinks.
	c := dial(t, addr)
	io.WriteString(c, "GET /gone HTTP/1.1\r\nHost: x\r\nX-Token: slow\r\n\r\n")
	waitFor(t, "the SSO to get the check", 5*time.Second, func() bool { return sso.count() == 1 })
	c.Close()
	waitFor(t, "the subrequest's upstream connection to close", 5*time.Second, func() bool { return sso.closed.Load() == 1 })
	if app.count() != 0 {
		t.Fatalf("the application got %d requests of a client that went", app.count())
	}

	// A slow check while the client pipelines a large head behind its request.
	sso.reset()
	cl := newClient(t, addr)
	big := strings.Repeat("b", 6000)
	cl.send("GET /first HTTP/1.1\r\nHost: x\r\nX-Token: slow\r\n\r\n")
	waitFor(t, "the SSO to get the check", 5*time.Second, func() bool { return sso.count() == 1 })
	cl.send("GET /second HTTP/1.1\r\nHost: x\r\nX-Token: fast\r\nX-Big: " + big + "\r\n\r\n")
	time.Sleep(100 * time.Millisecond) // the pipelined head is read while the check waits
	close(release)
	for _, want := range []string{"user=u-slow tok=slow", "user=u-fast tok=fast"} {
		resp, body := cl.read("GET")
		if resp.StatusCode != 200 || body != want {
			t.Fatalf("%d %q, want %q", resp.StatusCode, body, want)
		}
	}
	in.checkNoPanic()
}

// TestAuthBasicVariablesAgainstNginx: auth_basic and auth_basic_user_file with
// variables: a realm from a request field (and "off" from one), a user file chosen
// by an argument, a missing one.
func TestAuthBasicVariablesAgainstNginx(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"one": "ann:{PLAIN}one\n", "two": "ann:{PLAIN}two\nbob:{SHA}G5zynyVKZeHPqXetqic75L7ZkrM=\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := newBackend(t, nil)
	pass := "proxy_pass http://" + b.Addr + ";"
	conf := func(a []string) string {
		return `
server { listen ` + a[0] + `;
	location /realm { auth_basic "realm of $http_x_realm"; auth_basic_user_file ` + dir + `/one; ` + pass + ` }
	location /maybe { auth_basic $http_x_realm; auth_basic_user_file ` + dir + `/one; ` + pass + ` }
	location /file { auth_basic "files"; auth_basic_user_file ` + dir + `/$arg_f; ` + pass + ` }
}`
	}
	var reqs []string
	for _, p := range []string{"/realm", "/maybe", "/file?f=one", "/file?f=two", "/file?f=none", "/file"} {
		for _, f := range []string{"", "X-Realm: inner\r\n", "X-Realm: off\r\n", "X-Realm: a\"b\r\n"} {
			for _, auth := range []string{"", basicAuth("ann", "one"), basicAuth("ann", "two"), basicAuth("bob", "pw-sha")} {
				reqs = append(reqs, "GET "+p+" HTTP/1.0\r\nHost: x\r\n"+f+auth+"\r\n")
			}
		}
	}
	differential(t, 1, conf, func(name string, addrs []string) map[string]string {
		out := map[string]string{}
		for _, req := range reqs {
			out[fmt.Sprintf("%q", req)] = answer(exchangeRaw(t, addrs[0], req), "WWW-Authenticate")
		}
		for _, want := range []string{`realm="realm of inner"`, `realm="a"b"`, "200 OK", "403 Forbidden"} {
			if !strings.Contains(fmt.Sprint(out), want) {
				t.Errorf("%s: no answer has %q", name, want)
			}
		}
		return out
	})
}
