package integration

import (
	stdtls "crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/tls/tlstest"
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

// clientCert writes a client certificate (and the chain after it) to dir.
func clientCert(t *testing.T, dir, name string, l *tlstest.Leaf, chain ...[]byte) (string, string) {
	t.Helper()
	c, k, err := l.WriteFiles(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) > 0 {
		data := append([]byte{}, l.CertPEM...)
		for _, p := range chain {
			data = append(data, p...)
		}
		if err := os.WriteFile(c, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c, k
}

// serverTokenRE stands for the server's name on its error pages.
var serverTokenRE = regexp.MustCompile(`<hr><center>(nginx|numaproxy)[^<]*</center>`)

// TestTLSClientCertificatesVsNginx: ssl_verify_client on, optional and
// optional_no_ca, ssl_verify_depth and ssl_crl, chosen by SNI, against nginx
// with the same files: the status, the page or the variables.
func TestTLSClientCertificatesVsNginx(t *testing.T) {
	sslTools(t, "curl")
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	dir := t.TempDir()
	subject, err := asn1.Marshal(pkix.RDNSequence{
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 6}, Value: "FR"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "Acme, Inc."}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 11}, Value: "Ops"}, {Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "Jos\u00e9 + c/o"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *tlstest.CA, o tlstest.ClientOptions) *tlstest.Leaf {
		l, err := ca.IssueClient(o)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	inter, err := f.ca.Intermediate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlstest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	good := issue(f.ca, tlstest.ClientOptions{RawSubject: subject})
	revokedSerial := big.NewInt(4242)
	revoked := issue(f.ca, tlstest.ClientOptions{Serial: revokedSerial})
	crl, err := f.ca.CRL(revokedSerial)
	if err != nil {
		t.Fatal(err)
	}
	crlFile := filepath.Join(dir, "ca.crl")
	if err := os.WriteFile(crlFile, crl, 0o644); err != nil {
		t.Fatal(err)
	}
	clients := map[string][]string{"none": nil}
	add := func(name string, l *tlstest.Leaf, chain ...[]byte) {
		c, k := clientCert(t, dir, name, l, chain...)
		clients[name] = []string{"--cert", c, "--key", k}
	}
	add("good", good)
	add("chain", issue(inter, tlstest.ClientOptions{}), inter.PEM)
	add("expired", issue(f.ca, tlstest.ClientOptions{NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-48 * time.Hour)}))
	add("unknown", issue(other, tlstest.ClientOptions{}))
	add("unknown+root", issue(other, tlstest.ClientOptions{}), other.PEM)
	add("revoked", revoked)

	body := func(addr string) string {
		srv := func(name, extra string) string {
			return fmt.Sprintf(`
  server {
    listen %s ssl;
    server_name %s;
    ssl_certificate %s;
    ssl_certificate_key %s;
    ssl_client_certificate %s;
    %s
    location / { %s }
  }`, addr, name, f.aEC, f.aECKey, f.caFile, extra, sslVarsReturn)
		}
		return "  ssl_protocols TLSv1.2 TLSv1.3;\n  server_tokens off;\n" +
			srv("on.test", "ssl_verify_client on;") +
			srv("optional.test", "ssl_verify_client optional;") +
			srv("noca.test", "ssl_verify_client optional_no_ca;") +
			srv("depth0.test", "ssl_verify_client on; ssl_verify_depth 0;") +
			srv("depth2.test", "ssl_verify_client on; ssl_verify_depth 2;") +
			srv("crl.test", "ssl_verify_client on; ssl_crl "+crlFile+";") +
			srv("off.test", "")
	}
	np, ng := addrFor(t), addrFor(t)
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	for _, server := range []string{"on", "optional", "noca", "depth0", "depth2", "crl", "off"} {
		for _, client := range []string{"none", "good", "chain", "expired", "unknown", "unknown+root", "revoked"} {
			t.Run(server+"/"+client, func(t *testing.T) {
				host := server + ".test"
				for _, v := range []string{"--tlsv1.3 --tls13-ciphers TLS_AES_128_GCM_SHA256", "--tlsv1.2 --tls-max 1.2 --ciphers ECDHE-ECDSA-AES128-GCM-SHA256"} {
					run := func(addr string) string {
						_, port, _ := strings.Cut(addr, ":")
						args := append(strings.Fields(v), "-sk", "-w", "status=%{http_code}\n", "--resolve", host+":"+port+":127.0.0.1")
						args = append(args, clients[client]...)
						out, _ := exec.Command("curl", append(args, "https://"+host+":"+port+"/")...).CombinedOutput()
						s := sidPattern.ReplaceAllString(string(out), "sid=*")
						return serverTokenRE.ReplaceAllString(s, "<hr><center>SERVER</center>")
					}
					a, b := run(np), run(ng)
					if a != b {
						t.Errorf("%s: numaproxy | nginx:\n%s", v, lineDiff(a, b))
					}
				}
			})
		}
	}
}

// lineDiff shows the lines of a and b that differ, side by side.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&out, "  %q | %q\n", x, y)
		}
	}
	return out.String()
}

// TestTLSClientCertErrorPageVsNginx: error_page catches nginx's 495 and 496 at
// the server level, as nginx (the request has no location yet then).
func TestTLSClientCertErrorPageVsNginx(t *testing.T) {
	sslTools(t, "curl")
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	other, err := tlstest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	l, err := other.IssueClient(tlstest.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crt, key := clientCert(t, t.TempDir(), "other", l)
	body := func(addr string) string {
		return fmt.Sprintf(`
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    ssl_client_certificate %s;
    ssl_verify_client on;
    error_page 495 = /bad-cert;
    error_page 496 =403 /no-cert;
    location = /bad-cert { return 421 "bad certificate: $ssl_client_verify\n"; }
    location = /no-cert { return 200 "no certificate\n"; }
    location / { return 200 "ok\n"; }
  }`, addr, f.aEC, f.aECKey, f.caFile)
	}
	np, ng := addrFor(t), addrFor(t)
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	for _, args := range [][]string{nil, {"--cert", crt, "--key", key}} {
		run := func(addr string) string {
			_, port, _ := strings.Cut(addr, ":")
			a := append([]string{"-sk", "-w", "status=%{http_code}\n", "https://127.0.0.1:" + port + "/x"}, args...)
			out, _ := exec.Command("curl", a...).CombinedOutput()
			return string(out)
		}
		a, b := run(np), run(ng)
		if a != b {
			t.Errorf("%v: numaproxy | nginx:\n%s", args, lineDiff(a, b))
		}
		t.Logf("%v: %q", args, a)
	}
}

// TestTLSOfferedCiphersAndCurvesVsNginx: $ssl_ciphers and $ssl_curves list
// what the client offered, by OpenSSL's names, the others in hex, as nginx
// with Debian's OpenSSL: openssl s_client offering chosen lists (DHE and
// CAMELLIA suites crypto/tls lacks, binary and brainpool curves, ffdhe), and
// Go's client (X25519MLKEM768, which OpenSSL 3.0 does not know).
func TestTLSOfferedCiphersAndCurvesVsNginx(t *testing.T) {
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	body := func(addr string) string {
		return fmt.Sprintf(`
  ssl_protocols TLSv1.2 TLSv1.3;
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    location / { return 200 "ciphers=$ssl_ciphers\ncurves=$ssl_curves\n"; }
  }`, addr, f.aEC, f.aECKey)
	}
	np, ng := addrFor(t), addrFor(t)
	startHTTP(t, body(np), np)
	startNginx(t, body(ng), ng)
	vars := func(out string) string {
		if c, v := grepLine(out, "ciphers="), grepLine(out, "curves="); c != "" && v != "" {
			return c + "\n" + v
		}
		return "no response:\n" + out
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:CAMELLIA128-SHA:AES128-SHA@SECLEVEL=0",
			"-groups", "X25519:P-256:secp256k1:brainpoolP256r1:sect571r1:ffdhe2048"}, "CAMELLIA128-SHA:AES128-SHA:TLS_EMPTY_RENEGOTIATION_INFO_SCSV\ncurves=X25519:prime256v1:secp256k1:brainpoolP256r1:sect571r1"},
		{[]string{"-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_CCM_SHA256:TLS_AES_128_GCM_SHA256", "-groups", "P-384:X448:X25519:P-521"},
			"curves=secp384r1:X448:X25519:secp521r1"},
		{nil, "ffdhe8192"},
	} {
		a := vars(sClient(t, np, tc.args...))
		b := vars(sClient(t, ng, tc.args...))
		if a != b || !strings.Contains(a, tc.want) {
			t.Errorf("s_client %v:\nnumaproxy:\n%s\nnginx:\n%s", tc.args, a, b)
		}
	}
	get := func(addr string) string {
		c := httpsClient(f.pool, addr, &stdtls.Config{ServerName: "a.test"})
		resp, err := c.Get("https://a.test/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	a, b := get(np), get(ng)
	if a != b || !strings.Contains(a, "0x11ec") {
		t.Errorf("Go's client:\nnumaproxy:\n%s\nnginx:\n%s", a, b)
	}
}
