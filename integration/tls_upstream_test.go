package integration

import (
	"bufio"
	"bytes"
	stdtls "crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/tls/tlstest"
)

// tlsBackend is an https upstream that records each connection's handshake.
type tlsBackend struct {
	Addr  string
	conns atomic.Int64
	mu    sync.Mutex
	seen  []stdtls.ConnectionState
}

func newTLSBackend(t *testing.T, f *tlsFiles, cfg *stdtls.Config) *tlsBackend {
	t.Helper()
	cert, err := stdtls.LoadX509KeyPair(f.aEC, f.aECKey)
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		cfg = &stdtls.Config{}
	}
	cfg.Certificates = []stdtls.Certificate{cert}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &tlsBackend{Addr: ln.Addr().String()}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "POST" { // echo, for bodies both ways
				// Full duplex: else net/http stops reading the body once the
				// response started (the proxy streams a chunked body).
				http.NewResponseController(w).EnableFullDuplex()
				w.Header().Set("Content-Type", "application/octet-stream")
				io.Copy(w, r.Body)
				return
			}
			b.mu.Lock()
			b.seen = append(b.seen, *r.TLS)
			b.mu.Unlock()
			cn := ""
			if len(r.TLS.PeerCertificates) > 0 {
				cn = r.TLS.PeerCertificates[0].Subject.CommonName
			}
			fmt.Fprintf(w, "host=%s sni=%s version=%x resumed=%v client=%s", r.Host, r.TLS.ServerName, r.TLS.Version, r.TLS.DidResume, cn)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				b.conns.Add(1)
			}
		},
		TLSConfig: cfg,
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return b
}

// TestTLSUpstream: proxy_pass https:// with the proxy_ssl_* directives, seen
// from a Go https upstream: SNI, verification, client certificate, versions,
// session reuse, keep-alive, and a server that never answers the handshake.
func TestTLSUpstream(t *testing.T) {
	f := newTLSFiles(t)
	client, err := f.ca.IssueClient(tlstest.ClientOptions{RawSubject: cnSubject(t, "proxy-client")})
	if err != nil {
		t.Fatal(err)
	}
	clientCrt, clientKey, err := client.WriteFiles(f.dir, "proxy-client")
	if err != nil {
		t.Fatal(err)
	}
	be := newTLSBackend(t, f, &stdtls.Config{ClientAuth: stdtls.VerifyClientCertIfGiven, ClientCAs: f.pool})
	_, bePort, _ := strings.Cut(be.Addr, ":")
	// A server that takes connections and never speaks.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`
  upstream kept { server %[1]s; keepalive 4; }
  server {
    listen %[2]s;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location /plain { proxy_pass https://%[1]s; }
    location /sni { proxy_pass https://%[1]s; proxy_ssl_server_name on; proxy_ssl_name a.test; }
    location /verify { proxy_pass https://%[1]s; proxy_ssl_verify on; proxy_ssl_trusted_certificate %[3]s; proxy_ssl_name a.test; }
    location /wrongname { proxy_pass https://%[1]s; proxy_ssl_verify on; proxy_ssl_trusted_certificate %[3]s; proxy_ssl_name b.test; }
    location /untrusted { proxy_pass https://%[1]s; proxy_ssl_verify on; proxy_ssl_trusted_certificate %[4]s; proxy_ssl_name a.test; }
    location /mtls { proxy_pass https://%[1]s; proxy_ssl_certificate %[5]s; proxy_ssl_certificate_key %[6]s; }
    location /tls12 { proxy_pass https://%[1]s; proxy_ssl_protocols TLSv1.2; }
    location /noreuse { proxy_pass https://%[1]s; proxy_ssl_session_reuse off; }
    location /kept { proxy_pass https://kept; }
    location /echo { proxy_pass https://kept; client_max_body_size 8m; }
    location /echo-unbuffered { proxy_pass https://kept; client_max_body_size 8m; proxy_buffering off; }
    location /mute { proxy_pass https://%[7]s; proxy_connect_timeout 1s; }
  }`, be.Addr, addr, f.caFile, f.b, clientCrt, clientKey, mute.Addr().String()), addr)
	c := &http.Client{Timeout: 10 * time.Second}
	fetch := func(path string) (int, string) {
		t.Helper()
		resp, body := get(t, c, "http://"+addr+path)
		return resp.StatusCode, body
	}
	for _, tc := range []struct {
		path, want string
		status     int
	}{
		{"/plain", "host=127.0.0.1:" + bePort + " sni= version=304", 200},
		{"/sni", "sni=a.test ", 200},
		{"/verify", "sni= ", 200},
		{"/wrongname", "", 502},
		{"/untrusted", "", 502},
		{"/mtls", "client=proxy-client", 200},
		{"/tls12", "version=303", 200},
	} {
		status, body := fetch(tc.path)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want %d and %q", tc.path, status, body, tc.status, tc.want)
		}
	}
	// Sessions resume on the next connection (each location keeps its own),
	// unless proxy_ssl_session_reuse is off.
	for _, tc := range []struct{ path, want string }{{"/plain", "resumed=true"}, {"/tls12", "resumed=true"}, {"/noreuse", "resumed=false"}, {"/noreuse", "resumed=false"}} {
		if _, body := fetch(tc.path); !strings.Contains(body, tc.want) {
			t.Errorf("%s again: %q, want %s", tc.path, body, tc.want)
		}
	}
	// Keep-alive: ten requests, one TLS connection.
	before := be.conns.Load()
	for range 10 {
		if status, _ := fetch("/kept"); status != 200 {
			t.Fatalf("/kept: %d", status)
		}
	}
	if n := be.conns.Load() - before; n != 1 {
		t.Errorf("ten requests to a keepalive https upstream took %d connections, want 1", n)
	}
	// Bodies both ways through the TLS upstream connection: 3 MiB up, echoed
	// down, buffered and streamed.
	payload := bytes.Repeat([]byte("0123456789abcdef"), 3<<16)
	for _, path := range []string{"/echo", "/echo-unbuffered", "/echo-unbuffered?chunked"} {
		var body io.Reader = bytes.NewReader(payload)
		if strings.HasSuffix(path, "chunked") {
			body = io.MultiReader(body) // no length: sent chunked
		}
		resp, err := c.Post("http://"+addr+path, "application/octet-stream", body)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, payload) {
			t.Errorf("%s: status %d, %d bytes back of %d (%v)", path, resp.StatusCode, len(got), len(payload), err)
		}
	}
	// A handshake the server never answers ends with proxy_connect_timeout: 504.
	start := time.Now()
	if status, _ := fetch("/mute"); status != 504 {
		t.Errorf("/mute: %d, want 504", status)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 5*time.Second {
		t.Errorf("/mute answered after %v, want about proxy_connect_timeout (1s)", d)
	}
}

// cnSubject is the DER subject CN=cn.
func cnSubject(t *testing.T, cn string) []byte {
	t.Helper()
	der, err := asn1.Marshal(pkix.Name{CommonName: cn}.ToRDNSequence())
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestTLSUpstreamProxyProtocol: "proxy_protocol on" toward an https upstream
// sends the PROXY header in clear before the TLS handshake, as nginx's stream
// proxy does: a raw upstream reads the line, then handshakes; nginx listening
// with "ssl proxy_protocol" sees the client's address.
func TestTLSUpstreamProxyProtocol(t *testing.T) {
	f := newTLSFiles(t)
	cert, err := stdtls.LoadX509KeyPair(f.aEC, f.aECKey)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan string, 1)
	raw := newRawUpstream(t, func(c net.Conn) {
		// The line a byte at a time: what follows it is the handshake's.
		var line []byte
		b := make([]byte, 1)
		for len(line) < 108 && !bytes.HasSuffix(line, []byte("\r\n")) {
			if _, err := c.Read(b); err != nil {
				first <- string(line)
				return
			}
			line = append(line, b[0])
		}
		first <- string(line)
		tc := stdtls.Server(c, &stdtls.Config{Certificates: []stdtls.Certificate{cert}})
		if _, err := readHead(bufio.NewReader(tc)); err != nil {
			return
		}
		io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		tc.Close()
	})
	ngAddr := addrFor(t)
	startNginx(t, fmt.Sprintf(`server { listen %s ssl proxy_protocol; ssl_certificate %s; ssl_certificate_key %s;
  location / { return 200 "%s"; } }`, ngAddr, f.aEC, f.aECKey, ppVars), ngAddr)
	addr := addrFor(t)
	startHTTP(t, "server { listen "+addr+"; proxy_protocol on;\n"+
		"location /raw { proxy_pass https://"+raw.Addr+"; }\n"+
		"location /ng { proxy_pass https://"+ngAddr+"; } }", addr)
	cl := newClient(t, addr)
	local := cl.c.LocalAddr().(*net.TCPAddr)
	port := strings.Split(addr, ":")[1]
	cl.send("GET /raw HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, body := cl.read("GET")
	select {
	case line := <-first:
		if want := fmt.Sprintf("PROXY TCP4 127.0.0.1 127.0.0.1 %d %s\r\n", local.Port, port); line != want {
			t.Errorf("upstream's first bytes %q, want %q", line, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no upstream connection")
	}
	if resp.StatusCode != 200 || body != "ok" {
		t.Errorf("raw upstream: %d %q", resp.StatusCode, body)
	}
	cl.send("GET /ng HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, body = cl.read("GET")
	if want := fmt.Sprintf("127.0.0.1|127.0.0.1|%d|127.0.0.1|%s", local.Port, port); resp.StatusCode != 200 || body != want {
		t.Errorf("nginx behind: %d %q, want %q", resp.StatusCode, body, want)
	}
}
