package tls

import (
	"encoding/asn1"
	"encoding/pem"
	"testing"

	"crypto/x509/pkix"
)

// FuzzDN: the DN formatting of $ssl_client_s_dn and its legacy form take any
// bytes (a client's certificate is parsed by crypto/x509 first, but the
// formatter must not rely on it) without panicking.
func FuzzDN(f *testing.F) {
	for _, n := range []pkix.Name{{CommonName: "a", Organization: []string{"b, c"}}, {Country: []string{"FR"}}} {
		der, _ := asn1.Marshal(n.ToRDNSequence())
		f.Add(der)
	}
	f.Add([]byte{0x30, 0x03, 0x31, 0x01, 0x30})
	f.Fuzz(func(t *testing.T, raw []byte) {
		appendDN(nil, raw)
		appendDNLegacy(nil, raw)
	})
}

// FuzzDecryptKeyPEM: ssl_certificate_key contents, encrypted or not, with or
// without passphrases, fail with an error rather than a panic.
func FuzzDecryptKeyPEM(f *testing.F) {
	f.Add([]byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIGbMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAgAAAAAAAAAAAICCAAwDAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEAAAAAAAAAAAAAAAAAAAAAAEQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n-----END ENCRYPTED PRIVATE KEY-----\n"), []byte("pw"))
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00000000000000000000000000000000"}, Bytes: make([]byte, 32)}), []byte("pw"))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), []byte(""))
	f.Fuzz(func(t *testing.T, data, password []byte) {
		decryptKeyPEM(data, [][]byte{password})
		decryptKeyPEM(data, nil)
	})
}
