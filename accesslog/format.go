package accesslog

import (
	"encoding/binary"
	"fmt"
	"github.com/numaproxy/numaproxy/conf"
	"strings"

	"github.com/numaproxy/numaproxy/httpcore"
)

// Escape is a log_format's escape= parameter.
type Escape uint8

const (
	EscapeDefault Escape = iota // `"`, `\`, bytes below 0x20 and from 0x7f as \xHH; "-" for a value not found
	EscapeJSON                  // JSON string escapes; nothing for a value not found
	EscapeNone                  // as is; nothing for a value not found
)

// Format is a compiled log_format.
type Format struct {
	Name   string
	Escape Escape
	ops    []op
}

// op is literal text or a variable.
type op struct {
	lit string
	ref httpcore.Ref
	v   bool
}

// combinedFormat is nginx's predefined combined format.
const combinedFormat = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`

// compileFormat parses the strings of a log_format, joined as nginx joins them (no
// separator), as nginx's ngx_http_log_compile_format: "$name" and "${name}", a "$"
// followed by anything else being an error.
func compileFormat(vars *httpcore.Variables, name string, esc Escape, parts []string, pos conf.Pos) (*Format, error) {
	f := &Format{Name: name, Escape: esc}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f.ops = append(f.ops, op{lit: lit.String()})
			lit.Reset()
		}
	}
	for _, s := range parts {
		for i := 0; i < len(s); i++ {
			if s[i] != '$' {
				lit.WriteByte(s[i])
				continue
			}
			i++
			var vname string
			if i < len(s) && s[i] == '{' {
				end := strings.IndexByte(s[i+1:], '}')
				if end < 0 {
					return nil, fmt.Errorf("the closing bracket in %q variable is missing", s[i+1:])
				}
				vname = s[i+1 : i+1+end]
				i += 1 + end
			} else {
				j := i
				for j < len(s) && isVarChar(s[j]) {
					j++
				}
				vname = s[i:j]
				i = j - 1
			}
			if vname == "" {
				return nil, fmt.Errorf("invalid parameter %q", s)
			}
			ref, err := vars.Ref(vname, pos)
			if err != nil {
				return nil, err
			}
			flush()
			f.ops = append(f.ops, op{ref: ref, v: true})
		}
	}
	flush()
	return f, nil
}

func isVarChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// appendLine formats the line for r into dst (without the line end); val is a
// scratch buffer for the values, returned for reuse.
func (f *Format) appendLine(dst, val []byte, r *httpcore.Request) ([]byte, []byte) {
	for i := range f.ops {
		o := &f.ops[i]
		if !o.v {
			dst = append(dst, o.lit...)
			continue
		}
		// The value goes into the line as it is; the few that hold a byte to
		// escape are escaped there from the first such byte on.
		start := len(dst)
		dst = o.ref.Append(dst, r)
		switch f.Escape {
		case EscapeDefault:
			if len(dst) == start {
				if !o.ref.EmptyFound() {
					dst = append(dst, '-')
				}
			} else if i := indexEscaped(dst[start:]); i >= 0 {
				val = append(val[:0], dst[start+i:]...)
				dst = appendEscaped(dst[:start+i], val)
			}
		case EscapeJSON:
			if i := indexJSON(dst[start:]); i >= 0 {
				val = append(val[:0], dst[start+i:]...)
				dst = appendJSON(dst[:start+i], val)
			}
		}
	}
	return dst, val
}

// Words of eight bytes, to look at eight bytes of a value at once.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasZero reports whether a byte of x is 0.
func hasZero(x uint64) bool { return (x-ones)&^x&highs != 0 }

// hasLess reports whether a byte of x is below n (n at most 0x80). A byte from
// 0x80 on is not below n: its high bit is masked out by ^x, and a borrow flags
// only bytes above one that is below n.
func hasLess(x uint64, n byte) bool { return (x-ones*uint64(n))&^x&highs != 0 }

// indexEscaped is the index of the first byte of v that appendEscaped escapes,
// or -1.
func indexEscaped(v []byte) int {
	i := 0
	for ; i+8 <= len(v); i += 8 {
		x := binary.LittleEndian.Uint64(v[i:])
		if x&highs != 0 || hasLess(x, 0x20) || hasZero(x^ones*0x7f) || hasZero(x^ones*'"') || hasZero(x^ones*'\\') {
			break
		}
	}
	for ; i < len(v); i++ {
		if mustEscape[v[i]] {
			return i
		}
	}
	return -1
}

// indexJSON is the index of the first byte of v that appendJSON escapes, or -1.
func indexJSON(v []byte) int {
	i := 0
	for ; i+8 <= len(v); i += 8 {
		x := binary.LittleEndian.Uint64(v[i:])
		if hasLess(x, 0x20) || hasZero(x^ones*'"') || hasZero(x^ones*'\\') {
			break
		}
	}
	for ; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == '"' || c == '\\' {
			return i
		}
	}
	return -1
}

// mustEscape marks the bytes nginx's ngx_http_log_escape writes as \xHH.
var mustEscape = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c < 0x20 || c >= 0x7f || c == '"' || c == '\\'
	}
	return
}()

const upperHex = "0123456789ABCDEF"

// appendEscaped is nginx's default escaping of a variable's value.
func appendEscaped(dst, v []byte) []byte {
	for len(v) > 0 {
		i := indexEscaped(v)
		if i < 0 {
			return append(dst, v...)
		}
		c := v[i]
		dst = append(dst, v[:i]...)
		dst = append(dst, '\\', 'x', upperHex[c>>4], upperHex[c&0xf])
		v = v[i+1:]
	}
	return dst
}

// appendJSON is nginx's ngx_escape_json: `\` and `"` escaped, control bytes as
// \n, \r, \t, \b, \f or \u00XX (upper-case hex), everything else as is.
func appendJSON(dst, v []byte) []byte {
	for _, c := range v {
		if c > 0x1f {
			if c == '\\' || c == '"' {
				dst = append(dst, '\\')
			}
			dst = append(dst, c)
			continue
		}
		switch c {
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			lo := c & 0xf
			h := byte('0' + lo)
			if lo >= 10 {
				h = 'A' + lo - 10
			}
			dst = append(dst, '\\', 'u', '0', '0', '0'+c>>4, h)
		}
	}
	return dst
}
