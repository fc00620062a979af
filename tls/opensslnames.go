package tls

import (
	"cmp"
	"slices"
)

// opensslCiphers are the suites Debian's OpenSSL 3.0 knows by name
// (SSL_CIPHER_find, SSL_CIPHER_get_name: what nginx's $ssl_ciphers prints),
// by their two-byte identifiers, sorted. Made from `openssl ciphers -V` (with
// the legacy provider, ALL:COMPLEMENTOFALL:@SECLEVEL=0 and every TLS 1.3
// suite), the GOST and IDEA suites its libssl has without a provider for
// them, and the two signalling values. It has no 3DES or RC4 suite: Debian's
// build leaves them out, so nginx prints those in hex too.
var opensslCiphers = []opensslName{
	{0x0001, "NULL-MD5"},
	{0x0002, "NULL-SHA"},
	{0x0007, "IDEA-CBC-SHA"},
	{0x002C, "PSK-NULL-SHA"},
	{0x002D, "DHE-PSK-NULL-SHA"},
	{0x002E, "RSA-PSK-NULL-SHA"},
	{0x002F, "AES128-SHA"},
	{0x0032, "DHE-DSS-AES128-SHA"},
	{0x0033, "DHE-RSA-AES128-SHA"},
	{0x0034, "ADH-AES128-SHA"},
	{0x0035, "AES256-SHA"},
	{0x0038, "DHE-DSS-AES256-SHA"},
	{0x0039, "DHE-RSA-AES256-SHA"},
	{0x003A, "ADH-AES256-SHA"},
	{0x003B, "NULL-SHA256"},
	{0x003C, "AES128-SHA256"},
	{0x003D, "AES256-SHA256"},
	{0x0040, "DHE-DSS-AES128-SHA256"},
	{0x0041, "CAMELLIA128-SHA"},
	{0x0044, "DHE-DSS-CAMELLIA128-SHA"},
	{0x0045, "DHE-RSA-CAMELLIA128-SHA"},
	{0x0046, "ADH-CAMELLIA128-SHA"},
	{0x0067, "DHE-RSA-AES128-SHA256"},
	{0x006A, "DHE-DSS-AES256-SHA256"},
	{0x006B, "DHE-RSA-AES256-SHA256"},
	{0x006C, "ADH-AES128-SHA256"},
	{0x006D, "ADH-AES256-SHA256"},
	{0x0081, "GOST2001-GOST89-GOST89"},
	{0x0083, "GOST2001-NULL-GOST94"},
	{0x0084, "CAMELLIA256-SHA"},
	{0x0087, "DHE-DSS-CAMELLIA256-SHA"},
	{0x0088, "DHE-RSA-CAMELLIA256-SHA"},
	{0x0089, "ADH-CAMELLIA256-SHA"},
	{0x008C, "PSK-AES128-CBC-SHA"},
	{0x008D, "PSK-AES256-CBC-SHA"},
	{0x0090, "DHE-PSK-AES128-CBC-SHA"},
	{0x0091, "DHE-PSK-AES256-CBC-SHA"},
	{0x0094, "RSA-PSK-AES128-CBC-SHA"},
	{0x0095, "RSA-PSK-AES256-CBC-SHA"},
	{0x0096, "SEED-SHA"},
	{0x0099, "DHE-DSS-SEED-SHA"},
	{0x009A, "DHE-RSA-SEED-SHA"},
	{0x009B, "ADH-SEED-SHA"},
	{0x009C, "AES128-GCM-SHA256"},
	{0x009D, "AES256-GCM-SHA384"},
	{0x009E, "DHE-RSA-AES128-GCM-SHA256"},
	{0x009F, "DHE-RSA-AES256-GCM-SHA384"},
	{0x00A2, "DHE-DSS-AES128-GCM-SHA256"},
	{0x00A3, "DHE-DSS-AES256-GCM-SHA384"},
	{0x00A6, "ADH-AES128-GCM-SHA256"},
	{0x00A7, "ADH-AES256-GCM-SHA384"},
	{0x00A8, "PSK-AES128-GCM-SHA256"},
	{0x00A9, "PSK-AES256-GCM-SHA384"},
	{0x00AA, "DHE-PSK-AES128-GCM-SHA256"},
	{0x00AB, "DHE-PSK-AES256-GCM-SHA384"},
	{0x00AC, "RSA-PSK-AES128-GCM-SHA256"},
	{0x00AD, "RSA-PSK-AES256-GCM-SHA384"},
	{0x00AE, "PSK-AES128-CBC-SHA256"},
	{0x00AF, "PSK-AES256-CBC-SHA384"},
	{0x00B0, "PSK-NULL-SHA256"},
	{0x00B1, "PSK-NULL-SHA384"},
	{0x00B2, "DHE-PSK-AES128-CBC-SHA256"},
	{0x00B3, "DHE-PSK-AES256-CBC-SHA384"},
	{0x00B4, "DHE-PSK-NULL-SHA256"},
	{0x00B5, "DHE-PSK-NULL-SHA384"},
	{0x00B6, "RSA-PSK-AES128-CBC-SHA256"},
	{0x00B7, "RSA-PSK-AES256-CBC-SHA384"},
	{0x00B8, "RSA-PSK-NULL-SHA256"},
	{0x00B9, "RSA-PSK-NULL-SHA384"},
	{0x00BA, "CAMELLIA128-SHA256"},
	{0x00BD, "DHE-DSS-CAMELLIA128-SHA256"},
	{0x00BE, "DHE-RSA-CAMELLIA128-SHA256"},
	{0x00BF, "ADH-CAMELLIA128-SHA256"},
	{0x00C0, "CAMELLIA256-SHA256"},
	{0x00C3, "DHE-DSS-CAMELLIA256-SHA256"},
	{0x00C4, "DHE-RSA-CAMELLIA256-SHA256"},
	{0x00C5, "ADH-CAMELLIA256-SHA256"},
	{0x00FF, "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"},
	{0x1301, "TLS_AES_128_GCM_SHA256"},
	{0x1302, "TLS_AES_256_GCM_SHA384"},
	{0x1303, "TLS_CHACHA20_POLY1305_SHA256"},
	{0x1304, "TLS_AES_128_CCM_SHA256"},
	{0x1305, "TLS_AES_128_CCM_8_SHA256"},
	{0x5600, "TLS_FALLBACK_SCSV"},
	{0xC006, "ECDHE-ECDSA-NULL-SHA"},
	{0xC009, "ECDHE-ECDSA-AES128-SHA"},
	{0xC00A, "ECDHE-ECDSA-AES256-SHA"},
	{0xC010, "ECDHE-RSA-NULL-SHA"},
	{0xC013, "ECDHE-RSA-AES128-SHA"},
	{0xC014, "ECDHE-RSA-AES256-SHA"},
	{0xC015, "AECDH-NULL-SHA"},
	{0xC018, "AECDH-AES128-SHA"},
	{0xC019, "AECDH-AES256-SHA"},
	{0xC01D, "SRP-AES-128-CBC-SHA"},
	{0xC01E, "SRP-RSA-AES-128-CBC-SHA"},
	{0xC01F, "SRP-DSS-AES-128-CBC-SHA"},
	{0xC020, "SRP-AES-256-CBC-SHA"},
	{0xC021, "SRP-RSA-AES-256-CBC-SHA"},
	{0xC022, "SRP-DSS-AES-256-CBC-SHA"},
	{0xC023, "ECDHE-ECDSA-AES128-SHA256"},
	{0xC024, "ECDHE-ECDSA-AES256-SHA384"},
	{0xC027, "ECDHE-RSA-AES128-SHA256"},
	{0xC028, "ECDHE-RSA-AES256-SHA384"},
	{0xC02B, "ECDHE-ECDSA-AES128-GCM-SHA256"},
	{0xC02C, "ECDHE-ECDSA-AES256-GCM-SHA384"},
	{0xC02F, "ECDHE-RSA-AES128-GCM-SHA256"},
	{0xC030, "ECDHE-RSA-AES256-GCM-SHA384"},
	{0xC035, "ECDHE-PSK-AES128-CBC-SHA"},
	{0xC036, "ECDHE-PSK-AES256-CBC-SHA"},
	{0xC037, "ECDHE-PSK-AES128-CBC-SHA256"},
	{0xC038, "ECDHE-PSK-AES256-CBC-SHA384"},
	{0xC039, "ECDHE-PSK-NULL-SHA"},
	{0xC03A, "ECDHE-PSK-NULL-SHA256"},
	{0xC03B, "ECDHE-PSK-NULL-SHA384"},
	{0xC050, "ARIA128-GCM-SHA256"},
	{0xC051, "ARIA256-GCM-SHA384"},
	{0xC052, "DHE-RSA-ARIA128-GCM-SHA256"},
	{0xC053, "DHE-RSA-ARIA256-GCM-SHA384"},
	{0xC056, "DHE-DSS-ARIA128-GCM-SHA256"},
	{0xC057, "DHE-DSS-ARIA256-GCM-SHA384"},
	{0xC05C, "ECDHE-ECDSA-ARIA128-GCM-SHA256"},
	{0xC05D, "ECDHE-ECDSA-ARIA256-GCM-SHA384"},
	{0xC060, "ECDHE-ARIA128-GCM-SHA256"},
	{0xC061, "ECDHE-ARIA256-GCM-SHA384"},
	{0xC06A, "PSK-ARIA128-GCM-SHA256"},
	{0xC06B, "PSK-ARIA256-GCM-SHA384"},
	{0xC06C, "DHE-PSK-ARIA128-GCM-SHA256"},
	{0xC06D, "DHE-PSK-ARIA256-GCM-SHA384"},
	{0xC06E, "RSA-PSK-ARIA128-GCM-SHA256"},
	{0xC06F, "RSA-PSK-ARIA256-GCM-SHA384"},
	{0xC072, "ECDHE-ECDSA-CAMELLIA128-SHA256"},
	{0xC073, "ECDHE-ECDSA-CAMELLIA256-SHA384"},
	{0xC076, "ECDHE-RSA-CAMELLIA128-SHA256"},
	{0xC077, "ECDHE-RSA-CAMELLIA256-SHA384"},
	{0xC094, "PSK-CAMELLIA128-SHA256"},
	{0xC095, "PSK-CAMELLIA256-SHA384"},
	{0xC096, "DHE-PSK-CAMELLIA128-SHA256"},
	{0xC097, "DHE-PSK-CAMELLIA256-SHA384"},
	{0xC098, "RSA-PSK-CAMELLIA128-SHA256"},
	{0xC099, "RSA-PSK-CAMELLIA256-SHA384"},
	{0xC09A, "ECDHE-PSK-CAMELLIA128-SHA256"},
	{0xC09B, "ECDHE-PSK-CAMELLIA256-SHA384"},
	{0xC09C, "AES128-CCM"},
	{0xC09D, "AES256-CCM"},
	{0xC09E, "DHE-RSA-AES128-CCM"},
	{0xC09F, "DHE-RSA-AES256-CCM"},
	{0xC0A0, "AES128-CCM8"},
	{0xC0A1, "AES256-CCM8"},
	{0xC0A2, "DHE-RSA-AES128-CCM8"},
	{0xC0A3, "DHE-RSA-AES256-CCM8"},
	{0xC0A4, "PSK-AES128-CCM"},
	{0xC0A5, "PSK-AES256-CCM"},
	{0xC0A6, "DHE-PSK-AES128-CCM"},
	{0xC0A7, "DHE-PSK-AES256-CCM"},
	{0xC0A8, "PSK-AES128-CCM8"},
	{0xC0A9, "PSK-AES256-CCM8"},
	{0xC0AA, "DHE-PSK-AES128-CCM8"},
	{0xC0AB, "DHE-PSK-AES256-CCM8"},
	{0xC0AC, "ECDHE-ECDSA-AES128-CCM"},
	{0xC0AD, "ECDHE-ECDSA-AES256-CCM"},
	{0xC0AE, "ECDHE-ECDSA-AES128-CCM8"},
	{0xC0AF, "ECDHE-ECDSA-AES256-CCM8"},
	{0xC100, "GOST2012-KUZNYECHIK-KUZNYECHIKOMAC"},
	{0xC101, "GOST2012-MAGMA-MAGMAOMAC"},
	{0xC102, "IANA-GOST2012-GOST8912-GOST8912"},
	{0xCCA8, "ECDHE-RSA-CHACHA20-POLY1305"},
	{0xCCA9, "ECDHE-ECDSA-CHACHA20-POLY1305"},
	{0xCCAA, "DHE-RSA-CHACHA20-POLY1305"},
	{0xCCAB, "PSK-CHACHA20-POLY1305"},
	{0xCCAC, "ECDHE-PSK-CHACHA20-POLY1305"},
	{0xCCAD, "DHE-PSK-CHACHA20-POLY1305"},
	{0xCCAE, "RSA-PSK-CHACHA20-POLY1305"},
	{0xFF85, "LEGACY-GOST2012-GOST8912-GOST8912"},
	{0xFF87, "GOST2012-NULL-GOST12"},
}

// opensslGroups are OpenSSL 3.0's names (OBJ_nid2sn) of the groups its
// default provider offers TLS (what nginx's $ssl_curves prints by name), by
// their identifiers; others print in hex.
var opensslGroups = map[uint16]string{
	1: "sect163k1", 2: "sect163r1", 3: "sect163r2", 4: "sect193r1", 5: "sect193r2", 6: "sect233k1",
	7: "sect233r1", 8: "sect239k1", 9: "sect283k1", 10: "sect283r1", 11: "sect409k1", 12: "sect409r1",
	13: "sect571k1", 14: "sect571r1", 15: "secp160k1", 16: "secp160r1", 17: "secp160r2", 18: "secp192k1",
	19: "prime192v1", 20: "secp224k1", 21: "secp224r1", 22: "secp256k1", 23: "prime256v1", 24: "secp384r1",
	25: "secp521r1", 26: "brainpoolP256r1", 27: "brainpoolP384r1", 28: "brainpoolP512r1", 29: "X25519",
	30: "X448", 256: "ffdhe2048", 257: "ffdhe3072", 258: "ffdhe4096", 259: "ffdhe6144", 260: "ffdhe8192",
}

// opensslCipherName is OpenSSL's name of a suite identifier, "" if it has none.
func opensslCipherName(id uint16) string {
	i, ok := slices.BinarySearchFunc(opensslCiphers, id, func(e opensslName, id uint16) int { return cmp.Compare(e.id, id) })
	if !ok {
		return ""
	}
	return opensslCiphers[i].name
}

type opensslName struct {
	id   uint16
	name string
}

// appendOfferedCiphers is nginx's $ssl_ciphers: the suites the client
// offered, ":" between, by OpenSSL's names, the others in hex ("0x00ff").
func appendOfferedCiphers(dst []byte, i *Info) []byte {
	for k, id := range i.OfferedCiphers {
		if k > 0 {
			dst = append(dst, ':')
		}
		if name := opensslCipherName(id); name != "" {
			dst = append(dst, name...)
			continue
		}
		dst = append(dst, "0x"...)
		dst = appendHex4(dst, id)
	}
	return dst
}

// appendOfferedCurves is nginx's $ssl_curves: the groups the client offered,
// by OpenSSL's names, the others in hex.
func appendOfferedCurves(dst []byte, i *Info) []byte {
	for k, id := range i.OfferedCurves {
		if k > 0 {
			dst = append(dst, ':')
		}
		if name := opensslGroups[uint16(id)]; name != "" {
			dst = append(dst, name...)
			continue
		}
		dst = append(dst, "0x"...)
		dst = appendHex4(dst, uint16(id))
	}
	return dst
}
