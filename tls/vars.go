package tls

import (
	"crypto/sha1"
	stdtls "crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/numaproxy/numaproxy/httpcore"
)

// variables are nginx's ngx_http_ssl_module variables, formatted as nginx 1.22
// with OpenSSL 3 formats them.
var variables = []httpcore.Variable{
	{Name: "ssl_ciphers", Get: infoVar(appendOfferedCiphers)},
	{Name: "ssl_curves", Get: infoVar(appendOfferedCurves)},
	{Name: "ssl_protocol", Get: infoVar(func(dst []byte, i *Info) []byte { return append(dst, protocolName(i.Version)...) })},
	{Name: "ssl_cipher", Get: infoVar(func(dst []byte, i *Info) []byte { return append(dst, CipherName(i.Cipher)...) })},
	{Name: "ssl_curve", Get: infoVar(func(dst []byte, i *Info) []byte { return appendCurve(dst, i.Curve) })},
	{Name: "ssl_server_name", Get: infoVar(func(dst []byte, i *Info) []byte { return append(dst, i.ServerName...) })},
	{Name: "ssl_alpn_protocol", Get: infoVar(func(dst []byte, i *Info) []byte { return append(dst, i.ALPN...) })},
	{Name: "ssl_session_id", Get: infoVar(func(dst []byte, i *Info) []byte { return hex.AppendEncode(dst, i.SessionID()[:]) })},
	{Name: "ssl_session_reused", Get: infoVar(func(dst []byte, i *Info) []byte {
		if i.Resumed {
			return append(dst, 'r')
		}
		return append(dst, '.')
	})},
	// crypto/tls has no 0-RTT server: no request is ever early data.
	{Name: "ssl_early_data", Get: infoVar(func(dst []byte, _ *Info) []byte { return dst })},
	{Name: "ssl_client_verify", Get: infoVar(func(dst []byte, i *Info) []byte { return append(dst, i.Verify...) })},
	{Name: "ssl_client_s_dn", Get: certVar(func(dst []byte, c *x509.Certificate) []byte { return appendDN(dst, c.RawSubject) })},
	{Name: "ssl_client_i_dn", Get: certVar(func(dst []byte, c *x509.Certificate) []byte { return appendDN(dst, c.RawIssuer) })},
	{Name: "ssl_client_s_dn_legacy", Get: certVar(func(dst []byte, c *x509.Certificate) []byte { return appendDNLegacy(dst, c.RawSubject) })},
	{Name: "ssl_client_i_dn_legacy", Get: certVar(func(dst []byte, c *x509.Certificate) []byte { return appendDNLegacy(dst, c.RawIssuer) })},
	{Name: "ssl_client_serial", Get: certVar(appendSerial)},
	{Name: "ssl_client_fingerprint", Get: certVar(appendFingerprint)},
	{Name: "ssl_client_raw_cert", Get: certVar(func(dst []byte, c *x509.Certificate) []byte { return appendPEM(dst, c.Raw, "") })},
	{Name: "ssl_client_cert", Get: certVar(func(dst []byte, c *x509.Certificate) []byte { return appendPEM(dst, c.Raw, "\t") })},
	{Name: "ssl_client_escaped_cert", Get: certVar(func(dst []byte, c *x509.Certificate) []byte {
		var buf [4096]byte
		return appendEscapeComponent(dst, appendPEM(buf[:0], c.Raw, ""))
	})},
	{Name: "ssl_client_v_start", Get: certVar(func(dst []byte, c *x509.Certificate) []byte { return appendASN1Time(dst, c.NotBefore) })},
	{Name: "ssl_client_v_end", Get: certVar(func(dst []byte, c *x509.Certificate) []byte { return appendASN1Time(dst, c.NotAfter) })},
	{Name: "ssl_client_v_remain", Get: certVar(func(dst []byte, c *x509.Certificate) []byte {
		d := time.Until(c.NotAfter)
		if d < 0 {
			return append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(d/(24*time.Hour)), 10)
	})},
}

// infoVar is a variable of the connection's TLS state; empty without TLS.
func infoVar(get func(dst []byte, i *Info) []byte) func([]byte, *httpcore.Request, string) []byte {
	return func(dst []byte, r *httpcore.Request, _ string) []byte {
		if i := InfoOf(r.Conn()); i != nil {
			return get(dst, i)
		}
		return dst
	}
}

// certVar is a variable of the client's certificate; empty without one.
func certVar(get func(dst []byte, c *x509.Certificate) []byte) func([]byte, *httpcore.Request, string) []byte {
	return infoVar(func(dst []byte, i *Info) []byte {
		if len(i.Peer) == 0 {
			return dst
		}
		return get(dst, i.Peer[0])
	})
}

func protocolName(v uint16) string {
	if n := knownVersion(v); n != "" {
		return n
	}
	return "unknown"
}

// CipherName is OpenSSL's name of a suite: the RFC name for TLS 1.3 suites,
// OpenSSL's own (ECDHE-RSA-AES128-GCM-SHA256) for older ones.
func CipherName(id uint16) string {
	for i := range suiteTable {
		if suiteTable[i].id == id {
			return suiteTable[i].name
		}
	}
	return stdtls.CipherSuiteName(id)
}

// appendCurve is OpenSSL's name of the key exchange group.
func appendCurve(dst []byte, id stdtls.CurveID) []byte {
	switch id {
	case 0:
		return dst
	case stdtls.X25519:
		return append(dst, "X25519"...)
	case stdtls.CurveP256:
		return append(dst, "prime256v1"...)
	case stdtls.CurveP384:
		return append(dst, "secp384r1"...)
	case stdtls.CurveP521:
		return append(dst, "secp521r1"...)
	case stdtls.X25519MLKEM768:
		return append(dst, "X25519MLKEM768"...)
	}
	dst = append(dst, "0x"...)
	return appendHex4(dst, uint16(id))
}

const upperHex = "0123456789ABCDEF"

func appendHex4(dst []byte, v uint16) []byte {
	const digits = "0123456789abcdef"
	return append(dst, digits[v>>12], digits[v>>8&15], digits[v>>4&15], digits[v&15])
}

// appendSerial is i2a_ASN1_INTEGER's form: the magnitude's bytes in upper-case
// hex, "00" for zero.
func appendSerial(dst []byte, c *x509.Certificate) []byte {
	const digits = "0123456789ABCDEF"
	b := c.SerialNumber.Bytes()
	if c.SerialNumber.Sign() < 0 {
		dst = append(dst, '-')
	}
	if len(b) == 0 {
		return append(dst, "00"...)
	}
	for _, x := range b {
		dst = append(dst, digits[x>>4], digits[x&15])
	}
	return dst
}

// appendFingerprint is the SHA-1 of the certificate's DER in lower-case hex.
func appendFingerprint(dst []byte, c *x509.Certificate) []byte {
	sum := sha1.Sum(c.Raw)
	return hex.AppendEncode(dst, sum[:])
}

// appendPEM is the certificate in PEM; every line after the first starts with
// indent (nginx's deprecated $ssl_client_cert form).
func appendPEM(dst, der []byte, indent string) []byte {
	dst = append(dst, "-----BEGIN CERTIFICATE-----\n"...)
	for len(der) > 0 {
		n := min(len(der), 48) // 64 characters a line
		dst = append(dst, indent...)
		dst = base64.StdEncoding.AppendEncode(dst, der[:n])
		dst = append(dst, '\n')
		der = der[n:]
	}
	dst = append(dst, indent...)
	dst = append(dst, "-----END CERTIFICATE-----\n"...)
	if indent != "" {
		dst = dst[:len(dst)-1] // nginx drops the last newline of the indented form
	}
	return dst
}

// appendEscapeComponent is ngx_escape_uri's NGX_ESCAPE_URI_COMPONENT.
func appendEscapeComponent(dst, s []byte) []byte {
	const digits = "0123456789ABCDEF"
	for _, b := range s {
		if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
			b == '-' || b == '.' || b == '_' || b == '~' {
			dst = append(dst, b)
			continue
		}
		dst = append(dst, '%', digits[b>>4], digits[b&15])
	}
	return dst
}

// appendASN1Time is ASN1_TIME_print's form: "Dec  1 17:42:39 2026 GMT".
func appendASN1Time(dst []byte, t time.Time) []byte {
	t = t.UTC()
	dst = append(dst, t.Month().String()[:3]...)
	dst = append(dst, ' ')
	if t.Day() < 10 {
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(t.Day()), 10)
	dst = append(dst, ' ')
	dst = t.AppendFormat(dst, "15:04:05 2006")
	return append(dst, " GMT"...)
}

// attribute is one AttributeTypeAndValue of a distinguished name.
type attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// attrNames are OpenSSL's short names of name attributes.
var attrNames = map[string]string{
	"2.5.4.3": "CN", "2.5.4.4": "SN", "2.5.4.5": "serialNumber", "2.5.4.6": "C", "2.5.4.7": "L",
	"2.5.4.8": "ST", "2.5.4.9": "street", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.12": "title",
	"2.5.4.13": "description", "2.5.4.15": "businessCategory", "2.5.4.17": "postalCode",
	"2.5.4.41": "name", "2.5.4.42": "GN", "2.5.4.43": "initials", "2.5.4.44": "generationQualifier",
	"2.5.4.46": "dnQualifier", "2.5.4.65": "pseudonym", "2.5.4.97": "organizationIdentifier",
	"1.2.840.113549.1.9.1":       "emailAddress",
	"0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
	"1.3.6.1.4.1.311.60.2.1.1": "jurisdictionL", "1.3.6.1.4.1.311.60.2.1.2": "jurisdictionST",
	"1.3.6.1.4.1.311.60.2.1.3": "jurisdictionC",
}

// parseName reads a DER Name into its attributes in order, each with the index
// of its RDN.
func parseName(raw []byte) (attrs []attribute, rdn []int, ok bool) {
	var seq []asn1.RawValue
	if rest, err := asn1.Unmarshal(raw, &seq); err != nil || len(rest) > 0 {
		return nil, nil, false
	}
	for i, set := range seq {
		var as []attribute
		if _, err := asn1.UnmarshalWithParams(set.FullBytes, &as, "set"); err != nil {
			return nil, nil, false
		}
		for _, a := range as {
			attrs = append(attrs, a)
			rdn = append(rdn, i)
		}
	}
	return attrs, rdn, true
}

// appendDN is X509_NAME_print_ex with XN_FLAG_RFC2253 (nginx's $ssl_client_s_dn):
// the RDNs last first, "," between them and "+" inside one, OpenSSL's short
// names, values escaped by RFC 2253 with bytes above 0x7e as \XX, and unknown
// attributes or value types as #hex of their DER.
func appendDN(dst, raw []byte) []byte {
	attrs, rdn, ok := parseName(raw)
	if !ok {
		return dst
	}
	for i := len(attrs) - 1; i >= 0; i-- {
		if i < len(attrs)-1 {
			if rdn[i] == rdn[i+1] {
				dst = append(dst, '+')
			} else {
				dst = append(dst, ',')
			}
		}
		a := &attrs[i]
		name, known := attrNames[a.Type.String()]
		if !known {
			name = a.Type.String()
		}
		dst = append(dst, name...)
		dst = append(dst, '=')
		s, isString := stringValue(&a.Value)
		if !known || !isString {
			dst = append(dst, '#')
			for _, b := range a.Value.FullBytes {
				dst = append(dst, upperHex[b>>4], upperHex[b&15])
			}
			continue
		}
		dst = appendEscaped2253(dst, s)
	}
	return dst
}

func appendEscaped2253(dst []byte, s string) []byte {
	const digits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b == ',' || b == '+' || b == '"' || b == '\\' || b == '<' || b == '>' || b == ';',
			b == '#' && i == 0, b == ' ' && (i == 0 || i == len(s)-1):
			dst = append(dst, '\\', b)
		case b < 0x20 || b >= 0x7f:
			dst = append(dst, '\\', digits[b>>4], digits[b&15])
		default:
			dst = append(dst, b)
		}
	}
	return dst
}

// appendDNLegacy is X509_NAME_oneline (nginx's *_dn_legacy): the attributes in
// order, "/" before each RDN and "+" inside one, bytes outside ' '..'~' as
// \xXX, "/" and "+" escaped with a backslash.
func appendDNLegacy(dst, raw []byte) []byte {
	const digits = "0123456789ABCDEF"
	attrs, rdn, ok := parseName(raw)
	if !ok {
		return dst
	}
	for i := range attrs {
		a := &attrs[i]
		name, known := attrNames[a.Type.String()]
		if !known {
			name = a.Type.String()
		}
		if i > 0 && rdn[i] == rdn[i-1] {
			dst = append(dst, '+')
		} else {
			dst = append(dst, '/')
		}
		dst = append(dst, name...)
		dst = append(dst, '=')
		v := string(a.Value.Bytes)
		if a.Value.Tag == asn1.TagBMPString || a.Value.Tag == 28 {
			v, _ = stringValue(&a.Value)
		}
		for j := 0; j < len(v); j++ {
			b := v[j]
			switch {
			case b < ' ' || b > '~':
				dst = append(dst, '\\', 'x', digits[b>>4], digits[b&15])
			case b == '/' || b == '+':
				dst = append(dst, '\\', b)
			default:
				dst = append(dst, b)
			}
		}
	}
	return dst
}

// stringValue is a name value as UTF-8, for the ASN.1 string types.
func stringValue(v *asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, asn1.TagNumericString, 26 /* Visible */ :
		return string(v.Bytes), true
	case asn1.TagT61String: // as Latin-1, as OpenSSL reads it
		var b []byte
		for _, c := range v.Bytes {
			b = utf8.AppendRune(b, rune(c))
		}
		return string(b), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	case 28: // UniversalString
		if len(v.Bytes)%4 != 0 {
			return "", false
		}
		var b []byte
		for i := 0; i < len(v.Bytes); i += 4 {
			b = utf8.AppendRune(b, rune(uint32(v.Bytes[i])<<24|uint32(v.Bytes[i+1])<<16|uint32(v.Bytes[i+2])<<8|uint32(v.Bytes[i+3])))
		}
		return string(b), true
	}
	return "", false
}
