package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/tls/tlstest"
)

// TestTLSTestssl runs testssl.sh (Debian's testssl.sh package) against a
// numaproxy listener with the default protocols and ciphers: protocols,
// cipher categories, forward secrecy, server defaults and the vulnerability
// checks. No finding may be HIGH or CRITICAL. The certificate is the test's:
// valid for 90 days, for 127.0.0.1, with a CRL URI, its CA given to testssl.
func TestTLSTestssl(t *testing.T) {
	bin, err := exec.LookPath("testssl")
	if err != nil {
		t.Skip("testssl.sh not installed (Debian package testssl.sh)")
	}
	if testing.Short() {
		t.Skip("testssl.sh takes a minute or two")
	}
	f := newTLSFiles(t)
	leaf, err := f.ca.IssueClient(tlstest.ClientOptions{Server: true, Names: []string{"127.0.0.1"},
		RawSubject: cnSubject(t, "127.0.0.1"), NotAfter: time.Now().Add(90 * 24 * time.Hour),
		CRLs: []string{"http://127.0.0.1:9/ca.crl"}})
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := leaf.WriteFiles(f.dir, "testssl")
	if err != nil {
		t.Fatal(err)
	}
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    location / { return 200 "ok\n"; }
  }`, addr, crt, key), addr)
	out := filepath.Join(t.TempDir(), "testssl.json")
	cmd := exec.Command(bin, "--quiet", "--color", "0", "--warnings", "batch", "--ip", "one", "--add-ca", f.caFile,
		"--openssl-timeout", "10", "-p", "-s", "-f", "-S", "-U", "--jsonfile", out, addr)
	cmd.Env = append(os.Environ(), "TERM=dumb")
	if b, err := cmd.CombinedOutput(); err != nil && !strings.Contains(err.Error(), "exit status") {
		t.Fatalf("testssl: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var findings []struct{ ID, Severity, Finding string }
	if err := json.Unmarshal(data, &findings); err != nil {
		t.Fatalf("testssl's JSON: %v", err)
	}
	if len(findings) < 50 {
		t.Fatalf("testssl reported only %d findings: it did not run its checks", len(findings))
	}
	counts := map[string]int{}
	for _, x := range findings {
		counts[x.Severity]++
		switch x.Severity {
		case "HIGH", "CRITICAL":
			t.Errorf("%s %s: %s", x.Severity, x.ID, x.Finding)
		case "MEDIUM", "LOW":
			t.Logf("%s %s: %s", x.Severity, x.ID, x.Finding)
		}
	}
	t.Logf("testssl findings by severity: %v", counts)
}
