package authbasic

import "github.com/numaproxy/numaproxy/httpcore"

// ParseBasic reads the value of an Authorization header as nginx's
// ngx_http_auth_basic_user does: see httpcore.ParseBasic, which $remote_user uses
// too.
func ParseBasic(buf, value []byte) (user, password, out []byte, ok bool) {
	return httpcore.ParseBasic(buf, value)
}

// AppendChallenge appends the value of the WWW-Authenticate header nginx sends
// with a 401: Basic realm="realm", the realm as it is (nginx escapes nothing).
func AppendChallenge(dst []byte, realm string) []byte {
	dst = append(dst, `Basic realm="`...)
	dst = append(dst, realm...)
	return append(dst, '"')
}
