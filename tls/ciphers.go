package tls

import (
	stdtls "crypto/tls"
	"errors"
	"slices"
	"strings"
)

// suiteInfo describes a TLS 1.0-1.2 suite crypto/tls implements, by OpenSSL's
// name and the properties OpenSSL's cipher-list keywords select on.
type suiteInfo struct {
	id   uint16
	name string // OpenSSL's
	kx   string // kRSA, kECDHE
	auth string // aRSA, aECDSA
	enc  string // AESGCM128, AESGCM256, AES128, AES256, CHACHA20, 3DES, RC4
	mac  string // AEAD, SHA1, SHA256, SHA384
}

// RC4 is left out: Debian's OpenSSL 3 has it only in the legacy provider,
// which nginx does not load, so no nginx cipher list reaches it.
var suiteTable = []suiteInfo{
	{stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "ECDHE-ECDSA-AES128-GCM-SHA256", "kECDHE", "aECDSA", "AESGCM128", "AEAD"},
	{stdtls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "ECDHE-RSA-AES128-GCM-SHA256", "kECDHE", "aRSA", "AESGCM128", "AEAD"},
	{stdtls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, "ECDHE-ECDSA-AES256-GCM-SHA384", "kECDHE", "aECDSA", "AESGCM256", "AEAD"},
	{stdtls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "ECDHE-RSA-AES256-GCM-SHA384", "kECDHE", "aRSA", "AESGCM256", "AEAD"},
	{stdtls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, "ECDHE-ECDSA-CHACHA20-POLY1305", "kECDHE", "aECDSA", "CHACHA20", "AEAD"},
	{stdtls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, "ECDHE-RSA-CHACHA20-POLY1305", "kECDHE", "aRSA", "CHACHA20", "AEAD"},
	{stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, "ECDHE-ECDSA-AES128-SHA256", "kECDHE", "aECDSA", "AES128", "SHA256"},
	{stdtls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256, "ECDHE-RSA-AES128-SHA256", "kECDHE", "aRSA", "AES128", "SHA256"},
	{stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, "ECDHE-ECDSA-AES128-SHA", "kECDHE", "aECDSA", "AES128", "SHA1"},
	{stdtls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, "ECDHE-RSA-AES128-SHA", "kECDHE", "aRSA", "AES128", "SHA1"},
	{stdtls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, "ECDHE-ECDSA-AES256-SHA", "kECDHE", "aECDSA", "AES256", "SHA1"},
	{stdtls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, "ECDHE-RSA-AES256-SHA", "kECDHE", "aRSA", "AES256", "SHA1"},
	{stdtls.TLS_RSA_WITH_AES_128_GCM_SHA256, "AES128-GCM-SHA256", "kRSA", "aRSA", "AESGCM128", "AEAD"},
	{stdtls.TLS_RSA_WITH_AES_256_GCM_SHA384, "AES256-GCM-SHA384", "kRSA", "aRSA", "AESGCM256", "AEAD"},
	{stdtls.TLS_RSA_WITH_AES_128_CBC_SHA256, "AES128-SHA256", "kRSA", "aRSA", "AES128", "SHA256"},
	{stdtls.TLS_RSA_WITH_AES_128_CBC_SHA, "AES128-SHA", "kRSA", "aRSA", "AES128", "SHA1"},
	{stdtls.TLS_RSA_WITH_AES_256_CBC_SHA, "AES256-SHA", "kRSA", "aRSA", "AES256", "SHA1"},
	{stdtls.TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA, "ECDHE-RSA-DES-CBC3-SHA", "kECDHE", "aRSA", "3DES", "SHA1"},
	{stdtls.TLS_RSA_WITH_3DES_EDE_CBC_SHA, "DES-CBC3-SHA", "kRSA", "aRSA", "3DES", "SHA1"},
}

// keyword reports whether the OpenSSL cipher-list alias word selects s; known
// is false for words that are not OpenSSL aliases of anything crypto/tls has.
func keyword(word string, s *suiteInfo) (match, known bool) {
	aes := strings.HasPrefix(s.enc, "AES")
	switch word {
	case "ALL", "DEFAULT":
		return true, true
	case "HIGH": // OpenSSL 3: AES and ChaCha20 suites (3DES went to MEDIUM, RC4 is gone)
		return aes || s.enc == "CHACHA20", true
	case "MEDIUM":
		return s.enc == "3DES" || s.enc == "RC4", true
	case "kRSA", "RSA": // RSA: either kRSA or aRSA
		return s.kx == "kRSA" || word == "RSA" && s.auth == "aRSA", true
	case "aRSA":
		return s.auth == "aRSA", true
	case "kECDHE", "kEECDH", "ECDHE", "EECDH":
		return s.kx == "kECDHE", true
	case "aECDSA", "ECDSA":
		return s.auth == "aECDSA", true
	case "AES":
		return aes, true
	case "AES128":
		return s.enc == "AES128" || s.enc == "AESGCM128", true
	case "AES256":
		return s.enc == "AES256" || s.enc == "AESGCM256", true
	case "AESGCM":
		return strings.HasPrefix(s.enc, "AESGCM"), true
	case "CHACHA20":
		return s.enc == "CHACHA20", true
	case "3DES":
		return s.enc == "3DES", true
	case "RC4":
		return s.enc == "RC4", true
	case "SHA1", "SHA":
		return s.mac == "SHA1", true
	case "SHA256":
		return s.mac == "SHA256" || s.mac == "AEAD" && s.enc != "AESGCM256", true
	case "SHA384":
		return s.enc == "AESGCM256", true
	case "TLSv1.2":
		return s.mac != "SHA1", true
	case "TLSv1", "SSLv3":
		return s.mac == "SHA1", true
	}
	for i := range suiteTable {
		if suiteTable[i].name == word {
			return s.name == word, true
		}
	}
	return false, false
}

// ParseCiphers reads an OpenSSL cipher list (nginx's ssl_ciphers) into the
// TLS 1.2 suites crypto/tls implements. As OpenSSL, it skips words it does not
// know (suites crypto/tls lacks: DHE, CAMELLIA, ...) and fails only when nothing
// is left.
func ParseCiphers(list string) ([]uint16, error) {
	var out []uint16
	banned := map[uint16]bool{}
	for _, elem := range strings.FieldsFunc(list, func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		if strings.HasPrefix(elem, "@") { // @STRENGTH, @SECLEVEL=n: crypto/tls orders and limits itself
			continue
		}
		op := byte(0)
		if elem[0] == '!' || elem[0] == '-' || elem[0] == '+' {
			op, elem = elem[0], elem[1:]
		}
		var sel []uint16
		for i := range suiteTable {
			s := &suiteTable[i]
			all := elem != ""
			for _, w := range strings.Split(elem, "+") {
				if m, _ := keyword(w, s); !m {
					all = false
					break
				}
			}
			if all {
				sel = append(sel, s.id)
			}
		}
		switch op {
		case '!':
			for _, id := range sel {
				banned[id] = true
			}
			out = slices.DeleteFunc(out, func(id uint16) bool { return banned[id] })
		case '-':
			out = slices.DeleteFunc(out, func(id uint16) bool { return slices.Contains(sel, id) })
		case '+':
			var moved []uint16
			out = slices.DeleteFunc(out, func(id uint16) bool {
				if slices.Contains(sel, id) {
					moved = append(moved, id)
					return true
				}
				return false
			})
			out = append(out, moved...)
		default:
			for _, id := range sel {
				if !banned[id] && !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cipher suite crypto/tls implements matches")
	}
	return out, nil
}
