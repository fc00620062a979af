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

	"github.com/numaproxy/numaproxy/internal/dnstest"
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
	o := newOCSPResponder(t, f)
	ocspAddr := o.addr
	good, goodKey := o.issue("good", "V", "http://"+ocspAddr)
	revoked, revokedKey := o.issue("revoked", "R", "http://"+ocspAddr+"/")
	noAIA, noAIAKey := o.issue("noaia", "V")
	rlog := o.start()

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

// ocspResponder is a local `openssl ocsp` server for the test CA's
// certificates: issue makes each (with its state in the responder's index:
// V valid, R revoked), start runs the responder on addr.
type ocspResponder struct {
	t     *testing.T
	f     *tlsFiles
	dir   string
	addr  string
	index string
}

func newOCSPResponder(t *testing.T, f *tlsFiles) *ocspResponder {
	o := &ocspResponder{t: t, f: f, dir: t.TempDir(), addr: addrFor(t)}
	if err := os.WriteFile(filepath.Join(o.dir, "ca.key"), keyPEM(t, f), 0o600); err != nil {
		t.Fatal(err)
	}
	return o
}

// issue makes a certificate for a.test and 127.0.0.1 with the responder URLs
// urls and returns its certificate and key files.
func (o *ocspResponder) issue(name, state string, urls ...string) (string, string) {
	t := o.t
	l, err := o.f.ca.IssueClient(tlstest.ClientOptions{Server: true, Names: []string{"a.test", "127.0.0.1"}, OCSP: urls})
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := l.WriteFiles(o.dir, name)
	if err != nil {
		t.Fatal(err)
	}
	serial := strings.TrimPrefix(strings.TrimSpace(openssl(t, o.dir, "x509", "-in", c, "-noout", "-serial")), "serial=")
	subject := strings.TrimPrefix(strings.TrimSpace(openssl(t, o.dir, "x509", "-in", c, "-noout", "-subject", "-nameopt", "compat")), "subject=")
	revTime := ""
	if state == "R" {
		revTime = time.Now().Add(-time.Hour).UTC().Format("060102150405Z")
	}
	o.index += fmt.Sprintf("%s\t%s\t%s\t%s\tunknown\t%s\n", state, time.Now().Add(24*time.Hour).UTC().Format("060102150405Z"), revTime, serial, subject)
	return c, k
}

// start runs the responder; its output is returned.
func (o *ocspResponder) start() *lockedLog {
	t := o.t
	if err := os.WriteFile(filepath.Join(o.dir, "index.txt"), []byte(o.index), 0o644); err != nil {
		t.Fatal(err)
	}
	// The certificates share a subject (CN=client).
	if err := os.WriteFile(filepath.Join(o.dir, "index.txt.attr"), []byte("unique_subject = no\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// OpenSSL 3.0's -port takes a number only: it listens on every address;
	// it is asked on loopback.
	_, port, _ := net.SplitHostPort(o.addr)
	responder := exec.Command("openssl", "ocsp", "-port", port, "-index", "index.txt", "-CA", o.f.caFile,
		"-rsigner", o.f.caFile, "-rkey", "ca.key", "-ndays", "1")
	responder.Dir = o.dir
	rlog := &lockedLog{}
	responder.Stdout, responder.Stderr = rlog, rlog
	if err := responder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { responder.Process.Kill(); responder.Wait() })
	// A connection closed without a request stalls openssl ocsp: wait for its
	// banner instead of probing the port.
	waitFor(t, "openssl ocsp listening", 10*time.Second, func() bool { return strings.Contains(rlog.String(), "waiting for OCSP client") })
	return rlog
}

// TestTLSStaplingResolver: a responder named by a host name is resolved with
// the server's resolver; without one, numaproxy logs nginx's "no resolver
// defined to resolve" and asks the system's resolver (which does not know the
// name here: nothing is stapled). nginx resolves the name once at start with
// the system's resolver and ignores ssl_stapling when that fails, so it is not
// run side by side here.
func TestTLSStaplingResolver(t *testing.T) {
	sslTools(t, "openssl")
	f := newTLSFiles(t)
	o := newOCSPResponder(t, f)
	_, port, _ := net.SplitHostPort(o.addr)
	cert, key := o.issue("named", "V", "http://ocsp.test:"+port+"/")
	o.start()
	ns := dnstest.Start(t)
	ns.Set("ocsp.test", 300, "127.0.0.1")
	server := func(addr, extra string) string {
		return fmt.Sprintf(`
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    ssl_stapling on;
    ssl_trusted_certificate %s;
    %s
    location / { return 200 "ok\n"; }
  }`, addr, cert, key, f.caFile, extra)
	}
	with, without := addrFor(t), addrFor(t)
	in := startHTTP(t, server(with, "resolver "+ns.Addr()+" ipv6=off;")+server(without, ""), with, without)
	status := func(addr string) string {
		return grepLine(sClient(t, addr, "-tls1_3", "-status", "-CAfile", f.caFile), "Cert Status:")
	}
	status(with)
	waitFor(t, "a staple from the responder found by the resolver", 10*time.Second, func() bool { return status(with) == "Cert Status: good" })
	if ns.Asked("ocsp.test") == 0 {
		t.Error("the resolver was not asked")
	}
	status(without)
	in.waitLog("no resolver defined to resolve ocsp.test")
	if got := status(without); got != "" {
		t.Errorf("without a resolver: %q", got)
	}
}
