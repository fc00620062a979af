package integration

import (
	"bytes"
	stdtls "crypto/tls"
	"crypto/x509"
	binenc "encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// openssl runs the openssl command and fails the test on an error.
func openssl(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("openssl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestTLSStaplingFileVsNginx: ssl_stapling with ssl_stapling_file staples the
// response for clients that ask (openssl s_client -status), as nginx does.
func TestTLSStaplingFileVsNginx(t *testing.T) {
	sslTools(t, "openssl")
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), keyPEM(t, f), 0o600); err != nil {
		t.Fatal(err)
	}
	// An OCSP response for a.test's ECDSA certificate, signed by the CA, made
	// offline by openssl ocsp from an index that lists it as valid.
	serial := strings.TrimPrefix(strings.TrimSpace(openssl(t, dir, "x509", "-in", f.aEC, "-noout", "-serial")), "serial=")
	subject := strings.TrimPrefix(strings.TrimSpace(openssl(t, dir, "x509", "-in", f.aEC, "-noout", "-subject", "-nameopt", "compat")), "subject=")
	index := fmt.Sprintf("V\t%s\t\t%s\tunknown\t%s\n", time.Now().Add(24*time.Hour).UTC().Format("060102150405Z"), serial, subject)
	if err := os.WriteFile(filepath.Join(dir, "index.txt"), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	openssl(t, dir, "ocsp", "-issuer", f.caFile, "-cert", f.aEC, "-reqout", "req.der", "-no_nonce")
	openssl(t, dir, "ocsp", "-index", "index.txt", "-CA", f.caFile, "-rsigner", f.caFile, "-rkey", "ca.key", "-reqin", "req.der", "-respout", "resp.der", "-ndays", "1")
	body := func(addr, extra string) string {
		return fmt.Sprintf(`
  ssl_protocols TLSv1.2 TLSv1.3;
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    %s
    location / { return 200 "ok\n"; }
  }`, addr, f.aEC, f.aECKey, extra)
	}
	stapling := "ssl_stapling on; ssl_stapling_file " + filepath.Join(dir, "resp.der") + ";"
	np, ng, plain := addrFor(t), addrFor(t), addrFor(t)
	startHTTP(t, body(np, stapling), np)
	startNginx(t, body(ng, stapling), ng)
	startHTTP(t, body(plain, ""), plain)
	status := func(addr string, v string) string {
		out := sClient(t, addr, v, "-status", "-CAfile", f.caFile)
		return grepLine(out, "OCSP response:") + "|" + grepLine(out, "OCSP Response Status:") + "|" + grepLine(out, "Cert Status:")
	}
	for _, v := range []string{"-tls1_3", "-tls1_2"} {
		a, b := status(np, v), status(ng, v)
		if a != b || !strings.Contains(a, "successful") || !strings.Contains(a, "Cert Status: good") {
			t.Errorf("%s: numaproxy %q, nginx %q", v, a, b)
		}
		if got := status(plain, v); got != "OCSP response: no response sent||" {
			t.Errorf("%s without stapling: %q", v, got)
		}
	}
	// ssl_stapling on without a file, for a certificate with no responder
	// URL, is nginx's warning (see TestTLSStaplingResponderVsNginx for fetching).
	conf := writeTree(t, map[string]string{"conf/numaproxy.conf": "events { }\nhttp {\n" + body("127.0.0.1:8443", "ssl_stapling on;") + "\n}\n"})
	if r := run(t, "-p", conf, "-t"); r.code != 0 || !strings.Contains(r.stderr, `"ssl_stapling" ignored, no OCSP responder URL in the certificate`) || !strings.Contains(r.stderr, "numaproxy.conf:9") {
		t.Errorf("ssl_stapling without a file: exit %d\n%s", r.code, r.stderr)
	}
}

// keyPEM is the test CA's private key in PEM.
func keyPEM(t *testing.T, f *tlsFiles) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(f.ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TestTLSPasswordFile: encrypted keys, PKCS#8 (OpenSSL 3's default) and the
// legacy PEM form, opened by a passphrase of ssl_password_file (the second
// line); without one, or with a wrong one, the configuration is refused.
func TestTLSPasswordFile(t *testing.T) {
	sslTools(t, "openssl")
	f := newTLSFiles(t)
	dir := t.TempDir()
	openssl(t, dir, "pkey", "-in", f.aECKey, "-aes256", "-passout", "pass:s3cret", "-out", "pkcs8.key")
	openssl(t, dir, "ec", "-in", f.aECKey, "-aes256", "-passout", "pass:s3cret", "-out", "legacy.key")
	if data, _ := os.ReadFile(filepath.Join(dir, "legacy.key")); !bytes.Contains(data, []byte("Proc-Type: 4,ENCRYPTED")) {
		t.Fatalf("openssl ec did not write a legacy encrypted key:\n%s", data)
	}
	if err := os.WriteFile(filepath.Join(dir, "pass"), []byte("wrong\ns3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "badpass"), []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := func(addr, key, extra string) string {
		return fmt.Sprintf(`
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    %s
    location / { return 200 "ok\n"; }
  }`, addr, f.aEC, filepath.Join(dir, key), extra)
	}
	for _, key := range []string{"pkcs8.key", "legacy.key"} {
		addr := addrFor(t)
		startHTTP(t, body(addr, key, "ssl_password_file "+filepath.Join(dir, "pass")+";"), addr)
		resp, got := get(t, httpsClient(f.pool, addr, &stdtls.Config{ServerName: "a.test"}), "https://a.test/")
		if resp.StatusCode != 200 || got != "ok\n" {
			t.Errorf("%s: %d %q", key, resp.StatusCode, got)
		}
		for _, extra := range []string{"", "ssl_password_file " + filepath.Join(dir, "badpass") + ";"} {
			conf := writeTree(t, map[string]string{"conf/numaproxy.conf": "events { }\nhttp {\n" + body("127.0.0.1:8443", key, extra) + "\n}\n"})
			if r := run(t, "-p", conf, "-t"); r.code != 1 || !strings.Contains(r.stderr, "no ssl_password_file passphrase opens it") {
				t.Errorf("%s with %q: exit %d\n%s", key, extra, r.code, r.stderr)
			}
		}
	}
}

// TestTLSEcdhCurveAndRejectVsNginx: ssl_ecdh_curve picks the group
// ($ssl_curve) and ssl_reject_handshake on a default server refuses handshakes
// without a known name with unrecognized_name, as nginx.
func TestTLSEcdhCurveAndRejectVsNginx(t *testing.T) {
	sslTools(t, "openssl", "curl")
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	body := func(addr string) string {
		return fmt.Sprintf(`
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_ecdh_curve secp384r1:prime256v1; # nginx takes it from the default server only
  server {
    listen %[1]s ssl default_server;
    ssl_reject_handshake on;
  }
  server {
    listen %[1]s ssl;
    server_name a.test;
    ssl_certificate %[2]s;
    ssl_certificate_key %[3]s;
    location / { return 200 "curve=$ssl_curve\n"; }
  }`, addr, f.aEC, f.aECKey)
	}
	np, ng := addrFor(t), addrFor(t)
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	// One group in common with the client each time: crypto/tls ignores the
	// order of the list (OpenSSL follows it), so only the set is compared.
	for _, tc := range []struct{ v, curves string }{
		{"--tlsv1.3", "X25519:secp384r1"}, {"--tlsv1.3", "X25519:prime256v1"}, {"--tlsv1.3", "prime256v1"},
		// TLS 1.2 clients must also accept the certificate's curve (P-256).
		{"--tlsv1.2 --tls-max 1.2", "X25519:prime256v1"},
	} {
		v, curves := tc.v, tc.curves
		{
			args := append(strings.Fields(v), "--curves", curves, "--cacert", f.caFile, "https://a.test:PORT/")
			a, b := curlOn(t, np, args...), curlOn(t, ng, args...)
			if a != b || !strings.HasPrefix(a, "curve=") {
				t.Errorf("%s --curves %s: numaproxy %q, nginx %q", v, curves, a, b)
			}
		}
	}
	for _, name := range []string{"", "unknown.test"} {
		for _, v := range []string{"-tls1_3", "-tls1_2"} {
			args := []string{v}
			if name != "" {
				args = append(args, "-servername", name)
			} else {
				args = append(args, "-noservername")
			}
			a, b := sClient(t, np, args...), sClient(t, ng, args...)
			if !strings.Contains(a, "SSL alert number 112") || !strings.Contains(b, "SSL alert number 112") {
				t.Errorf("%q %s: numaproxy:\n%s\nnginx:\n%s", name, v, a, b)
			}
		}
	}
	if out := sClient(t, np, "-servername", "a.test", "-CAfile", f.caFile); !strings.Contains(out, "200 OK") {
		t.Errorf("a.test on the rejecting address:\n%s", out)
	}
}

// recordLens reads TLS records off r and returns the lengths of those after
// the first application data one (the response's), until EOF.
type recordTap struct {
	net.Conn
	buf bytes.Buffer
}

func (r *recordTap) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

func appDataLens(b []byte) []int {
	var lens []int
	for len(b) >= 5 {
		n := int(binenc.BigEndian.Uint16(b[3:5]))
		if b[0] == 23 {
			lens = append(lens, n)
		}
		if len(b) < 5+n {
			break
		}
		b = b[5+n:]
	}
	return lens
}

// TestTLSBufferSize: ssl_buffer_size bounds the records of a response; the
// default sends full 16k records.
func TestTLSBufferSize(t *testing.T) {
	f := newTLSFiles(t)
	// A file: its bytes are all there when the response goes out, so the record
	// sizes are the layer's choice, not how the bytes happened to arrive.
	payload := strings.Repeat("x", 100<<10)
	root := t.TempDir()
	openToAll(t, root)
	if err := os.WriteFile(filepath.Join(root, "f"), []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		conf     string
		max, min int // bounds of the largest application record
	}{
		{"ssl_buffer_size 1k;", 1024 + 17, 1024},
		{"", 16384 + 17, 16384},
	} {
		addr := addrFor(t)
		startHTTP(t, fmt.Sprintf(`
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    %s
    location / { root %s; }
  }`, addr, f.aEC, f.aECKey, tc.conf, root), addr)
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		tap := &recordTap{Conn: raw}
		c := stdtls.Client(tap, &stdtls.Config{ServerName: "a.test", RootCAs: f.pool, MinVersion: stdtls.VersionTLS13})
		c.SetDeadline(time.Now().Add(ioTimeout))
		io.WriteString(c, "GET /f HTTP/1.0\r\nHost: a.test\r\n\r\n")
		got, _ := io.ReadAll(c)
		c.Close()
		if !bytes.HasSuffix(got, []byte(payload)) {
			t.Fatalf("%q: response of %d bytes", tc.conf, len(got))
		}
		largest := 0
		for _, n := range appDataLens(tap.buf.Bytes()) {
			largest = max(largest, n)
		}
		if largest > tc.max || largest < tc.min {
			t.Errorf("%q: largest record %d bytes, want %d..%d", tc.conf, largest, tc.min, tc.max)
		}
	}
}

// TestTLSRefusedDirectives: what numaproxy declines says so with file:line;
// ssl_dhparam and ssl_early_data off are accepted.
func TestTLSRefusedDirectives(t *testing.T) {
	f := newTLSFiles(t)
	srv := "server { listen 127.0.0.1:8443 ssl; ssl_certificate " + f.aEC + "; ssl_certificate_key " + f.aECKey + ";\n"
	for _, tc := range []struct{ conf, want string }{
		{srv + "ssl_early_data on; }", `"ssl_early_data on" is not supported: crypto/tls has no TLS 1.3 0-RTT server in `},
		{srv + "ssl_conf_command Options PrioritizeChaCha; }", `"ssl_conf_command" is not supported: numaproxy's TLS is crypto/tls`},
		{srv + "ssl_stapling_responder https://ocsp.example/; }", `invalid URL prefix in OCSP responder "https://ocsp.example/" in "ssl_stapling_responder"`},
		{srv + "ssl_ecdh_curve brainpoolP256r1; }", `crypto/tls has no group "brainpoolP256r1"`},
	} {
		dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "events { }\nhttp {\n" + tc.conf + "\n}\n"})
		if r := run(t, "-p", dir, "-t"); r.code != 1 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "numaproxy.conf:4") {
			t.Errorf("%s: exit %d\n%s", tc.conf, r.code, r.stderr)
		}
	}
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "events { }\nhttp {\n" + srv + "ssl_dhparam /etc/ssl/dhparam.pem; ssl_early_data off; ssl_stapling off; ssl_stapling_verify on; ssl_ecdh_curve auto; }\n}\n"})
	if r := run(t, "-p", dir, "-t"); r.code != 0 {
		t.Errorf("accepted directives: exit %d\n%s", r.code, r.stderr)
	}
}

// TestTLSPlainHTTPToHTTPSPortVsNginx: plain HTTP sent to a TLS address gets
// nginx's 400 "The plain HTTP request was sent to HTTPS port" (497), which
// error_page can turn into a redirect; the address keeps serving TLS.
func TestTLSPlainHTTPToHTTPSPortVsNginx(t *testing.T) {
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	body := func(a, b string) string {
		return fmt.Sprintf(`
  server_tokens off;
  server {
    listen %s ssl;
    server_name a.test;
    ssl_certificate %s;
    ssl_certificate_key %s;
    error_page 497 = /why;
    location / { return 200 "https=$https\n"; }
    location = /why { return 200 "scheme=$scheme https=$https\n"; }
  }
  server {
    listen %s ssl;
    server_name b.test;
    ssl_certificate %s;
    ssl_certificate_key %s;
    error_page 497 =301 https://b.test/moved; # numaproxy takes no variables there
  }`, a, f.aEC, f.aECKey, b, f.aEC, f.aECKey)
	}
	na, nb, ga, gb := addrFor(t), addrFor(t), addrFor(t), addrFor(t)
	startHTTP(t, body(na, nb), na, nb)
	startNginx(t, body(ga, gb), ga, gb)
	ask := func(addr, host string) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(ioTimeout))
		io.WriteString(c, "GET /path?q=1 HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		out, _ := io.ReadAll(c)
		head, body, _ := strings.Cut(string(out), "\r\n\r\n")
		lines := strings.Split(head, "\r\n")
		slices.Sort(lines[1:]) // the fields' order differs
		var keep []string
		for _, l := range append(lines, strings.Split(body, "\r\n")...) {
			if strings.HasPrefix(l, "Date:") || strings.HasPrefix(l, "Server:") {
				continue
			}
			if strings.HasPrefix(l, "Content-Length:") {
				l = "Content-Length: N" // the server's name is on the page
			}
			_, port, _ := strings.Cut(addr, ":")
			keep = append(keep, strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(l, port, "PORT"), "nginx", "SERVER"), "numaproxy", "SERVER"))
		}
		return strings.Join(keep, "\n")
	}
	for _, tc := range []struct{ n, g, host string }{{na, ga, "a.test"}, {nb, gb, "b.test"}} {
		a, b := ask(tc.n, tc.host), ask(tc.g, tc.host)
		if a != b || !strings.Contains(a, "HTTP/1.1 ") {
			t.Errorf("%s: numaproxy | nginx:\n%s\nnumaproxy:\n%s", tc.host, lineDiff(a, b), a)
		}
		t.Logf("%s:\n%s", tc.host, a)
	}
	resp, got := get(t, httpsClient(f.pool, na, &stdtls.Config{ServerName: "a.test"}), "https://a.test/")
	if resp.StatusCode != 200 || got != "https=on\n" {
		t.Errorf("TLS after plain HTTP: %d %q", resp.StatusCode, got)
	}
}
