package integration

import (
	"strings"
	"testing"
)

// TestProxyRouting checks server_name and location selection end to end, in nginx's
// documented order, with URI normalisation before matching.
func TestProxyRouting(t *testing.T) {
	be := newBackend(t, nil)
	addr := addrFor(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	startHTTP(t, `
  server {
    listen `+addr+`;
    server_name first.test;
    return 200 "first";
  }
  server {
    listen `+addr+` default_server;
    server_name default.test;
    return 200 "default";
  }
  server {
    listen `+addr+`;
    server_name example.com;
    location = / { return 200 "A"; }
    location / { return 200 "B"; }
    location /documents/ { return 200 "C"; }
    location ^~ /images/ { return 200 "D"; }
    location ~* \.(gif|jpg|jpeg)$ { return 200 "E"; }
    location ~ /x/ { return 200 "F1"; }
    location ~ /x/y { return 200 "F2"; }
    location /n/ {
      location ~ \.php$ { return 200 "N-php"; }
      location /n/deep/ { return 200 "N-deep"; }
      return 200 "N";
    }
    location ~ \.php$ { return 200 "PHP"; }
    location /u/ { return 200 "$uri|$request_uri|$args"; }
    location /app/ { proxy_pass http://`+be.Addr+`; }
    location /noproxy/ { return 200 "noproxy"; }
  }
  server {
    listen `+addr+`;
    server_name *.example.com;
    return 200 "lead-wild";
  }
  server {
    listen `+addr+`;
    server_name www.example.*;
    return 200 "trail-wild";
  }
  server {
    listen `+addr+`;
    server_name ~^(api|app)\d+\.test$;
    return 200 "regex";
  }`, addr)

	c := keepAliveClient(nil)
	url := "http://" + addr
	t.Run("server_name", func(t *testing.T) {
		for _, tc := range []struct{ host, want string }{
			{"first.test", "first"},
			{"default.test", "default"},
			{"FIRST.test.", "first"},
			{"first.test:" + port, "first"},
			{"sub.example.com", "lead-wild"},
			{"a.b.example.com", "lead-wild"},
			{"www.example.com", "lead-wild"}, // a leading wildcard wins over a trailing one
			{"www.example.org", "trail-wild"},
			{"api42.test", "regex"},
			{"api.test", "default"},
			{"unknown.test", "default"},
			{"203.0.113.9", "default"},
		} {
			if _, body := get(t, c, url+"/", "Host", tc.host); body != tc.want {
				t.Errorf("Host %q: %q, want %q", tc.host, body, tc.want)
			}
		}
		// HTTP/1.0 without Host: the default server.
		raw, err := roundTripRaw(t, addr, "GET / HTTP/1.0\r\n\r\n")
		if err != nil || !strings.HasSuffix(raw, "\r\n\r\ndefault") {
			t.Errorf("no Host: %q %v", raw, err)
		}
		// The absolute-form target's authority overrides Host.
		raw, err = roundTripRaw(t, addr, "GET http://first.test/ HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
		if err != nil || !strings.HasSuffix(raw, "\r\n\r\nfirst") {
			t.Errorf("absolute form: %q %v", raw, err)
		}
	})

	t.Run("locations", func(t *testing.T) {
		for _, tc := range []struct{ path, want string }{
			{"/", "A"},
			{"/index.html", "B"},
			{"/documents/document.html", "C"},
			{"/images/1.gif", "D"},
			{"/documents/1.jpg", "E"},
			{"/documents/1.JPG", "E"},
			{"/x/y", "F1"},
			{"/x/", "F1"},
			{"/n/a", "N"},
			{"/n/a.php", "N-php"},
			{"/n/deep/a", "N-deep"},
			{"/n/deep/a.php", "N-php"},
			{"/b.php", "PHP"},
			// Normalisation before matching.
			{"/documents/%2e%2e/images/1.gif", "D"},
			{"//images///a", "D"},
			{"/documents/./x", "C"},
			{"/%64ocuments/x", "C"},
			{"/u/a/../b//c/./d?q=1", "/u/b/c/d|/u/a/../b//c/./d?q=1|q=1"},
			{"/u/%7Euser", "/u/~user|/u/%7Euser|"},
		} {
			if _, body := get(t, c, url+tc.path, "Host", "example.com"); body != tc.want {
				t.Errorf("%s: %q, want %q", tc.path, body, tc.want)
			}
		}
		for _, path := range []string{"/%2e%2e/x", "/../x", "/a/%2e%2e/%2e%2e/x"} {
			if resp, _ := get(t, c, url+path, "Host", "example.com"); resp.StatusCode != 400 {
				t.Errorf("%s: %d, want 400", path, resp.StatusCode)
			}
		}
	})

	t.Run("auto redirect", func(t *testing.T) {
		resp, _ := get(t, c, url+"/app?a=1", "Host", "example.com")
		if resp.StatusCode != 301 || resp.Header.Get("Location") != "http://example.com:"+port+"/app/?a=1" {
			t.Fatalf("%d Location %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		if be.count() != 0 {
			t.Fatal("the redirect reached the upstream")
		}
		// Only for proxying locations.
		if _, body := get(t, c, url+"/noproxy", "Host", "example.com"); body != "B" {
			t.Fatalf("/noproxy: %q", body)
		}
	})
}
