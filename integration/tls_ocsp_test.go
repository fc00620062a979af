package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/tls/tlstest"
)

// TestTLSStaplingResponderVsNginx: ssl_stapling on without ssl_stapling_file
// fetches the response from the responder in the certificate (a local
// `openssl ocsp` server), verifies it against ssl_trusted_certificate and
// staples it once fetched; a revoked certificate's response is not stapled;
// ssl_stapling_responder overrides the certificate's URL. Side by side with
// nginx, which also staples only after its first fetch.
func TestTLSStaplingResponderVsNginx(t *testing.T) {
	sslTools(t, "openssl")
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), keyPEM(t, f), 0o600); err != nil {
		t.Fatal(err)
	}
	ocspAddr := addrFor(t)
	issue := func(name string, urls ...string) (string, string) {
		l, err := f.ca.IssueClient(tlstest.ClientOptions{Server: true, Names: []string{"a.test", "127.0.0.1"}, OCSP: urls})
		if err != nil {
			t.Fatal(err)
		}
		c, k, err := l.WriteFiles(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	good, goodKey := issue("good", "http://"+ocspAddr)
	revoked, revokedKey := issue("revoked", "http://"+ocspAddr+"/")
	noAIA, noAIAKey := issue("noaia")
	expiry := time.Now().Add(24 * time.Hour).UTC().Format("060102150405Z")
	line := func(cert, state, revTime string) string {
		serial := strings.TrimPrefix(strings.TrimSpace(openssl(t, dir, "x509", "-in", cert, "-noout", "-serial")), "serial=")
		subject := strings.TrimPrefix(strings.TrimSpace(openssl(t, dir, "x509", "-in", cert, "-noout", "-subject", "-nameopt", "compat")), "subject=")
		return fmt.Sprintf("%s\t%s\t%s\t%s\tunknown\t%s\n", state, expiry, revTime, serial, subject)
	}
	index := line(good, "V", "") + line(noAIA, "V", "") +
		line(revoked, "R", time.Now().Add(-time.Hour).UTC().Format("060102150405Z"))
	if err := os.WriteFile(filepath.Join(dir, "index.txt"), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	// The certificates share a subject (CN=client).
	if err := os.WriteFile(filepath.Join(dir, "index.txt.attr"), []byte("unique_subject = no\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// OpenSSL 3.0's -port takes a number only: it listens on every address;
	// it is asked on loopback.
	_, port, _ := net.SplitHostPort(ocspAddr)
	responder := exec.Command("openssl", "ocsp", "-port", port, "-index", "index.txt", "-CA", f.caFile,
		"-rsigner", f.caFile, "-rkey", "ca.key", "-ndays", "1")
	responder.Dir = dir
	rlog := &lockedLog{}
	responder.Stdout, responder.Stderr = rlog, rlog
	if err := responder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { responder.Process.Kill(); responder.Wait() })
	// A connection closed without a request stalls openssl ocsp: wait for its
	// banner instead of probing the port.
	waitFor(t, "openssl ocsp listening", 10*time.Second, func() bool { return strings.Contains(rlog.String(), "waiting for OCSP client") })

	server := func(addr, cert, key, extra string) string {
		return fmt.Sprintf(`
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    ssl_stapling on;
    ssl_stapling_verify on;
    ssl_trusted_certificate %s;
    %s
    location / { return 200 "ok\n"; }
  }`, addr, cert, key, f.caFile, extra)
	}
	type site struct{ np, ng, cert, key, extra string }
	sites := map[string]*site{
		"good":      {cert: good, key: goodKey},
		"revoked":   {cert: revoked, key: revokedKey},
		"responder": {cert: noAIA, key: noAIAKey, extra: "ssl_stapling_responder http://" + ocspAddr + "/;"},
	}
	body := "  ssl_protocols TLSv1.2 TLSv1.3;\n"
	nbody := body
	var npAddrs, ngAddrs []string
	for _, s := range sites {
		s.np, s.ng = addrFor(t), addrFor(t)
		body += server(s.np, s.cert, s.key, s.extra)
		nbody += server(s.ng, s.cert, s.key, s.extra)
		npAddrs, ngAddrs = append(npAddrs, s.np), append(ngAddrs, s.ng)
	}
	np := startHTTP(t, body, npAddrs...)
	ng := startNginx(t, nbody, ngAddrs...)
	status := func(addr string) string {
		out := sClient(t, addr, "-tls1_3", "-status", "-CAfile", f.caFile)
		return grepLine(out, "OCSP response:") + "|" + grepLine(out, "OCSP Response Status:") + "|" + grepLine(out, "Cert Status:")
	}
	// The first handshakes start the fetches; then wait for the good ones.
	for _, s := range sites {
		status(s.np)
		status(s.ng)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, name := range []string{"good", "responder"} {
		for _, addr := range []string{sites[name].np, sites[name].ng} {
			for !strings.Contains(status(addr), "Cert Status: good") && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	for name, s := range sites {
		a, b := status(s.np), status(s.ng)
		ok := a == "OCSP response: no response sent||"
		if name != "revoked" {
			ok = strings.Contains(a, "OCSP Response Status: successful") && strings.HasSuffix(a, "|Cert Status: good")
		}
		if a != b || !ok {
			t.Errorf("%s: numaproxy %q, nginx %q", name, a, b)
		}
	}
	if t.Failed() {
		log, _ := os.ReadFile(np.path("logs/error.log"))
		nlog, _ := os.ReadFile(filepath.Join(ng.dir, "logs/error.log"))
		t.Logf("numaproxy's error log:\n%s\nnginx's:\n%s\nthe responder's:\n%s", log, nlog, rlog.String())
	}
	np.waitLog("in the OCSP response")
}

// lockedLog collects a process's output while the test reads it.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
