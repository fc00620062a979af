package accesslog

import (
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
		val = o.ref.Append(val[:0], r)
		switch f.Escape {
		case EscapeDefault:
			if len(val) == 0 && !o.ref.EmptyFound() {
				dst = append(dst, '-')
			} else {
				dst = appendEscaped(dst, val)
			}
		case EscapeJSON:
			dst = appendJSON(dst, val)
		default:
			dst = append(dst, val...)
		}
	}
	return dst, val
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
	for _, c := range v {
		if mustEscape[c] {
			dst = append(dst, '\\', 'x', upperHex[c>>4], upperHex[c&0xf])
		} else {
			dst = append(dst, c)
		}
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
