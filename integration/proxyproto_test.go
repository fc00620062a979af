package integration

import (
	"bufio"
	stdtls "crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/proxyproto"
)

// "listen ... proxy_protocol" against Debian's nginx on the same http block: raw
// headers of each kind, curl's --haproxy-protocol and HAProxy's send-proxy and
// send-proxy-v2 in front of both.

const ppVars = `$remote_addr|$proxy_protocol_addr|$proxy_protocol_port|$proxy_protocol_server_addr|$proxy_protocol_server_port`

// ppExchange sends parts (with a pause between them) and a request on one
// connection and returns all that comes back until the close.
func ppExchange(t *testing.T, addr string, pause time.Duration, parts ...[]byte) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for i, p := range parts {
		if i > 0 && pause > 0 {
			time.Sleep(pause)
		}
		if _, err := c.Write(p); err != nil {
			return "write error: " + err.Error()
		}
	}
	data, err := io.ReadAll(c)
	if err != nil && len(data) == 0 {
		return "read error"
	}
	return string(data)
}

// ppBody is the body of a response, "" when none came.
func ppBody(raw string) string {
	if i := strings.Index(raw, "\r\n\r\n"); i >= 0 && strings.HasPrefix(raw, "HTTP/") {
		return raw[i+4:]
	}
	return ""
}

func v2(t *testing.T, src, dst string, tlvs ...byte) []byte {
	t.Helper()
	b, err := proxyproto.AppendV2(nil, netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), tlvs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// v2Unix is a version 2 PROXY header for AF_UNIX stream sockets.
func v2Unix(src, dst string) []byte {
	b := []byte("\r\n\r\n\x00\r\nQUIT\n\x21\x31\x00\xd8")
	p := make([]byte, 216)
	copy(p, src)
	copy(p[108:], dst)
	return append(b, p...)
}

func TestProxyProtocolListenAgainstNginx(t *testing.T) {
	np, ng := addrFor(t), addrFor(t)
	body := func(addr string) string {
		return "server { listen " + addr + " proxy_protocol; location / { return 200 \"" + ppVars + "\"; } }"
	}
	in := startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	req := []byte("GET / HTTP/1.0\r\nHost: a\r\n\r\n")
	tlv := []byte{0x02, 0x00, 0x05, 'a', '.', 't', 'e', 's', 't', 0xe0, 0x00, 0x01, 0x7f} // authority, and a custom one
	cases := []struct {
		name  string
		parts [][]byte
		want  string // the body; "" when the connection is closed without a response
	}{
		{"v1-tcp4", [][]byte{[]byte("PROXY TCP4 192.0.2.1 192.0.2.2 1234 80\r\n"), req}, "127.0.0.1|192.0.2.1|1234|192.0.2.2|80"},
		{"v1-tcp6", [][]byte{[]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1234 443\r\n"), req}, "127.0.0.1|2001:db8::1|1234|2001:db8::2|443"},
		{"v1-unknown", [][]byte{[]byte("PROXY UNKNOWN\r\n"), req}, "127.0.0.1||||"},
		{"v1-one-write", [][]byte{append([]byte("PROXY TCP4 192.0.2.1 192.0.2.2 1234 80\r\n"), req...)}, "127.0.0.1|192.0.2.1|1234|192.0.2.2|80"},
		{"v2-tcp4-tlvs", [][]byte{v2(t, "192.0.2.7:5555", "192.0.2.8:8080", tlv...), req}, "127.0.0.1|192.0.2.7|5555|192.0.2.8|8080"},
		{"v2-tcp6", [][]byte{v2(t, "[2001:db8::7]:5555", "[2001:db8::8]:8443"), req}, "127.0.0.1|2001:db8::7|5555|2001:db8::8|8443"},
		{"v2-local", [][]byte{[]byte("\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"), req}, "127.0.0.1||||"},
		{"v2-unix", [][]byte{v2Unix("/run/a.sock", "/run/b.sock"), req}, "127.0.0.1||||"},
		{"no-header", [][]byte{req}, ""},
		{"garbage", [][]byte{[]byte("PROXY TCP4 nonsense\r\n"), req}, ""},
		{"v1-bad-address", [][]byte{[]byte("PROXY TCP4 192.0.2.1 192.0.2.2 99999 80\r\n"), req}, ""},
		{"v2-bad-version", [][]byte{[]byte("\r\n\r\n\x00\r\nQUIT\n\x31\x11\x00\x0c"), make([]byte, 12), req}, ""},
	}
	for _, tc := range cases {
		got := ppBody(ppExchange(t, np, 0, tc.parts...))
		want := ppBody(ppExchange(t, ng, 0, tc.parts...))
		if got != tc.want || want != tc.want {
			t.Errorf("%s: numaproxy %q, nginx %q, want %q", tc.name, got, want, tc.want)
		}
	}
	// A header split across reads (nginx 1.22 takes it from the first read only
	// and closes the connection: here it is waited for).
	hdr := []byte("PROXY TCP4 192.0.2.1 192.0.2.2 1234 80\r\n")
	if got := ppBody(ppExchange(t, np, 100*time.Millisecond, hdr[:9], hdr[9:20], hdr[20:], req)); got != "127.0.0.1|192.0.2.1|1234|192.0.2.2|80" {
		t.Errorf("split v1: %q", got)
	}
	h2 := v2(t, "192.0.2.7:5555", "192.0.2.8:8080", tlv...)
	if got := ppBody(ppExchange(t, np, 100*time.Millisecond, h2[:5], h2[5:17], h2[17:], req)); got != "127.0.0.1|192.0.2.7|5555|192.0.2.8|8080" {
		t.Errorf("split v2: %q", got)
	}
	in.waitLog("broken header")
	in.checkNoPanic()
}

// TestProxyProtocolTimeout: a connection that sends no header is closed after
// proxy_protocol_timeout (nginx's http server uses client_header_timeout; so does
// numaproxy without the directive).
func TestProxyProtocolTimeout(t *testing.T) {
	addr := addrFor(t)
	startHTTP(t, "proxy_protocol_timeout 500ms; server { listen "+addr+" proxy_protocol; location / { return 200 ok; } }", addr)
	c := dial(t, addr)
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 10)); err == nil {
		t.Fatal("data without a header")
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 3*time.Second {
		t.Errorf("closed after %v, want ~500ms", d)
	}
}

// TestProxyProtocolCurl: curl's --haproxy-protocol (v1 with curl's own addresses)
// to numaproxy and nginx.
func TestProxyProtocolCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	np, ng := addrFor(t), addrFor(t)
	body := func(addr string) string {
		return "server { listen " + addr + " proxy_protocol; location / { return 200 \"" + ppVars + "\"; } }"
	}
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	for _, addr := range []string{np, ng} {
		out, err := exec.Command(curl, "-s", "--haproxy-protocol", "http://"+addr+"/").CombinedOutput()
		f := strings.Split(string(out), "|")
		if err != nil || len(f) != 5 || f[0] != "127.0.0.1" || f[1] != "127.0.0.1" || f[3] != "127.0.0.1" || f[4] != strings.Split(addr, ":")[1] {
			t.Errorf("%s: %q %v", addr, out, err)
		}
	}
}

// TestProxyProtocolHAProxy: HAProxy sending send-proxy and send-proxy-v2 (in
// TCP mode) to numaproxy and to nginx; both see the client's address in
// $proxy_protocol_addr, and the same one.
func TestProxyProtocolHAProxy(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("no haproxy")
	}
	np, ng := addrFor(t), addrFor(t)
	body := func(addr string) string {
		return "server { listen " + addr + " proxy_protocol; location / { return 200 \"" + ppVars + "\"; } }"
	}
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	fronts := map[string]string{}
	cfg := "global\n  log stderr local0\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 5s\n  timeout server 5s\n"
	for _, v := range []string{"send-proxy", "send-proxy-v2"} {
		for name, be := range map[string]string{"numaproxy": np, "nginx": ng} {
			f := addrFor(t)
			fronts[v+" "+name] = f
			cfg += fmt.Sprintf("listen l-%s-%s\n  bind %s\n  server s %s %s\n", v, name, f, be, v)
		}
	}
	startHAProxyAt(t, haproxy, cfg, fronts)
	got := map[string]string{}
	for k, f := range fronts {
		c := dial(t, f)
		local := c.LocalAddr().(*net.TCPAddr)
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		raw, _ := io.ReadAll(c)
		c.Close()
		b := ppBody(string(raw))
		f := strings.Split(b, "|")
		if len(f) != 5 || f[1] != "127.0.0.1" || f[2] != fmt.Sprint(local.Port) {
			t.Errorf("%s: %q, want the client 127.0.0.1:%d", k, raw, local.Port)
			continue
		}
		got[k] = f[0] + "|" + f[1] + "|" + f[3] // the ports differ by run
	}
	for _, v := range []string{"send-proxy", "send-proxy-v2"} {
		if got[v+" numaproxy"] != got[v+" nginx"] {
			t.Errorf("%s: numaproxy %q, nginx %q", v, got[v+" numaproxy"], got[v+" nginx"])
		}
	}
}

// startHAProxyAt runs haproxy on cfg in the foreground until the test ends and
// waits until each front accepts.
func startHAProxyAt(t *testing.T, bin, cfg string, fronts map[string]string) {
	t.Helper()
	dir := writeTree(t, map[string]string{"haproxy.cfg": cfg})
	cmd := exec.Command(bin, "-f", dir+"/haproxy.cfg", "-db")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for _, f := range fronts {
		waitFor(t, "haproxy on "+f, 10*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", f, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
}

// TestProxyProtocolSSL: with "listen ... ssl proxy_protocol" the header comes
// before the TLS handshake, in numaproxy as in nginx.
func TestProxyProtocolSSL(t *testing.T) {
	f := newTLSFiles(t)
	np, ng := addrFor(t), addrFor(t)
	body := func(addr string) string {
		return fmt.Sprintf("server { listen %s ssl proxy_protocol; server_name a.test; ssl_certificate %s; ssl_certificate_key %s;\n"+
			"location / { return 200 \"$scheme|%s\"; } }", addr, f.aEC, f.aECKey, ppVars)
	}
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	for _, addr := range []string{np, ng} {
		raw, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		raw.SetDeadline(time.Now().Add(5 * time.Second))
		raw.Write(v2(t, "198.51.100.4:4000", "198.51.100.5:443"))
		c := stdtls.Client(raw, &stdtls.Config{ServerName: "a.test", RootCAs: f.pool})
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: a.test\r\n\r\n")
		data, _ := io.ReadAll(c)
		c.Close()
		if got := ppBody(string(data)); got != "https|127.0.0.1|198.51.100.4|4000|198.51.100.5|443" {
			t.Errorf("%s: %q", addr, data)
		}
	}
}

// TestProxyProtocolToUpstream: "proxy_protocol on" puts a v1 header with the
// client's address and the address it reached before the request on each upstream
// connection; nginx receiving it ("listen ... proxy_protocol") sees the client.
// Such connections are not kept alive for other requests.
func TestProxyProtocolToUpstream(t *testing.T) {
	first := make(chan string, 4)
	raw := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		first <- line
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	ngAddr := addrFor(t)
	startNginx(t, "server { listen "+ngAddr+" proxy_protocol; location / { return 200 \""+ppVars+"\"; } }", ngAddr)
	addr := addrFor(t)
	startHTTP(t, "upstream raw { server "+raw.Addr+"; keepalive 4; }\n"+
		"server { listen "+addr+"; proxy_protocol on; proxy_http_version 1.1; proxy_set_header Connection \"\";\n"+
		"location /raw { proxy_pass http://raw; }\n"+
		"location /ng { proxy_pass http://"+ngAddr+"; } }", addr)
	cl := newClient(t, addr)
	local := cl.c.LocalAddr().(*net.TCPAddr)
	for i := 0; i < 2; i++ {
		cl.send("GET /raw HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, body := cl.read("GET"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		select {
		case line := <-first:
			want := fmt.Sprintf("PROXY TCP4 127.0.0.1 127.0.0.1 %d %s\r\n", local.Port, strings.Split(addr, ":")[1])
			if line != want {
				t.Errorf("upstream's first line %q, want %q", line, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no upstream connection")
		}
	}
	if n := raw.accepted.Load(); n != 2 {
		t.Errorf("%d upstream connections for 2 requests, want 2 (not kept alive)", n)
	}
	cl.send("GET /ng HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, body := cl.read("GET")
	if want := fmt.Sprintf("127.0.0.1|127.0.0.1|%d|127.0.0.1|%s", local.Port, strings.Split(addr, ":")[1]); resp.StatusCode != 200 || body != want {
		t.Errorf("nginx behind: %d %q, want %q", resp.StatusCode, body, want)
	}
}

// TestRealIPFromProxyProtocol: real_ip_header proxy_protocol makes the PROXY
// header's source the client address ($remote_addr, $remote_port,
// X-Forwarded-For) when the peer is trusted, and not otherwise; $realip_remote_addr
// keeps the peer. Compared with nginx on the same configuration (at the server
// level: a location's realip runs in the preaccess phase, after return).
func TestRealIPFromProxyProtocol(t *testing.T) {
	np, ng := addrFor(t), addrFor(t)
	body := func(addr string) string {
		return `
  real_ip_header proxy_protocol;
  server {
    listen ` + addr + ` proxy_protocol;
    set_real_ip_from 127.0.0.1;
    location /trusted { return 200 "$remote_addr|$remote_port|$realip_remote_addr|$proxy_add_x_forwarded_for"; }
  }
  server {
    listen ` + addr + ` proxy_protocol;
    server_name untrusted;
    set_real_ip_from 10.0.0.0/8;
    location /untrusted { return 200 "$remote_addr|$realip_remote_addr"; }
  }`
	}
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	hdr := []byte("PROXY TCP4 192.0.2.1 192.0.2.2 1234 80\r\n")
	for path, want := range map[string]string{
		"/trusted":   "192.0.2.1|1234|127.0.0.1|192.0.2.1",
		"/untrusted": "127.0.0.1|127.0.0.1",
	} {
		req := []byte("GET " + path + " HTTP/1.0\r\nHost: " + path[1:] + "\r\n\r\n")
		got := ppBody(ppExchange(t, np, 0, hdr, req))
		theirs := ppBody(ppExchange(t, ng, 0, hdr, req))
		if got != want || theirs != want {
			t.Errorf("%s: numaproxy %q, nginx %q, want %q", path, got, theirs, want)
		}
	}
}
