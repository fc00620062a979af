package httpcore

// base64Values is nginx's base64 decoding table: 0-63, or 77 for a byte outside
// the alphabet. (authbasic has the same decoder; its tests import the proxy, which
// imports this package, so it cannot be shared from there.)
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

// AppendBasicUser appends $remote_user: the user name of a Basic Authorization
// value, as nginx's ngx_http_auth_basic_user reads it ("Basic " in any case, spaces,
// nginx's base64 of "user:password" with a non-empty user); nothing when there is
// none.
func AppendBasicUser(dst, value []byte) []byte {
	const scheme = "basic "
	if len(value) < len(scheme) {
		return dst
	}
	for i := range len(scheme) {
		if value[i]|0x20 != scheme[i] {
			return dst
		}
	}
	enc := value[len(scheme):]
	for len(enc) > 0 && enc[0] == ' ' {
		enc = enc[1:]
	}
	n := 0
	for ; n < len(enc) && enc[n] != '='; n++ {
		if base64Values[enc[n]] == 77 {
			return dst
		}
	}
	if n == 0 || n%4 == 1 {
		return dst
	}
	start := len(dst)
	s := enc[:n]
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
	for i, c := range dst[start:] {
		if c == ':' {
			if i == 0 {
				break
			}
			return dst[:start+i]
		}
	}
	return dst[:start]
}
