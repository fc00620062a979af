package tls

import (
	stdtls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/tls/tlstest"
)

// rawValue is a name value of a given ASN.1 string type.
func rawValue(tag int, b []byte) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: b}
}

func oid(s string) asn1.ObjectIdentifier {
	var o asn1.ObjectIdentifier
	for _, p := range strings.Split(s, ".") {
		n := 0
		for _, c := range p {
			n = n*10 + int(c-'0')
		}
		o = append(o, n)
	}
	return o
}

// testNames are distinguished names with what RFC 2253 escapes and the value
// types and attributes OpenSSL prints in its own ways.
func testNames(t *testing.T) [][]byte {
	t.Helper()
	attr := func(o string, v asn1.RawValue) pkix.AttributeTypeAndValue {
		return pkix.AttributeTypeAndValue{Type: oid(o), Value: v}
	}
	utf8s := func(s string) asn1.RawValue { return rawValue(asn1.TagUTF8String, []byte(s)) }
	names := []pkix.RDNSequence{
		{
			{attr("2.5.4.6", rawValue(asn1.TagPrintableString, []byte("FR")))},
			{attr("2.5.4.10", utf8s("Acme, Inc. + \"Co\"; <x>\\"))},
			{attr("2.5.4.11", utf8s("Ops")), attr("2.5.4.3", utf8s("multi"))},
			{attr("1.2.840.113549.1.9.1", rawValue(asn1.TagIA5String, []byte("a@b.example")))},
			{attr("2.5.4.3", utf8s("#lead and trail "))},
		},
		{
			{attr("2.5.4.3", utf8s(" José Ünïcode €"))},
			{attr("2.5.4.10", rawValue(asn1.TagBMPString, []byte{0x03, 0xa9, 0x00, 'z'}))},
			{attr("2.5.4.7", rawValue(asn1.TagT61String, []byte{'c', 0xe9}))},
			{attr("0.9.2342.19200300.100.1.25", rawValue(asn1.TagIA5String, []byte("example")))},
			{attr("0.9.2342.19200300.100.1.1", utf8s("uid\x01ctl"))},
			{attr("1.2.3.4", utf8s("unknown oid"))},
		},
	}
	var out [][]byte
	for _, n := range names {
		der, err := asn1.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, der)
	}
	return out
}

// TestDNAndCertVarsAsOpenSSL: the subject in RFC 2253 form, the serial, the
// fingerprint and the dates as `openssl x509` prints them with the flags nginx
// uses (-nameopt RFC2253 is XN_FLAG_RFC2253).
func TestDNAndCertVarsAsOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	ca, err := tlstest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	serials := []*big.Int{big.NewInt(0x80ff), big.NewInt(0x7f), new(big.Int).Lsh(big.NewInt(1), 100)}
	for i, subject := range testNames(t) {
		l, err := ca.IssueClient(tlstest.ClientOptions{RawSubject: subject, Serial: serials[i],
			NotBefore: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "c.pem")
		if err := os.WriteFile(file, l.CertPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("openssl", "x509", "-in", file, "-noout", "-nameopt", "RFC2253",
			"-subject", "-issuer", "-serial", "-fingerprint", "-sha1", "-startdate").CombinedOutput()
		if err != nil {
			t.Fatalf("openssl: %v\n%s", err, out)
		}
		c, err := x509.ParseCertificate(l.TLS.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		fp := strings.ToUpper(string(appendFingerprint(nil, c)))
		var fpColons []string
		for j := 0; j < len(fp); j += 2 {
			fpColons = append(fpColons, fp[j:j+2])
		}
		got := "subject=" + string(appendDN(nil, c.RawSubject)) + "\n" +
			"issuer=" + string(appendDN(nil, c.RawIssuer)) + "\n" +
			"serial=" + string(appendSerial(nil, c)) + "\n" +
			"sha1 Fingerprint=" + strings.Join(fpColons, ":") + "\n" +
			"notBefore=" + string(appendASN1Time(nil, c.NotBefore)) + "\n"
		if got != string(out) {
			t.Errorf("certificate %d:\nnumaproxy:\n%s\nopenssl:\n%s", i, got, out)
		}
	}
}

// TestOfferedListsFormat: $ssl_ciphers and $ssl_curves name what OpenSSL 3.0
// knows and print the rest as nginx does ("0x%02x%02x", "0x%04xd": lower-case
// hex), GREASE values included; the cipher table is sorted for its search.
func TestOfferedListsFormat(t *testing.T) {
	i := &Info{
		OfferedCiphers: []uint16{0x0a0a, 0x1301, 0xc02b, 0x000a, 0x00ff, 0x5600, 0xc100},
		OfferedCurves:  []stdtls.CurveID{0x2a2a, stdtls.X25519MLKEM768, stdtls.X25519, stdtls.CurveP256, 0x0100, 0x001f},
	}
	want := "0x0a0a:TLS_AES_128_GCM_SHA256:ECDHE-ECDSA-AES128-GCM-SHA256:0x000a:TLS_EMPTY_RENEGOTIATION_INFO_SCSV:TLS_FALLBACK_SCSV:GOST2012-KUZNYECHIK-KUZNYECHIKOMAC"
	if got := string(appendOfferedCiphers(nil, i)); got != want {
		t.Errorf("ciphers %q, want %q", got, want)
	}
	if got, want := string(appendOfferedCurves(nil, i)), "0x2a2a:0x11ec:X25519:prime256v1:ffdhe2048:0x001f"; got != want {
		t.Errorf("curves %q, want %q", got, want)
	}
	if got := string(appendOfferedCiphers(nil, &Info{})); got != "" {
		t.Errorf("no list: %q", got)
	}
	for k := 1; k < len(opensslCiphers); k++ {
		if opensslCiphers[k-1].id >= opensslCiphers[k].id {
			t.Fatalf("opensslCiphers not sorted at %#04x", opensslCiphers[k].id)
		}
	}
}
