package integration

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// sslVarsReturn answers with the $ssl_* variables, one a line.
const sslVarsReturn = `return 200 "protocol=$ssl_protocol\ncipher=$ssl_cipher\ncurve=$ssl_curve\nsni=$ssl_server_name\nsid=$ssl_session_id\nreused=$ssl_session_reused\nearly=$ssl_early_data\nalpn=$ssl_alpn_protocol\nverify=$ssl_client_verify\nsdn=$ssl_client_s_dn\nidn=$ssl_client_i_dn\nsdnl=$ssl_client_s_dn_legacy\nidnl=$ssl_client_i_dn_legacy\nserial=$ssl_client_serial\nfp=$ssl_client_fingerprint\nvstart=$ssl_client_v_start\nvend=$ssl_client_v_end\nvremain=$ssl_client_v_remain\nraw=$ssl_client_raw_cert\ncert=$ssl_client_cert\nesc=$ssl_client_escaped_cert\nhttps=$https\n";`

// sidPattern stands for a session identifier in compared output: both make
// 32 random bytes.
var sidPattern = regexp.MustCompile(`(?m)^sid=[0-9a-f]{64}$`)

// curlBoth runs curl with args against numaproxy's and nginx's ssl addresses
// (a.test resolved to them) and returns both outputs.
func curlOn(t *testing.T, addr string, args ...string) string {
	t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	all := append([]string{"-sS", "--resolve", "a.test:" + port + ":127.0.0.1", "--resolve", "c.test:" + port + ":127.0.0.1"}, args...)
	for i, a := range all {
		all[i] = strings.ReplaceAll(a, "PORT", port)
	}
	out, err := exec.Command("curl", all...).CombinedOutput()
	if err != nil {
		t.Logf("curl %v: %v", all, err)
	}
	return string(out)
}

// TestTLSVariablesVsNginx: the $ssl_* variables as numaproxy and nginx give them
// to curl with the same certificates, versions, suites and groups.
func TestTLSVariablesVsNginx(t *testing.T) {
	sslTools(t, "curl")
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	body := func(addr string) string {
		return fmt.Sprintf(`
  ssl_protocols TLSv1.2 TLSv1.3;
  server {
    listen %s ssl;
    server_name a.test;
    ssl_certificate %s;
    ssl_certificate_key %s;
    ssl_certificate %s;
    ssl_certificate_key %s;
    location / { %s }
  }`, addr, f.aEC, f.aECKey, f.aRSA, f.aRSAKey, sslVarsReturn)
	}
	np, ng := addrFor(t), addrFor(t)
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	for _, tc := range []struct{ name, args string }{
		{"TLS1.3", "--tlsv1.3 --tls13-ciphers TLS_AES_128_GCM_SHA256 --curves X25519"},
		{"TLS1.3 P-384 ChaCha", "--tlsv1.3 --tls13-ciphers TLS_CHACHA20_POLY1305_SHA256 --curves secp384r1"},
		{"TLS1.2 ECDSA", "--tlsv1.2 --tls-max 1.2 --ciphers ECDHE-ECDSA-AES256-GCM-SHA384 --curves prime256v1"},
		{"TLS1.2 RSA CBC", "--tlsv1.2 --tls-max 1.2 --ciphers ECDHE-RSA-AES128-SHA --curves X25519"},
		{"TLS1.2 RSA key exchange", "--tlsv1.2 --tls-max 1.2 --ciphers AES128-GCM-SHA256"},
		{"no SNI, HTTP/1.1 only", "--http1.1 --tlsv1.3 --tls13-ciphers TLS_AES_128_GCM_SHA256 --curves X25519 -k https://127.0.0.1:PORT/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := strings.Fields(tc.args)
			if !strings.HasPrefix(args[len(args)-1], "https://") {
				args = append(args, "--cacert", f.caFile, "https://a.test:PORT/")
			}
			a, b := curlOn(t, np, args...), curlOn(t, ng, args...)
			if !sidPattern.MatchString(a) {
				t.Errorf("numaproxy's $ssl_session_id is not 32 bytes in hex:\n%s", a)
			}
			a, b = sidPattern.ReplaceAllString(a, "sid=*"), sidPattern.ReplaceAllString(b, "sid=*")
			if a != b {
				t.Errorf("numaproxy:\n%s\nnginx:\n%s", a, b)
			}
		})
	}
}
