package proxy

import (
	"net/netip"
	"strings"
	"testing"
)

// TestUpstreamDirectivesParse: the directives of proxy_bind, proxy_method,
// proxy_cookie_*, proxy_ignore_headers, proxy_buffer_size and the boolean ones,
// with nginx's defaults and inheritance.
func TestUpstreamDirectivesParse(t *testing.T) {
	cfg := mustConf(t, `http {
	proxy_bind 10.0.0.1 transparent;
	proxy_cookie_path /a/ /b/;
	proxy_ignore_headers X-Accel-Redirect;
	proxy_ignore_headers x-accel-buffering Vary;
	server {
		location /inherit { }
		location /own {
			proxy_bind $remote_addr;
			proxy_method $arg_m;
			proxy_cookie_path off;
			proxy_cookie_domain ~^(.*)\.in$ $1.out;
			proxy_cookie_domain .Example.com .example.org;
			proxy_ignore_headers Expires;
			proxy_buffer_size 16k;
			proxy_buffers 4 16k; # nginx refuses 16k with the default 8 4k (busy buffers)
			proxy_intercept_errors on;
			recursive_error_pages on;
			proxy_ignore_client_abort on;
			proxy_socket_keepalive on;
			proxy_pass_request_body off;
			proxy_pass_request_headers off;
			location /own/off { proxy_bind off; proxy_method PUT; }
		}
		location /u/ { proxy_pass http://unix:/run/app.sock:/v1/; }
	}
}`)
	locs := cfg.HTTP.Servers[0].Locations
	in, own, off, u := lc(locs[0]), lc(locs[1]), lc(locs[1].Locations[0]), lc(locs[2])
	if in.Bind == nil || in.Bind.Addr != netip.MustParseAddrPort("10.0.0.1:0") || !in.Bind.Transparent || in.Bind.Value != nil {
		t.Errorf("inherited proxy_bind %+v", in.Bind)
	}
	if in.IgnoreHeaders != IgnoreXAccelRedirect|IgnoreXAccelBuffering|IgnoreVary || own.IgnoreHeaders != IgnoreExpires {
		t.Errorf("proxy_ignore_headers %b %b", in.IgnoreHeaders, own.IgnoreHeaders)
	}
	if in.BufferSize <= 0 || own.BufferSize != 16<<10 || !in.PassRequestBody || !in.PassRequestHeaders || in.Method != nil ||
		in.InterceptErrors || cc(locs[0]).RecursiveErrorPages || in.IgnoreClientAbort || in.SocketKeepalive {
		t.Errorf("defaults: %+v", in)
	}
	if own.PassRequestBody || own.PassRequestHeaders || !own.InterceptErrors || !cc(locs[1]).RecursiveErrorPages || !own.IgnoreClientAbort ||
		!own.SocketKeepalive || own.Method.String() != "$arg_m" || own.Bind.Value.String() != "$remote_addr" {
		t.Errorf("own: %+v", own)
	}
	if off.Bind != nil || off.Method.String() != "PUT" || off.PassRequestBody {
		t.Errorf("nested: bind %+v method %v", off.Bind, off.Method)
	}
	if len(in.CookiePaths) != 1 || own.CookiePaths != nil || len(own.CookieDomains) != 2 || in.CookieDomains != nil {
		t.Errorf("cookies: %d %v %d", len(in.CookiePaths), own.CookiePaths, len(own.CookieDomains))
	}
	if r := own.CookieDomains[0]; r.Regex == nil || !r.Regex.MatchString("X.IN") || !r.Replacement.captures {
		t.Errorf("a domain regex ignores case and has captures: %+v", r)
	}
	if r := own.CookieDomains[1]; r.Pattern.String() != "Example.com" {
		t.Errorf("a domain's leading dot: %q", r.Pattern.String())
	}
	if p := u.Pass; !p.Unix || p.Host != "unix:/run/app.sock" || p.URI != "/v1/" || p.Group.Peers[0].Unix != "/run/app.sock" {
		t.Errorf("unix proxy_pass %+v", p)
	}
}

func TestUpstreamDirectivesErrors(t *testing.T) {
	tests := map[string]string{
		"http { server { location / {\nproxy_bind 10.0.0.1 sometimes;\n} } }":                       `invalid parameter "sometimes" in `,
		"http { server { location / {\nproxy_bind example.com;\n} } }":                              `invalid address "example.com" in `,
		"http { server { location / {\nproxy_bind 10.0.0.1:0;\n} } }":                               `invalid address "10.0.0.1:0" in `,
		"http { server { location / {\nproxy_bind 10.0.0.1;\nproxy_bind off;\n} } }":                `"proxy_bind" directive is duplicate`,
		"http { server { location / {\nproxy_method \"X Y\";\n} } }":                                `invalid value "X Y" in "proxy_method" directive, not a method`,
		"http { server { location / {\nproxy_cookie_path /a;\n} } }":                                `invalid parameter "/a" in `,
		"http { server { location / {\nproxy_cookie_path /a /b;\nproxy_cookie_path off;\n} } }":     `"proxy_cookie_path" directive is duplicate`,
		"http { server { location / {\nproxy_cookie_domain off;\nproxy_cookie_domain a b;\n} } }":   `"proxy_cookie_domain" directive is duplicate`,
		"http { server { location / {\nproxy_cookie_path ~(a /b;\n} } }":                            `pcre2_compile() failed: missing closing parenthesis in "(a"`,
		"http { server { location / {\nproxy_cookie_path ~(a) /b$2;\n} } }":                         `the regular expression has no capture $2`,
		"http { server { location / {\nproxy_cookie_path /a /b$1;\n} } }":                           `$1 without a regular expression`,
		"http { server { location / {\nproxy_ignore_headers X-Powered-By;\n} } }":                   `invalid value "X-Powered-By" in "proxy_ignore_headers" directive`,
		"http { server { location / {\nproxy_buffer_size 0;\n} } }":                                 `invalid value "0" in "proxy_buffer_size" directive`,
		"http { server { location / {\nproxy_pass http://unix:/run/a.sock:v1;\n} } }":               `the URI part after the socket path must start with "/"`,
		"http { server { location / {\nproxy_pass http://unix:;\n} } }":                             `no path in the unix domain socket in upstream "unix:"`,
		"http { server { location / {\nproxy_intercept_errors maybe;\n} } }":                        `proxy_intercept_errors`,
		"http { server { location / {\nrecursive_error_pages on;\nrecursive_error_pages on;\n} } }": `"recursive_error_pages" directive is duplicate`,
	}
	for src, want := range tests {
		_, err := loadConf(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
	cfg := mustConf(t, "http { server { location / {\nproxy_ignore_headers Vary vary;\n} } }")
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), `duplicate value "vary"`) {
		t.Errorf("warnings %v", cfg.Warnings)
	}
}

func TestParseBindAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1": "10.0.0.1:0", "10.0.0.1:5000": "10.0.0.1:5000", "::1": "[::1]:0", "[::1]": "[::1]:0",
		"[::1]:80": "[::1]:80", "10.0.0.1:0": "", "10.0.0.1:70000": "", "host:80": "", "[::1": "", "[::1]x": "",
		"fe80::1%eth0": "", "": "",
	} {
		a, ok := parseBindAddr(in)
		if got := a.String(); !ok && want != "" || ok && got != want {
			t.Errorf("%q: %v %v, want %q", in, a, ok, want)
		}
	}
}

func TestParseCookie(t *testing.T) {
	v := []byte(" a = 1 ;path=/x;; secure ;domain")
	var out []string
	for _, a := range parseCookie(nil, v) {
		s := string(v[a.name[0]:a.name[1]])
		if a.hasValue {
			s += "=" + string(v[a.value[0]:a.value[1]])
		}
		out = append(out, s)
	}
	if got := strings.Join(out, "|"); got != "a=1|path=/x||secure|domain" {
		t.Errorf("attributes %q", got)
	}
}

func TestUnsafeURI(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b?x=1":   "/a/b x=1",
		"/a%20b":     "/a b ",
		"/a/./b":     "/a/./b ",
		"/a/%2e%2e/": "",
		"/a/../b":    "",
		"..":         "",
		"../a":       "",
		"/a/..":      "",
		"/a%00":      "",
		"?x":         "",
		"":           "",
		"/%zz":       "/%zz ",
	} {
		p, a, ok := unsafeURI([]byte(in), nil)
		if got := string(p) + " " + string(a); !ok && want != "" || ok && got != want {
			t.Errorf("%q: %q %v, want %q", in, got, ok, want)
		}
	}
}
