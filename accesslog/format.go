package accesslog

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/numaproxy/numaproxy/conf"

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
	// combined: the format begins as nginx's combined does (its text to
	// $http_user_agent, default escaping, the core's variables), which
	// appendCombined formats without the ops; the ops after its eight go on from
	// there (combined's closing quote, or more as in nginx's sample format main).
	// timeLocal is $time_local's getter, which appendCombined calls directly.
	combined  bool
	timeLocal func(dst []byte, r *httpcore.Request, param string) []byte
}

// opKind is what an op appends.
type opKind uint8

const (
	opLit        opKind = iota // lit alone: the text after the last variable
	opGet                      // a module's variable: get(dst, r, param)
	opRef                      // a variable the configuration declares, or a capture
	opRemoteAddr               // $remote_addr, formatted once per address (loopState.addr)
)

// op is a variable with the literal text before it, and what the line needs to
// know of its values.
type op struct {
	kind opKind
	lit  string
	// litWord is lit in a little-endian word when it has at most 8 bytes
	// (litShort): one store instead of a call of memmove.
	litWord  uint64
	litShort bool
	get      func(dst []byte, r *httpcore.Request, param string) []byte
	param    string
	ref      *httpcore.Ref
	// plain: the variable's values never hold a byte an escaping changes, so
	// they are not looked at.
	plain bool
	// emptyFound: an empty value is a value, not "-" (Variable.EmptyFound);
	// found says so for this request's (Variable.Found).
	emptyFound bool
	found      func(r *httpcore.Request, param string) bool
}

// plainVars are the variables whose values are digits, times, "-", "." and
// the separators of the upstream ones (", ", " : "): nothing to escape in them.
var plainVars = map[string]bool{
	"status": true, "body_bytes_sent": true, "bytes_sent": true, "request_length": true,
	"request_time": true, "msec": true, "pipe": true, "time_local": true, "time_iso8601": true,
	"connection": true, "connection_requests": true, "request_id": true, "remote_port": true,
	"server_port": true, "numa_node": true, "worker_cpu": true, "incoming_cpu": true,
	"upstream_status": true, "upstream_connect_time": true, "upstream_header_time": true,
	"upstream_response_time": true, "upstream_response_length": true,
	"upstream_bytes_received": true, "upstream_bytes_sent": true,
}

// varOp compiles a reference to a variable: a module's is called directly, not
// through the Ref.
func varOp(ref httpcore.Ref) op {
	v, param := ref.Variable()
	switch {
	case v == nil:
		return op{kind: opRef, ref: &ref}
	case v.Name == "remote_addr":
		return op{kind: opRemoteAddr}
	}
	return op{kind: opGet, get: v.Get, param: param, plain: plainVars[v.Name], emptyFound: v.EmptyFound, found: v.Found}
}

// combinedFormat is nginx's predefined combined format.
const combinedFormat = combinedPrefix + `"`

// combinedPrefix is what appendCombined formats: combined's first eight
// variables (combinedOps) and the text between them.
const (
	combinedPrefix = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent`
	combinedOps    = 8
)

// compileFormat parses the strings of a log_format, joined as nginx joins them (no
// separator), as nginx's ngx_http_log_compile_format: "$name" and "${name}", a "$"
// followed by anything else being an error.
func compileFormat(vars *httpcore.Variables, name string, esc Escape, parts []string, pos conf.Pos) (*Format, error) {
	f := &Format{Name: name, Escape: esc}
	var lit, text strings.Builder
	var names []string // the variables' names; "" for one the configuration declares
	for _, s := range parts {
		text.WriteString(s)
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
			v, _ := ref.Variable()
			names = append(names, "")
			if v != nil {
				names[len(names)-1] = v.Name
				if v.Name == "time_local" {
					f.timeLocal = v.Get
				}
			}
			o := varOp(ref)
			o.setLit(lit.String())
			lit.Reset()
			f.ops = append(f.ops, o)
		}
	}
	if lit.Len() > 0 {
		o := op{kind: opLit}
		o.setLit(lit.String())
		f.ops = append(f.ops, o)
	}
	f.combined = esc == EscapeDefault && strings.HasPrefix(text.String(), combinedPrefix) && len(f.ops) > combinedOps &&
		slices.Equal(names[:combinedOps], []string{"remote_addr", "remote_user", "time_local", "request", "status", "body_bytes_sent", "http_", "http_"}) &&
		f.ops[6].param == "referer" && f.ops[7].param == "user-agent"
	return f, nil
}

func (o *op) setLit(s string) {
	o.lit = s
	if len(s) <= 8 {
		var w [8]byte
		copy(w[:], s)
		o.litWord, o.litShort = binary.LittleEndian.Uint64(w[:]), true
	}
}

func isVarChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// appendLine formats the line for r into dst (without the line end).
func (f *Format) appendLine(ls *loopState, dst []byte, r *httpcore.Request) []byte {
	ops := f.ops
	if f.combined {
		dst = ls.appendCombined(f, dst, r)
		ops = ops[combinedOps:]
	}
	for i := range ops {
		o := &ops[i]
		if o.litShort {
			// The literal text between variables is a few bytes: " - ", " [".
			dst = putLit(dst, o.litWord, len(o.lit))
		} else {
			dst = append(dst, o.lit...)
		}
		start := len(dst)
		switch o.kind {
		case opLit:
			continue
		case opGet:
			dst = o.get(dst, r, o.param)
		case opRemoteAddr:
			var plain bool
			dst, plain = ls.appendRemoteAddr(dst, r)
			if plain {
				continue // never empty
			}
		case opRef:
			dst = o.ref.Append(dst, r)
		}
		// The value went into the line as it is; the few that hold a byte to
		// escape are escaped there from the first such byte on.
		switch f.Escape {
		case EscapeDefault:
			if len(dst) == start {
				if !o.emptyFound && (o.found == nil || !o.found(r, o.param)) {
					dst = append(dst, '-')
				}
			} else if !o.plain {
				dst = ls.escapeTail(dst, start)
			}
		case EscapeJSON:
			if !o.plain {
				if i := indexJSON(dst[start:]); i >= 0 {
					ls.val = append(ls.val[:0], dst[start+i:]...)
					dst = appendJSON(dst[:start+i], ls.val)
				}
			}
		}
	}
	return dst
}

// Words of eight bytes, to look at eight bytes of a value at once.
const (
	ones  = 0x0101010101010101
	lows  = 0x7f7f7f7f7f7f7f7f
	highs = 0x8080808080808080
)

// escapedBytes has the high bit set of each byte of x that appendEscaped
// escapes: from 0x7f on, below 0x20, `"` and `\`. With l each byte's low seven
// bits, l+1 reaches the high bit only for 0x7f, l+0x60 for 0x20 and above, and
// l^c+0x7f for all but c; no sum carries into the next byte. The last three
// tests are one complement of their conjunction (two NOTs fewer).
func escapedBytes(x uint64) uint64 {
	l := x & lows
	return (x | (l + ones) | ^((l + ones*0x60) & ((l ^ ones*'"') + lows) & ((l ^ ones*'\\') + lows))) & highs
}

// jsonBytes has the high bit set of each byte of x that appendJSON escapes:
// below 0x20, `"` and `\` (bytes from 0x80 on are left as they are).
func jsonBytes(x uint64) uint64 {
	l := x & lows
	return (^(l + ones*0x60) | ^((l ^ ones*'"') + lows) | ^((l ^ ones*'\\') + lows)) &^ x & highs
}

// indexEscaped is the index of the first byte of v that appendEscaped escapes,
// or -1. Sixteen bytes a turn, as two words with one branch; w is the rest of v
// from i, so that its words need no bounds checks.
func indexEscaped(v []byte) int {
	if len(v) < 8 {
		for i, c := range v {
			if mustEscape[c] {
				return i
			}
		}
		return -1
	}
	i, w := 0, v
	for len(w) >= 16 {
		a := escapedBytes(binary.LittleEndian.Uint64(w[:8]))
		b := escapedBytes(binary.LittleEndian.Uint64(w[8:16]))
		if a|b != 0 {
			if a != 0 {
				return i + bits.TrailingZeros64(a)/8
			}
			return i + 8 + bits.TrailingZeros64(b)/8
		}
		i, w = i+16, w[16:]
	}
	if len(w) >= 8 {
		if m := escapedBytes(binary.LittleEndian.Uint64(w[:8])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i, w = i+8, w[8:]
	}
	if len(w) > 0 {
		// The last eight bytes: those before i were seen to be clean.
		i = len(v) - 8
		if m := escapedBytes(binary.LittleEndian.Uint64(v[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return -1
}

// indexJSON is the index of the first byte of v that appendJSON escapes, or -1.
func indexJSON(v []byte) int {
	if len(v) < 8 {
		for i, c := range v {
			if c < 0x20 || c == '"' || c == '\\' {
				return i
			}
		}
		return -1
	}
	i := 0
	for ; i+8 <= len(v); i += 8 {
		if m := jsonBytes(binary.LittleEndian.Uint64(v[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	if i < len(v) {
		i = len(v) - 8
		if m := jsonBytes(binary.LittleEndian.Uint64(v[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
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
