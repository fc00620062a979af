package http1

import "encoding/binary"

// Byte classes from RFC 9110 §5.6.2 (tchar), §5.5 (field-vchar, obs-text)
// and RFC 3986 (URI and host characters), as lookup tables.
const (
	classToken      = 1 << iota // tchar
	classFieldValue             // field-vchar / SP / HTAB
	classTarget                 // a byte allowed in a request-target
	classRegName                // reg-name: unreserved / sub-delims
	classHex                    // HEXDIG
	classNginxName              // a letter, digit or "-": what nginx calls a valid field name
)

var byteClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		isAlpha := 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
		isDigit := '0' <= b && b <= '9'
		if isAlpha || isDigit || b < 0x80 && contains("!#$%&'*+-.^_`|~", b) {
			t[c] |= classToken
		}
		if b == '\t' || 0x20 <= b && b != 0x7f {
			t[c] |= classFieldValue
		}
		// Any visible byte except '#' (a fragment never travels, RFC 9112
		// §3.2), plus obs-text as nginx, net/http and fasthttp accept it.
		if 0x20 < b && b != 0x7f && b != '#' {
			t[c] |= classTarget
		}
		if isAlpha || isDigit || b < 0x80 && contains("-._~!$&'()*+,;=", b) {
			t[c] |= classRegName
		}
		if isDigit || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F' {
			t[c] |= classHex
		}
		if isAlpha || isDigit || b == '-' {
			t[c] |= classNginxName
		}
	}
	return t
}()

func contains(set string, b byte) bool {
	for i := 0; i < len(set); i++ {
		if set[i] == b {
			return true
		}
	}
	return false
}

func isToken(s []byte) bool { return IsToken(s) }

// IsToken reports an RFC 9110 token: a valid field name or method.
func IsToken[T string | []byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if byteClass[s[i]]&classToken == 0 {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// EqualFold reports whether a and b are equal under ASCII case folding.
// Unlike bytes.EqualFold it never folds non-ASCII, as HTTP field names require.
func EqualFold(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i] != b[i] && lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// IsField reports whether a field name is canonical (as usually written,
// "Content-Length") under ASCII case folding: names mostly come as written, and
// the exact comparison is a few word compares before EqualFold's byte loop.
func IsField(name []byte, canonical string) bool {
	return string(name) == canonical || EqualFold(name, canonical)
}

// equalFoldBytes is EqualFold for two byte slices.
func equalFoldBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i] != b[i] && lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// trimOWS strips optional whitespace (SP, HTAB) from both ends.
func trimOWS(s []byte) []byte {
	for len(s) > 0 && isOWS(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isOWS(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// parseDecimal parses 1*DIGIT into a non-negative int64; false on anything
// else or overflow (RFC 9110 §8.6: Content-Length = 1*DIGIT).
func parseDecimal(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if !isDigit(c) {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// validFieldValue reports whether every byte of v may appear in a field
// value: SP, HTAB, VCHAR or obs-text, no other CTL (RFC 9110 §5.5). Field
// values are most of a head, so it checks eight bytes at a time and only
// looks closer at a word holding a byte below 0x20 or a DEL; the last word of a
// value of eight bytes or more overlaps the one before, so no byte is left to a
// loop.
func validFieldValue(v []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	if n := len(v); n >= 8 {
		for i := 0; ; i += 8 {
			i = min(i, n-8)
			w := binary.LittleEndian.Uint64(v[i:])
			below20 := (w - 0x20*ones) & ^w & highs
			del := w ^ 0x7f*ones
			isDel := (del - ones) & ^del & highs
			if below20|isDel != 0 {
				for _, c := range v[i : i+8] {
					if byteClass[c]&classFieldValue == 0 {
						return false
					}
				}
			}
			if i == n-8 {
				return true
			}
		}
	}
	for _, c := range v {
		if byteClass[c]&classFieldValue == 0 {
			return false
		}
	}
	return true
}
