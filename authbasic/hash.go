package authbasic

import (
	"bytes"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/numaproxy/numaproxy/httpcore"
)

// Scheme is a password hash format of an htpasswd file.
type Scheme uint8

const (
	SchemeNone        Scheme = iota // no password matches the field: Hash.Problem says why
	SchemePlain                     // {PLAIN}password
	SchemeSHA                       // {SHA}base64(SHA-1(password))
	SchemeSSHA                      // {SSHA}base64(SHA-1(password salt) salt)
	SchemeAPR1                      // $apr1$: Apache's MD5 crypt
	SchemeMD5Crypt                  // $1$
	SchemeSHA256Crypt               // $5$
	SchemeSHA512Crypt               // $6$
	SchemeBcrypt                    // $2a$, $2b$, $2y$
	SchemeDES                       // traditional DES crypt, and bigcrypt beyond 13 characters
	SchemeBSDI                      // _: BSDi extended DES
	SchemeUnsupported               // a crypt(3) scheme Debian's libcrypt has and numaproxy does not
)

var schemeNames = [...]string{"none", "PLAIN", "SHA", "SSHA", "apr1", "md5crypt", "sha256crypt",
	"sha512crypt", "bcrypt", "descrypt", "bsdicrypt", "unsupported"}

func (s Scheme) String() string { return schemeNames[s] }

// maxPassphrase is libcrypt's CRYPT_MAX_PASSPHRASE_SIZE: crypt(3) fails on longer
// passwords, so nginx refuses them for every scheme but its own.
const maxPassphrase = 512

// Hash is the password field of one htpasswd line, parsed once when the file is read.
// Verify compares a password with it as nginx 1.22 on Debian 12 does: nginx's own
// schemes ({PLAIN}, {SHA}, {SSHA}, $apr1$) and libcrypt's crypt_r for the others;
// the result of either is compared with the whole field.
type Hash struct {
	field   string
	scheme  Scheme
	problem string // why no password matches ("" when one can)
	salt    string // apr1, md5, sha-crypt: the salt as used; DES: the setting
	rounds  int    // sha-crypt rounds, bcrypt cost, BSDi count
	custom  bool   // sha-crypt: "rounds=" written
	ssha    []byte // {SSHA}: digest (20 bytes) then salt
}

// ParseHash parses a password field as nginx hands it to ngx_crypt: the text after
// "user:" up to a ':', CR or LF, cut at a NUL byte.
func ParseHash(field []byte) *Hash {
	if i := bytes.IndexByte(field, 0); i >= 0 {
		field = field[:i]
	}
	h := &Hash{field: string(field)}
	f := h.field
	switch {
	case strings.HasPrefix(f, "$apr1$"):
		h.parseMD5("$apr1$", SchemeAPR1)
	case strings.HasPrefix(f, "{PLAIN}"):
		h.scheme = SchemePlain
	case strings.HasPrefix(f, "{SSHA}"):
		h.parseSSHA()
	case strings.HasPrefix(f, "{SHA}"):
		h.scheme = SchemeSHA
		if len(f) != 5+28 {
			h.never("a {SHA} hash is 28 characters of base64")
		}
	default:
		h.parseCrypt()
	}
	return h
}

// Scheme returns the field's scheme (SchemeNone when nothing matches it).
func (h *Hash) Scheme() Scheme { return h.scheme }

// Problem says why no password can match the field, or is "".
func (h *Hash) Problem() string { return h.problem }

// Slow reports whether verifying costs more than a few microseconds (the iterated
// schemes, and bigcrypt's block per 8 characters): such checks belong off the loop.
func (h *Hash) Slow() bool {
	switch h.scheme {
	case SchemeAPR1, SchemeMD5Crypt, SchemeSHA256Crypt, SchemeSHA512Crypt, SchemeBcrypt, SchemeBSDI:
		return true
	case SchemeDES:
		return len(h.field) > 13
	}
	return false
}

func (h *Hash) never(why string) {
	if h.scheme != SchemeUnsupported {
		h.scheme = SchemeNone
	}
	h.problem = why
}

// Verify reports whether password matches. Only the part before a NUL byte counts,
// as in nginx, which passes C strings to crypt.
func (h *Hash) Verify(password []byte) bool {
	if i := bytes.IndexByte(password, 0); i >= 0 {
		password = password[:i]
	}
	var buf [160]byte
	var out []byte
	switch h.scheme {
	case SchemePlain:
		return subtle.ConstantTimeCompare(password, []byte(h.field[7:])) == 1
	case SchemeSHA:
		sum := sha1.Sum(password)
		out = base64.StdEncoding.AppendEncode(buf[:0], sum[:])
		return subtle.ConstantTimeCompare(out, []byte(h.field[5:])) == 1
	case SchemeSSHA:
		return h.verifySSHA(password)
	case SchemeAPR1:
		out = appendMD5Crypt(buf[:0], password, "$apr1$", h.salt)
		return subtle.ConstantTimeCompare(out, []byte(h.field)) == 1
	case SchemeNone, SchemeUnsupported:
		return false
	}
	// The rest is crypt_r's.
	if len(password) >= maxPassphrase {
		return false
	}
	switch h.scheme {
	case SchemeMD5Crypt:
		out = appendMD5Crypt(buf[:0], password, "$1$", h.salt)
	case SchemeSHA256Crypt, SchemeSHA512Crypt:
		out = appendSHACrypt(buf[:0], password, h.scheme == SchemeSHA512Crypt, h.salt, h.rounds, h.custom)
	case SchemeDES:
		// libcrypt's bigcrypt takes every DES-salted setting: a password of more
		// than 8 characters against a setting of 13 or fewer is traditional DES of
		// its first 8, anything else a block per 8 characters.
		long := len(password) <= 8 || len(h.field) > 13
		out = appendDESCrypt(make([]byte, 0, 2+11*16), password, h.field[0], h.field[1], long)
	case SchemeBSDI:
		out = appendBSDICrypt(buf[:0], password, h.field)
	case SchemeBcrypt:
		if h.field[2] == 'a' && bcryptSafetyFlip(password) {
			return false
		}
		// bcrypt reads 72 bytes of the key; x/crypto refuses longer ones.
		return bcrypt.CompareHashAndPassword([]byte(h.field), password[:min(len(password), 72)]) == nil
	}
	return subtle.ConstantTimeCompare(out, []byte(h.field)) == 1
}

// parseMD5 reads "$apr1$salt$hash" or "$1$salt$hash": the salt ends at '$' and is
// cut to 8 characters, and the result is 22 characters.
func (h *Hash) parseMD5(magic string, s Scheme) {
	h.scheme = s
	rest := h.field[len(magic):]
	n := strings.IndexByte(rest, '$')
	if n < 0 {
		n = len(rest)
	}
	h.salt = rest[:min(n, 8)]
	if want := len(magic) + len(h.salt) + 1 + 22; len(h.field) != want || h.field[want-23] != '$' {
		h.never("malformed " + magic + " hash (" + magic + "salt$ and 22 characters)")
	}
}

// parseSSHA decodes the base64 after {SSHA} as nginx does. nginx re-encodes the
// digest it computes followed by the salt, so only a canonical encoding of at least
// 20 bytes can match.
func (h *Hash) parseSSHA() {
	h.scheme = SchemeSSHA
	enc := h.field[6:]
	dec, ok := httpcore.DecodeBase64(nil, []byte(enc))
	if !ok || len(dec) < sha1.Size || base64.StdEncoding.EncodeToString(dec) != enc {
		h.never("an {SSHA} hash is the padded base64 of a 20-byte digest and a salt")
		return
	}
	h.ssha = dec
}

func (h *Hash) verifySSHA(password []byte) bool {
	var buf [256]byte
	in := append(buf[:0], password...)
	in = append(in, h.ssha[sha1.Size:]...)
	sum := sha1.Sum(in)
	return subtle.ConstantTimeCompare(sum[:], h.ssha[:sha1.Size]) == 1
}

// unsupported are the crypt(3) schemes of Debian 12's libcrypt that numaproxy does
// not implement, in libcrypt's order of prefixes.
var unsupported = []struct{ prefix, name string }{
	{"$y$", "yescrypt"}, {"$gy$", "gost-yescrypt"}, {"$7$", "scrypt"},
	{"$2x$", "bcrypt $2x$ (sign extension bug)"}, {"$sha1", "sha1crypt"}, {"$md5", "sunmd5"},
	{"$3$", "NT hash"},
}

// parseCrypt follows libcrypt 4.4.33 (Debian 12): the setting must be printable
// ASCII without "!*:;\", then its prefix picks the scheme; a setting no scheme
// takes fails, and so does every comparison with it.
func (h *Hash) parseCrypt() {
	f := h.field
	for i := 0; i < len(f); i++ {
		if c := f[i]; c <= 0x20 || c >= 0x7f || strings.IndexByte("!*:;\\", c) >= 0 {
			h.never("crypt(3) refuses a hash with a space, a control or non-ASCII character, or one of !*:;\\")
			return
		}
	}
	for _, u := range unsupported {
		if strings.HasPrefix(f, u.prefix) {
			h.scheme = SchemeUnsupported
			h.problem = "the " + u.name + " scheme is not supported (nginx on Debian accepts it through libcrypt)"
			return
		}
	}
	switch {
	case strings.HasPrefix(f, "$2"):
		h.parseBcrypt()
	case strings.HasPrefix(f, "$6$"):
		h.parseSHACrypt("$6$", SchemeSHA512Crypt, 86)
	case strings.HasPrefix(f, "$5$"):
		h.parseSHACrypt("$5$", SchemeSHA256Crypt, 43)
	case strings.HasPrefix(f, "$1$"):
		h.parseMD5("$1$", SchemeMD5Crypt)
	case strings.HasPrefix(f, "_"):
		h.scheme = SchemeBSDI
		if len(f) != 20 || !allCrypt64(f[1:]) {
			h.never("a BSDi DES hash is \"_\" and 19 characters of crypt's alphabet")
		}
	case len(f) >= 2 && desChar(f[0]) >= 0 && desChar(f[1]) >= 0:
		h.scheme = SchemeDES
		// 13 characters, or bigcrypt's 2 + 11 per 8 characters of password.
		if len(f) < 13 || (len(f)-2)%11 != 0 || len(f) > 2+11*16 || !allCrypt64(f) {
			h.never("a DES crypt hash is 13 characters of crypt's alphabet (bigcrypt: 2 + 11 per block)")
		}
	case f == "":
		h.never("the password field is empty")
	default:
		h.never("not a password hash nginx knows")
	}
}

// parseSHACrypt reads "$5$[rounds=N$]salt$hash" as libcrypt does: N in 1000 ..
// 999999999 without leading zeros, the salt up to '$' and cut to 16 characters.
func (h *Hash) parseSHACrypt(magic string, s Scheme, hashLen int) {
	h.scheme, h.rounds = s, 5000
	rest := h.field[len(magic):]
	if num, ok := strings.CutPrefix(rest, "rounds="); ok {
		n, i := 0, 0
		for i < len(num) && num[i] >= '0' && num[i] <= '9' && n <= 999999999 {
			n = n*10 + int(num[i]-'0')
			i++
		}
		if i == 0 || num[0] == '0' || i == len(num) || num[i] != '$' || n < 1000 || n > 999999999 {
			h.never("rounds= must be 1000 to 999999999 and end with $")
			return
		}
		h.rounds, h.custom, rest = n, true, num[i+1:]
	}
	end := strings.IndexByte(rest, '$')
	if end < 0 {
		end = len(rest)
	}
	h.salt = rest[:min(end, 16)]
	prefix := len(h.field) - len(rest) + len(h.salt)
	if len(h.field) != prefix+1+hashLen || h.field[prefix] != '$' {
		h.never("malformed " + magic + " hash (" + magic + "[rounds=N$]salt$ and the hash)")
	}
}

// parseBcrypt checks the setting as crypt_blowfish does, and that the field is
// what it writes: 60 characters, the salt's last character canonical (it carries 2
// bits). x/crypto/bcrypt is laxer (it keeps a non-canonical salt and ignores
// characters past 60), so these checks are what make it answer as libcrypt does.
func (h *Hash) parseBcrypt() {
	h.scheme = SchemeBcrypt
	f := h.field
	if len(f) < 7 || (f[2] != 'a' && f[2] != 'b' && f[2] != 'y') || f[3] != '$' ||
		f[4] < '0' || f[4] > '3' || f[5] < '0' || f[5] > '9' || f[6] != '$' {
		h.never("not a bcrypt setting ($2a$, $2b$ or $2y$, two digits of cost, $)")
		return
	}
	h.rounds = int(f[4]-'0')*10 + int(f[5]-'0')
	switch {
	case h.rounds < 4 || h.rounds > 31:
		h.never("bcrypt cost must be 04 to 31")
	case len(f) != 60 || !allBcrypt64(f[7:]):
		h.never("a bcrypt hash is 60 characters")
	case strings.IndexByte(".Oeu", f[28]) < 0:
		h.never("the bcrypt salt's last character is not canonical")
	}
}

func allCrypt64(s string) bool {
	for i := 0; i < len(s); i++ {
		if desChar(s[i]) < 0 {
			return false
		}
	}
	return true
}

// allBcrypt64 checks bcrypt's alphabet: crypt's characters in another order.
func allBcrypt64(s string) bool { return allCrypt64(s) }

// bcryptSafetyFlip reports whether crypt_blowfish's $2a$ countermeasure changes the
// key schedule for this password: when sign extension of an 8-bit character would
// not have changed the buggy schedule at all. x/crypto cannot compute that variant,
// so such a password (some of those with 0xff bytes) never matches a $2a$ hash here.
func bcryptSafetyFlip(key []byte) bool {
	var sign, diff uint32
	p := 0
	for range 18 {
		var good, bug uint32
		for j := range 4 {
			var c byte
			if p < len(key) {
				c = key[p]
			}
			good = good<<8 | uint32(c)
			bug = bug<<8 | uint32(int32(int8(c)))
			if j > 0 {
				sign |= bug & 0x80
			}
			if p < len(key) {
				p++
			} else {
				p = 0
			}
		}
		diff |= good ^ bug
	}
	diff |= diff >> 16
	diff &= 0xffff
	diff += 0xffff
	sign <<= 9
	return sign&^diff&0x10000 != 0
}
