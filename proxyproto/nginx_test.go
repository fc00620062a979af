package proxyproto

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// Differential tests: Debian's nginx 1.22 with "listen ... proxy_protocol", the
// specification, and a Layer take the same bytes; they must take and refuse
// the same headers and find the same addresses in them.

// nginxVars answers a request head as nginx's
// return 200 "$proxy_protocol_addr:$proxy_protocol_port $proxy_protocol_server_addr:$proxy_protocol_server_port"
// does, then closes.
func nginxVars() *funcHandler {
	h := reporter()
	h.data = func(c eventloop.Conn, b []byte) {
		type state struct{ buf []byte }
		st, _ := c.Context().(*state)
		if st == nil {
			st = &state{}
			c.SetContext(st)
		}
		st.buf = append(st.buf, b...)
		if !bytes.Contains(st.buf, []byte("\r\n\r\n")) {
			return
		}
		h := HeaderOf(c)
		var body []byte
		body, _ = h.AppendVar(body, VarAddr)
		body = append(body, ':')
		body, _ = h.AppendVar(body, VarPort)
		body = append(body, ' ')
		body, _ = h.AppendVar(body, VarServerAddr)
		body = append(body, ':')
		body, _ = h.AppendVar(body, VarServerPort)
		fmt.Fprintf(writer{c}, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		c.Close()
	}
	h.open = nil
	return h
}

type nginxServer struct {
	dir  string
	addr string
}

// startNginx runs nginx in the foreground, without a master process, with a
// proxy_protocol listener answering with the header's addresses.
func startNginx(t *testing.T) *nginxServer {
	t.Helper()
	bin := binary(t, "nginx", "/usr/sbin/nginx")
	dir := t.TempDir()
	addr := freeAddr(t, "tcp4", "127.0.0.1")
	cfg := fmt.Sprintf(`daemon off;
master_process off;
user root;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen %[2]s proxy_protocol;
        location / {
            return 200 "$proxy_protocol_addr:$proxy_protocol_port $proxy_protocol_server_addr:$proxy_protocol_server_port";
        }
    }
}
`, dir, addr)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log"))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	waitFor(t, "nginx listening on "+addr, func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s%s", out, log)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return &nginxServer{dir: dir, addr: addr}
}

func (n *nginxServer) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	return string(b)
}

// ask sends parts (pausing between them) and returns the body of the answer,
// or "refused" when the server closed without one.
func ask(t *testing.T, addr string, pause time.Duration, parts ...[]byte) string {
	t.Helper()
	out, _ := exchange(t, addr, pause, parts...)
	if out == "" {
		return "refused"
	}
	_, body, ok := strings.Cut(out, "\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 200 ") || !ok {
		return "answer " + strconv.Quote(out)
	}
	return body
}

func TestNginxDifferential(t *testing.T) {
	ng := startNginx(t)
	// nginx's HTTP server reads the header from its client_header_buffer_size
	// (1k by default): the wiring gives the layer that bound.
	srv := startServer(t, nginxVars(), Options{MaxHeader: 1024, Timeout: time.Second}, 1)
	pad := func(total int, base []byte) []byte { // a NOOP TLV making a v2 header total bytes long
		n := total - len(base) - 3
		b := append([]byte(nil), base...)
		b = append(b, TypeNoop, byte(n>>8), byte(n))
		b = append(b, make([]byte, n)...)
		l := len(b) - 16
		b[14], b[15] = byte(l>>8), byte(l)
		return b
	}
	same := []struct {
		name   string
		header []byte
		want   string
	}{
		{"v1 tcp4", []byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"), "192.0.2.1:56324 198.51.100.2:443"},
		{"v1 tcp6", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n"), "2001:db8::1:1 2001:db8::2:65535"},
		{"v1 ports with leading zeros", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 0080 00\r\n"), "1.2.3.4:80 5.6.7.8:"},
		{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), ": :"},
		{"v1 unknown with addresses", []byte("PROXY UNKNOWN 1.2.3.4 5.6.7.8 1 2\r\n"), ": :"},
		{"http request", nil, "refused"},
		{"lower case", []byte("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), "refused"},
		{"v1 tcp5", []byte("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n"), "refused"},
		{"v1 port too large", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 80 65536\r\n"), "refused"},
		{"v1 negative port", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 -1 80\r\n"), "refused"},
		{"v1 empty port", []byte("PROXY TCP4 1.2.3.4 5.6.7.8  80\r\n"), "refused"},
		{"v1 LF without CR", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 80\n"), "refused"},
		{"v1 extra field", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 80 9\r\n"), "refused"},
		{"v1 zone", []byte("PROXY TCP6 fe80::1%eth0 ::1 1 80\r\n"), "refused"},
		{"v1 host name", []byte("PROXY TCP4 localhost 5.6.7.8 1 80\r\n"), "refused"},
		{"v2 tcp4", v2(0x21, 0x11, inet4Addrs), "192.0.2.1:56324 198.51.100.2:443"},
		{"v2 tcp6", v2(0x21, 0x21, inet6Addrs), "2001:db8::1:1 2001:db8::2:65535"},
		{"v2 tcp6 mapped", v2(0x21, 0x21, cat([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1}, inet6Addrs[16:])),
			"::ffff:192.0.2.1:1 2001:db8::2:65535"},
		{"v2 local", v2(0x20, 0x00), ": :"},
		{"v2 local with addresses", v2(0x20, 0x11, inet4Addrs), ": :"},
		{"v2 local with short addresses", v2(0x20, 0x11, inet4Addrs[:4]), ": :"},
		{"v2 unspec", v2(0x21, 0x00), ": :"},
		{"v2 unix", v2(0x21, 0x31, unixAddrs("/run/c.sock", "/run/s.sock")), ": :"},
		{"v2 udp4", v2(0x21, 0x12, inet4Addrs), ": :"},
		{"v2 unknown family", v2(0x21, 0x41, inet4Addrs), ": :"},
		{"v2 unknown command", v2(0x2F, 0x11, inet4Addrs), ": :"},
		{"v2 TLVs", v2(0x21, 0x11, inet4Addrs, tlv(TypeALPN, "h2"), tlv(TypeAuthority, "a.example")), "192.0.2.1:56324 198.51.100.2:443"},
		{"v2 broken TLV", v2(0x21, 0x11, inet4Addrs, []byte{TypeALPN, 0, 9, 'h'}), "192.0.2.1:56324 198.51.100.2:443"},
		{"v2 tcp4 short addresses", v2(0x21, 0x11, inet4Addrs[:11]), "refused"},
		{"v2 tcp6 with tcp4 addresses", v2(0x21, 0x21, inet4Addrs), "refused"},
		{"v2 version 1", v2(0x11, 0x11, inet4Addrs), "refused"},
		{"v2 version 3", v2(0x31, 0x11, inet4Addrs), "refused"},
		{"v2 bad signature", cat(sig[:7], []byte("quit\n"), []byte{0x21, 0x11, 0, 12}, inet4Addrs), "refused"},
		{"v2 of 1024 bytes", pad(1024, v2(0x21, 0x11, inet4Addrs)), "192.0.2.1:56324 198.51.100.2:443"},
		{"v2 of 1025 bytes", pad(1025, v2(0x21, 0x11, inet4Addrs)), "refused"},
		// nginx refuses at once (its read ends inside the header); the layer
		// waits for the rest, then times out.
		{"v2 longer than sent", cat(sig, []byte{0x21, 0x11, 0, 100}, inet4Addrs), "refused"},
		{"tls hello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}, "refused"},
	}
	for _, tc := range same {
		t.Run(tc.name, func(t *testing.T) {
			in := cat(tc.header, []byte(request))
			gotNginx, got := ask(t, ng.addr, 0, in), ask(t, srv.addrs[0], 0, in)
			if gotNginx != tc.want {
				t.Errorf("nginx: %s, want %s", gotNginx, tc.want)
			}
			if got != gotNginx {
				t.Errorf("layer: %s, nginx: %s", got, gotNginx)
			}
		})
	}

	// The same log lines for what both refuse.
	for _, line := range []string{`broken header: "GET / HTTP/1.0`, "unknown PROXY protocol version: 3", "unknown PROXY protocol version: 1"} {
		if !strings.Contains(ng.errorLog(), line) {
			t.Errorf("nginx did not log %s:\n%s", line, ng.errorLog())
		}
		if !srv.log.has(line) {
			t.Errorf("the layer did not log %s:\n%s", line, srv.log)
		}
	}

	// Where they differ, on purpose; the README says so.
	differ := []struct {
		name         string
		parts        [][]byte
		nginx, layer string
	}{
		// nginx 1.22 parses what its first read got.
		{"header split across reads", [][]byte{[]byte("PROXY TCP4 192.0.2.1 198.51"), []byte(".100.2 56324 443\r\n" + request)},
			"refused", "192.0.2.1:56324 198.51.100.2:443"},
		{"v2 split across reads", [][]byte{v2(0x21, 0x11, inet4Addrs)[:20], cat(v2(0x21, 0x11, inet4Addrs)[20:], []byte(request))},
			"refused", "192.0.2.1:56324 198.51.100.2:443"},
		// nginx checks only the characters of v1 addresses.
		{"v1 short ipv4", [][]byte{[]byte("PROXY TCP4 1.2.3 5.6.7.8 1 80\r\n" + request)}, "1.2.3:1 5.6.7.8:80", "refused"},
		{"v1 ipv6 under tcp4", [][]byte{[]byte("PROXY TCP4 ::1 ::2 1 80\r\n" + request)}, "::1:1 ::2:80", "refused"},
		{"v1 empty address", [][]byte{[]byte("PROXY TCP4  5.6.7.8 1 80\r\n" + request)}, ":1 5.6.7.8:80", "refused"},
		// nginx gives v1 addresses as sent, the layer as IP addresses.
		{"v1 non-canonical", [][]byte{[]byte("PROXY TCP6 2001:DB8::0001 ::2 1 80\r\n" + request)}, "2001:DB8::0001:1 ::2:80", "2001:db8::1:1 ::2:80"},
		// nginx does not bound "PROXY UNKNOWN" lines; the spec says 107 bytes.
		{"v1 unknown of 120 bytes", [][]byte{[]byte("PROXY UNKNOWN " + strings.Repeat("x", 104) + "\r\n" + request)}, ": :", "refused"},
	}
	for _, tc := range differ {
		t.Run(tc.name, func(t *testing.T) {
			if got := ask(t, ng.addr, 50*time.Millisecond, tc.parts...); got != tc.nginx {
				t.Errorf("nginx: %s, want %s", got, tc.nginx)
			}
			if got := ask(t, srv.addrs[0], 50*time.Millisecond, tc.parts...); got != tc.layer {
				t.Errorf("layer: %s, want %s", got, tc.layer)
			}
		})
	}
}
