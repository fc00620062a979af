package static

import (
	"fmt"
	"strings"
)

// Vars gives the values of the variables a Template names; the HTTP core's variable
// registry implements it. AppendVar appends name's value to dst and reports whether
// the variable has a value (an unknown or unset one expands to nothing, as in nginx).
// Regex captures are named "1" to "9".
type Vars interface {
	AppendVar(dst []byte, name string) ([]byte, bool)
}

// Template is a directive argument with nginx variables ($name, ${name}, $1..$9),
// split once at load time so that expanding it only appends.
type Template struct {
	Raw   string
	parts []tmplPart
}

type tmplPart struct {
	lit  string // literal text, when name is ""
	name string // variable name ("1".."9" for captures)
}

// CompileTemplate splits s into literal text and variables, as nginx's script
// compiler does: "$" starts a variable whose name is letters, digits and "_" (or is
// written ${name}); "$1" to "$9" are regex captures of one digit.
func CompileTemplate(s string) (*Template, error) {
	t := &Template{Raw: s}
	for i := 0; i < len(s); {
		if s[i] != '$' {
			j := strings.IndexByte(s[i:], '$')
			if j < 0 {
				j = len(s) - i
			}
			t.parts = append(t.parts, tmplPart{lit: s[i : i+j]})
			i += j
			continue
		}
		i++
		if i < len(s) && s[i] >= '1' && s[i] <= '9' {
			t.parts = append(t.parts, tmplPart{name: s[i : i+1]})
			i++
			continue
		}
		braced := i < len(s) && s[i] == '{'
		if braced {
			i++
		}
		start := i
		for i < len(s) && isVarChar(s[i]) {
			i++
		}
		if i == start {
			return nil, fmt.Errorf("invalid variable name in %q", s)
		}
		name := s[start:i]
		if braced {
			if i >= len(s) || s[i] != '}' {
				return nil, fmt.Errorf("the closing bracket in %q variable is missing", name)
			}
			i++
		}
		t.parts = append(t.parts, tmplPart{name: name})
	}
	return t, nil
}

func isVarChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// HasVars reports whether the template names a variable.
func (t *Template) HasVars() bool {
	for _, p := range t.parts {
		if p.name != "" {
			return true
		}
	}
	return false
}

// VarNames lists the variables the template names, for the core to check that each
// exists when it wires the module in.
func (t *Template) VarNames() []string {
	var names []string
	for _, p := range t.parts {
		if p.name != "" {
			names = append(names, p.name)
		}
	}
	return names
}

// Append appends the template's value to dst. Variables come from vars; a nil vars
// expands every variable to nothing.
func (t *Template) Append(dst []byte, vars Vars) []byte {
	for _, p := range t.parts {
		if p.name == "" {
			dst = append(dst, p.lit...)
		} else if vars != nil {
			dst, _ = vars.AppendVar(dst, p.name)
		}
	}
	return dst
}

func (t *Template) String() string { return t.Raw }
