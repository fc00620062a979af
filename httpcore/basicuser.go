package httpcore

// base64Values is nginx's base64 decoding table: 0-63, or 77 for a byte outside
// the alphabet.
var base64Values = func() (t [256]byte) {
	for i := range t {
		t[i] = 77
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return
}()

// DecodeBase64 is ngx_decode_base64: input ends at the first '=' (whatever
// follows is ignored), a byte outside the alphabet before it fails, so does a
// length of 4n+1, and the bits of an incomplete last group are dropped.
func DecodeBase64(dst, src []byte) ([]byte, bool) {
	n := 0
	for ; n < len(src) && src[n] != '='; n++ {
		if base64Values[src[n]] == 77 {
			return dst, false
		}
	}
	if n%4 == 1 {
		return dst, false
	}
	s := src[:n]
	for len(s) > 3 {
		a, b, c, d := base64Values[s[0]], base64Values[s[1]], base64Values[s[2]], base64Values[s[3]]
		dst = append(dst, a<<2|b>>4, b<<4|c>>2, c<<6|d)
		s = s[4:]
	}
	if len(s) > 1 {
		dst = append(dst, base64Values[s[0]]<<2|base64Values[s[1]]>>4)
	}
	if len(s) > 2 {
		dst = append(dst, base64Values[s[1]]<<4|base64Values[s[2]]>>2)
	}
	return dst, true
}

// ParseBasic reads the value of an Authorization header as nginx's
// ngx_http_auth_basic_user does: "Basic" in any case and one space, then any
// further spaces, then base64 (nginx's decoder) of "user:password" split at the first
// colon. The user must not be empty; the password may be. The decoded text is
// appended to buf, which user and password point into. ok is false when there are
// no credentials (nginx answers 401 with a challenge).
func ParseBasic(buf, value []byte) (user, password, out []byte, ok bool) {
	const scheme = "basic "
	if len(value) < len(scheme) {
		return nil, nil, buf, false
	}
	for i := range len(scheme) - 1 {
		if value[i]|0x20 != scheme[i] {
			return nil, nil, buf, false
		}
	}
	if value[len(scheme)-1] != ' ' {
		return nil, nil, buf, false
	}
	enc := value[len(scheme):]
	for len(enc) > 0 && enc[0] == ' ' {
		enc = enc[1:]
	}
	if len(enc) == 0 {
		return nil, nil, buf, false
	}
	start := len(buf)
	buf, ok = DecodeBase64(buf, enc)
	if !ok {
		return nil, nil, buf[:start], false
	}
	auth := buf[start:]
	colon := -1
	for i, c := range auth {
		if c == ':' {
			colon = i
			break
		}
	}
	if colon <= 0 {
		return nil, nil, buf[:start], false
	}
	return auth[:colon:colon], auth[colon+1:], buf, true
}

// AppendBasicUser appends $remote_user: the user name of a Basic Authorization
// value (ParseBasic); nothing when there is none.
func AppendBasicUser(dst, value []byte) []byte {
	user, _, out, ok := ParseBasic(dst, value)
	if !ok {
		return dst
	}
	return out[:len(dst)+len(user)]
}
