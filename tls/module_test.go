package tls

import (
	stdtls "crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/tls/tlstest"
)

var testRegistry = conf.MustRegistry(Module)

func loadConf(t *testing.T, http string) (*conf.Config, error) {
	t.Helper()
	certs(t)
	dir := t.TempDir()
	for name, l := range map[string]*tlstest.Leaf{"ec": leafEC, "rsa": leafRSA} {
		if _, _, err := l.WriteFiles(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte("events { }\nhttp {\n"+http+"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf.Load(conf.Options{Registry: testRegistry, Prefix: dir, File: file})
}

func TestModuleInheritsAndBuilds(t *testing.T) {
	cfg, err := loadConf(t, `
  ssl_certificate ec.crt;
  ssl_certificate_key ec.key;
  ssl_protocols TLSv1.1 TLSv1.2;
  ssl_session_timeout 1h;
  server { listen 127.0.0.1:8443 ssl; }
  server {
    listen 127.0.0.1:8443 ssl;
    server_name other;
    ssl_certificate rsa.crt;
    ssl_certificate_key rsa.key;
    ssl_certificate ec.crt;
    ssl_certificate_key ec.key;
    ssl_protocols TLSv1.3;
    ssl_session_tickets off;
    ssl_ciphers ECDHE+AESGCM;
  }`)
	if err != nil {
		t.Fatal(err)
	}
	a, b := ConfOf(cfg.HTTP.Servers[0]).Built, ConfOf(cfg.HTTP.Servers[1]).Built
	if a == nil || b == nil {
		t.Fatal("not built")
	}
	if len(a.TLS.Certificates) != 1 || a.TLS.MinVersion != stdtls.VersionTLS11 || a.TLS.MaxVersion != stdtls.VersionTLS12 ||
		a.SessionTimeout != time.Hour || a.TLS.SessionTicketsDisabled {
		t.Errorf("inherited: %d certificates, versions %x-%x, timeout %v, tickets off %v", len(a.TLS.Certificates),
			a.TLS.MinVersion, a.TLS.MaxVersion, a.SessionTimeout, a.TLS.SessionTicketsDisabled)
	}
	if len(b.TLS.Certificates) != 2 || b.TLS.MinVersion != stdtls.VersionTLS13 || !b.TLS.SessionTicketsDisabled || len(b.TLS.CipherSuites) != 4 {
		t.Errorf("own: %d certificates, min %x, tickets off %v, %d suites", len(b.TLS.Certificates), b.TLS.MinVersion,
			b.TLS.SessionTicketsDisabled, len(b.TLS.CipherSuites))
	}
}

func TestModuleErrors(t *testing.T) {
	for _, tc := range []struct{ http, want string }{
		{"server { listen 8443 ssl; }", `no "ssl_certificate" is defined for the "listen ... ssl" directive in`},
		{"server { listen 8443 ssl; ssl_certificate ec.crt; }", `no "ssl_certificate_key" is defined for certificate`},
		{"server { listen 8443 ssl; ssl_certificate ec.crt; ssl_certificate_key rsa.key; }", `cannot load certificate`},
		{"ssl_protocols TLSv1.1 TLSv1.3;", `gap (TLSv1.2 missing)`},
		{"ssl_protocols SSLv3;", `leaves no protocol enabled`},
		{"ssl_protocols TLSv1.2; ssl_protocols TLSv1.3;", `"ssl_protocols" directive is duplicate`},
		{"ssl_ciphers CAMELLIA;", `no cipher suite crypto/tls implements matches`},
		{"ssl_certificate $ssl_server_name.crt;", `variables in certificate file names are not supported`},
		{"ssl_session_tickets maybe;", `invalid value`},
		// Each kind of level part: the server's, proxy_ssl_*, the extras.
		{"ssl_client_certificate a.crt; ssl_client_certificate b.crt;", `"ssl_client_certificate" directive is duplicate`},
		{"ssl_crl $x.pem;", `invalid value "$x.pem" in "ssl_crl" directive, variables and data: are not supported here`},
		{"proxy_ssl_certificate a.crt; proxy_ssl_certificate b.crt;", `"proxy_ssl_certificate" directive is duplicate`},
		{"proxy_ssl_trusted_certificate data:x;", `invalid value "data:x" in "proxy_ssl_trusted_certificate" directive, variables and data: are not supported here`},
		{"ssl_stapling_file a.der; ssl_stapling_file b.der;", `"ssl_stapling_file" directive is duplicate`},
		{"ssl_password_file $x;", `invalid value "$x" in "ssl_password_file" directive, variables and data: are not supported here`},
	} {
		_, err := loadConf(t, tc.http)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.http, err, tc.want)
		}
	}
	// A non-default server without certificates is fine (the default's are used).
	if _, err := loadConf(t, "server { listen 8443 ssl; ssl_certificate ec.crt; ssl_certificate_key ec.key; }\nserver { listen 8443 ssl; server_name x; }"); err != nil {
		t.Error(err)
	}
}

func TestParseCiphers(t *testing.T) {
	name := func(ids []uint16) string {
		var out []string
		for _, id := range ids {
			out = append(out, stdtls.CipherSuiteName(id))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		list string
		want []uint16
	}{
		{"ECDHE-ECDSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305",
			[]uint16{stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, stdtls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}},
		{"ECDHE+AESGCM:!AES256", []uint16{stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, stdtls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}},
		{"AESGCM:-kRSA:kRSA+AES128+SHA256", []uint16{stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, stdtls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			stdtls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, stdtls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			stdtls.TLS_RSA_WITH_AES_128_GCM_SHA256, stdtls.TLS_RSA_WITH_AES_128_CBC_SHA256}},
	} {
		got, err := ParseCiphers(tc.list)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got  %s %v\n want %s", tc.list, name(got), err, name(tc.want))
		}
	}
	// nginx's default: AES and ChaCha20 suites, no 3DES or RC4.
	def, err := ParseCiphers(defaultCiphers)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range def {
		if n := stdtls.CipherSuiteName(id); strings.Contains(n, "3DES") || strings.Contains(n, "RC4") {
			t.Errorf("default has %s", n)
		}
	}
	// As with Debian's OpenSSL 3 (RC4 is in the legacy provider nginx does not
	// load), no list reaches RC4.
	all, _ := ParseCiphers("ALL")
	for _, id := range all {
		if n := stdtls.CipherSuiteName(id); strings.Contains(n, "RC4") {
			t.Errorf("ALL has %s", n)
		}
	}
	if got, err := ParseCiphers("RC4-SHA:ECDHE-RSA-RC4-SHA"); err == nil {
		t.Errorf("RC4 alone: %s, want an error", name(got))
	}
	if len(def) != 17 {
		t.Errorf("default: %d suites: %s", len(def), name(def))
	}
}
