package proxyproto

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"hash/crc32"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/internal/testport"
)

// Interoperability with HAProxy, the protocol's author: its send-proxy and
// send-proxy-v2 (with TLVs, over TLS) towards a Layer, and its health checks.

// binary returns the path of name, or skips the test (fails it in CI, which
// installs the comparison tools).
func binary(t *testing.T, name string, paths ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed", name)
	}
	t.Skipf("%s is not installed", name)
	return ""
}

// freeAddr returns a loopback address with a port free a moment ago, below the
// ephemeral range (internal/testport says why).
func freeAddr(t *testing.T, network, host string) string {
	t.Helper()
	ln, err := net.Listen(network, host+":0")
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	ln.Close()
	h := strings.Trim(host, "[]")
	return net.JoinHostPort(h, strconv.Itoa(testport.FreeOn(t, h)))
}

// startHAProxy runs haproxy in the foreground on cfg and waits until every
// address in listen accepts.
func startHAProxy(t *testing.T, cfg string, listen ...string) {
	t.Helper()
	bin := binary(t, "haproxy", "/usr/sbin/haproxy")
	dir := t.TempDir()
	conf := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", conf, "-db")
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
	for _, a := range listen {
		waitFor(t, "haproxy listening on "+a, func() bool {
			select {
			case <-exited:
				t.Fatalf("haproxy exited: %s", out)
			default:
			}
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// tlvReporter is reporter with the TLV variables nginx would give, and each
// header it saw sent to headers (health checks close without data).
func tlvReporter(headers chan<- Header) *funcHandler {
	h := reporter()
	open, data := h.open, h.data
	h.open = func(c eventloop.Conn) {
		select {
		case headers <- *HeaderOf(c):
		default:
		}
		open(c)
	}
	h.data = func(c eventloop.Conn, b []byte) {
		hdr := HeaderOf(c)
		var vars []string
		for _, name := range []string{"authority", "unique_id", "ssl_version", "ssl_cipher", "ssl_verify", "0x03"} {
			n, _ := ParseTLVName(name)
			if v, ok := hdr.AppendTLVVar(nil, n); ok {
				vars = append(vars, fmt.Sprintf("%s=%q", name, v))
			}
		}
		if v, ok, _ := hdr.TLV(TypeCRC32C); ok && len(v) == 4 {
			vars = append(vars, "crc32c="+crcCheck(hdr, v))
		}
		c.Write([]byte(strings.Join(vars, " ") + "\n"))
		data(c, b)
	}
	return h
}

// crcCheck verifies the header's CRC32c TLV: computed over the whole header
// with the checksum's bytes zeroed.
func crcCheck(h *Header, sum []byte) string {
	b := append([]byte(nil), h.b...)
	area := b[h.tlvOff:]
	for len(area) > 0 {
		typ, v, rest, err := NextTLV(area)
		if err != nil {
			return "broken"
		}
		if typ == TypeCRC32C {
			clear(v)
			break
		}
		area = rest
	}
	got := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	want := uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3])
	if got != want {
		return fmt.Sprintf("mismatch(%08x!=%08x)", got, want)
	}
	return "ok"
}

func TestHAProxy(t *testing.T) {
	headers := make(chan Header, 64)
	srv := startServer(t, tlvReporter(headers), Options{}, 1)
	dir := t.TempDir()
	pemPath := filepath.Join(dir, "cert.pem")
	writeSelfSigned(t, pemPath)
	v1, v2a, v2tls := freeAddr(t, "tcp4", "127.0.0.1"), freeAddr(t, "tcp4", "127.0.0.1"), freeAddr(t, "tcp4", "127.0.0.1")
	v6 := freeAddr(t, "tcp6", "[::1]")
	cfg := fmt.Sprintf(`global
    maxconn 100
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend v1
    bind %[1]s
    default_backend v1
backend v1
    server s %[5]s send-proxy
frontend v2
    bind %[2]s
    bind %[4]s
    default_backend v2
backend v2
    server s %[5]s send-proxy-v2 proxy-v2-options crc32c
frontend v2tls
    bind %[3]s ssl crt %[6]s
    unique-id-format uid-%%[src_port]
    default_backend v2tls
backend v2tls
    server s %[5]s send-proxy-v2 proxy-v2-options ssl,ssl-cipher,authority,unique-id,crc32c
backend checks
    server s %[5]s send-proxy-v2 check inter 100ms
`, v1, v2a, v2tls, v6, srv.addrs[0], pemPath)
	startHAProxy(t, cfg, v1, v2a, v2tls, v6)

	get := func(t *testing.T, c net.Conn) string {
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte(request)); err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(c)
		if err != nil && !isReset(err) {
			t.Fatal(err)
		}
		return string(out)
	}
	for _, tc := range []struct {
		name, front string
		want        string
	}{
		{"send-proxy", v1, "v1 cmd=1 fam=1"},
		{"send-proxy-v2", v2a, "v2 cmd=1 fam=1"},
		{"send-proxy-v2 ipv6", v6, "v2 cmd=1 fam=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tc.front)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			out := get(t, c)
			client := c.LocalAddr().String()
			want := fmt.Sprintf("remote=%s local=%s %s src=%s dst=%s", client, srv.addrs[0], tc.want, client, tc.front)
			if !strings.Contains(out, want) || !strings.HasSuffix(out, "req=GET / HTTP/1.0") {
				t.Fatalf("got  %q\nwant %q", out, want)
			}
			if tc.want[:2] == "v2" && !strings.Contains(out, "crc32c=ok") {
				t.Fatalf("no valid CRC32c: %q", out)
			}
		})
	}

	t.Run("send-proxy-v2 TLVs over TLS", func(t *testing.T) {
		c, err := tls.Dial("tcp", v2tls, &tls.Config{ServerName: "a.example", InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		out := get(t, c)
		client := c.LocalAddr().(*net.TCPAddr)
		for _, want := range []string{
			fmt.Sprintf("remote=%s ", client), fmt.Sprintf("dst=%s ", v2tls),
			`authority="a.example"`, fmt.Sprintf(`unique_id="uid-%d"`, client.Port),
			`ssl_version="TLSv1.3"`, `ssl_cipher="TLS_`, `ssl_verify="0"`, "crc32c=ok",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("no %s in %q", want, out)
			}
		}
	})

	t.Run("health checks", func(t *testing.T) {
		deadline := time.After(20 * time.Second)
		for {
			select {
			case h := <-headers:
				if h.Command == Local {
					if h.HasAddrs() || h.Version != 2 {
						t.Fatalf("LOCAL header %+v", h)
					}
					return
				}
			case <-deadline:
				t.Fatal("no LOCAL header from haproxy's health checks")
			}
		}
	})
}

// writeSelfSigned writes a certificate and its key for a.example to path.
func writeSelfSigned(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a.example"}, DNSNames: []string{"a.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}
