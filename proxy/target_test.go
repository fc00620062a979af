package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/numaproxy/numaproxy/internal/dnstest"
)

// echoBackend is an HTTP server on ip:port that answers with what it saw: its own
// address, the request-target and Host.
func echoBackend(t *testing.T, ip string, port int) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", ln.Addr(), r.RequestURI, r.Host)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// get sends one request to the worker at addr with the given header fields.
func get(t *testing.T, addr, target string, fields ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+target, nil)
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "Host" {
			req.Host = fields[i+1]
		}
		req.Header.Set(fields[i], fields[i+1])
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProxyPassVariables: a proxy_pass made of variables goes to an upstream block
// it names, to an IP address as is, or to a name looked up with the location's
// resolver (a real DNS server on loopback), with nginx's statuses when it cannot.
func TestProxyPassVariables(t *testing.T) {
	port := freeBenchPort(t)
	b1 := echoBackend(t, "127.0.0.1", port)
	b2 := echoBackend(t, "127.0.0.2", port)
	blk := echoBackend(t, "127.0.0.1", 0)
	ns := dnstest.Start(t)
	ns.Set("app.test", 1, "127.0.0.1")
	ns.Fail("broken.test", dns.RcodeServerFailure)
	silent := dnstest.Start(t)
	silent.Silent(true)
	addr := "127.0.0.1:" + strconv.Itoa(freeBenchPort(t))
	startWorker(t, addr, `
  upstream block { server `+blk+`; }
  server {
    listen `+addr+`;
    resolver `+ns.Addr()+` ipv6=off;
    location / { proxy_pass http://$http_x_backend; }
    location /u/ { proxy_pass http://$http_x_backend$arg_u; }
    location /silent/ { resolver `+silent.Addr()+`; resolver_timeout 1s; proxy_pass http://$http_x_backend; }
  }
  server {
    listen `+addr+`;
    server_name noresolver;
    location / { proxy_pass http://$http_x_backend; }
  }`)
	p := strconv.Itoa(port)
	for _, tc := range []struct {
		target, backend, host string
		status                int
		body                  string
	}{
		{"/a/b?c=d", "app.test:" + p, "", 200, b1 + " /a/b?c=d app.test:" + p},
		{"/a", "APP.test:" + p, "", 200, b1 + " /a APP.test:" + p},
		{"/x?y", "127.0.0.2:" + p, "", 200, b2 + " /x?y 127.0.0.2:" + p},
		{"/x", "[::1]:1", "", 502, ""}, // nothing listens there
		{"/x", "block", "", 200, blk + " /x block"},
		{"/x", "Block", "", 200, blk + " /x Block"},
		{"/u/x?u=/other%20path?q", "app.test:" + p, "", 200, b1 + " /other%20path?q app.test:" + p},
		{"/u/x?u=?q", "app.test:" + p, "", 200, b1 + " /?q app.test:" + p},
		{"/x", "nosuch.test:" + p, "", 502, ""},
		{"/x", "broken.test:" + p, "", 502, ""},
		{"/x", "app.test:99999", "", 500, ""},
		{"/x", "", "", 500, ""},
		{"/x", "app.test:" + p, "noresolver", 502, ""},
		{"/x", "127.0.0.1:" + p, "noresolver", 200, b1 + " /x 127.0.0.1:" + p},
	} {
		fields := []string{"X-Backend", tc.backend}
		if tc.host != "" {
			fields = append(fields, "Host", tc.host)
		}
		status, body := get(t, addr, tc.target, fields...)
		if status != tc.status || (tc.body != "" && body != tc.body) {
			t.Errorf("%s via %q: %d %q, want %d %q", tc.target, tc.backend, status, body, tc.status, tc.body)
		}
	}

	// The answer is cached for its TTL (1 s), then the new address is followed.
	ns.Set("app.test", 1, "127.0.0.2")
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := get(t, addr, "/", "X-Backend", "app.test:"+p)
		if strings.HasPrefix(body, b2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %q after the TTL", body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A name server that never answers: 502 after resolver_timeout, as nginx.
	start := time.Now()
	status, _ := get(t, addr, "/silent/", "X-Backend", "app.test:"+p)
	if took := time.Since(start); status != 502 || took < 900*time.Millisecond || took > 5*time.Second {
		t.Errorf("silent name server: %d after %v", status, took)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ in, host, port, uri, unix, err string }{
		{in: "app", host: "app"},
		{in: "app:8080", host: "app", port: "8080"},
		{in: "app:8080/x?y", host: "app", port: "8080", uri: "/x?y"},
		{in: "app?y", host: "app", uri: "?y"},
		{in: "[::1]:81/z", host: "[::1]", port: "81", uri: "/z"},
		{in: "[::1]", host: "[::1]"},
		{in: "unix:/run/s.sock:/u", host: "/run/s.sock", unix: "/run/s.sock", uri: "/u"},
		{in: "unix:", err: "no path in the unix domain socket"},
		{in: "app:0", err: "invalid port"},
		{in: "app:x", err: "invalid port"},
		{in: "app:", err: "invalid port"},
		{in: ":80", err: "no host"},
		{in: "/x", err: "no host"},
		{in: "[::1", err: "invalid host"},
		{in: "[1.2.3.4]", err: "invalid IPv6 address"},
		{in: "[::1]x", err: "invalid host"},
	} {
		host, port, uri, unix, err := parseURL([]byte(tc.in))
		if string(host) != tc.host || string(port) != tc.port || string(uri) != tc.uri || string(unix) != tc.unix || err != tc.err {
			t.Errorf("%q: %q %q %q %q %q", tc.in, host, port, uri, unix, err)
		}
	}
	for s, ok := range map[string]bool{"1.2.3.4": true, "127.0.0.1": true, "1.2.3": false, "1.2.3.4.5": false, "256.1.1.1": false, "1..2.3": false, "a.b.c.d": false, "1.2.3.4:80": false} {
		if _, got := parseIPv4([]byte(s)); got != ok {
			t.Errorf("parseIPv4(%q) = %v", s, got)
		}
	}
}
