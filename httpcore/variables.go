package httpcore

import (
	"fmt"
	"strings"
	"sync"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/pcre"
)

// Variable is one variable a module registers (Hooks.Variables): its name and how
// it gets its value. Values are computed only when a template that names them is
// evaluated, into the template's buffer, so a variable nobody uses costs nothing.
type Variable struct {
	// Name is the name without "$", lower-case. With Prefix it is a family of
	// variables: "http_" is $http_NAME for any NAME.
	Name   string
	Prefix bool
	// Param turns the rest of a prefixed name, as written, into the parameter Get
	// receives, once when the template is compiled (nil: as written).
	Param func(rest string) string
	// Get appends the value for r to dst. It must not allocate on the steady path.
	Get func(dst []byte, r *Request, param string) []byte
	// Set gives the variable a value (nil: set cannot), as nginx's set_handler:
	// "set $args ...".
	Set func(r *Request, v []byte)
	// Compiled, if set, is called when a template naming the variable is compiled:
	// a module whose variable needs work done for every request learns that it is
	// used.
	Compiled func()
	// EmptyFound: an empty value is a value ($https off, $is_args without
	// arguments), where for the others it means nginx's "not found", which an
	// access log in the default escaping shows as "-".
	EmptyFound bool
	// Found, for a family whose member can be there and empty (a field "X:", an
	// argument "a=", a cookie "a="), reports whether it is: nginx's value is then
	// found and empty, which an access log writes as nothing, where it writes "-"
	// for one not found. Called only for an empty value.
	Found func(r *Request, param string) bool
}

// Variables is a registry: every module's variables by name. A configuration's
// (VariablesFor) also holds the variables its directives declare (set, map, geo,
// split_clients, named regex captures, Declared), known once the whole
// configuration is read, as nginx's variables indexed at configuration time.
type Variables struct {
	names    map[string]*Variable
	prefixes []*Variable

	declared map[string]*Declared // nil for a registry's own
	decls    []*Declared          // by Index
	named    map[*pcre.Regexp][]*Declared
	sealed   bool // the configuration is read: an unknown name is an error at once
}

// NewVariables indexes lists of variables; a name declared twice is an error.
func NewVariables(lists ...[]Variable) (*Variables, error) {
	v := &Variables{names: map[string]*Variable{}}
	for _, list := range lists {
		for i := range list {
			d := &list[i]
			if d.Prefix {
				for _, p := range v.prefixes {
					if p.Name == d.Name {
						return nil, fmt.Errorf("variable prefix %q declared twice", d.Name)
					}
				}
				v.prefixes = append(v.prefixes, d)
				continue
			}
			if v.names[d.Name] != nil {
				return nil, fmt.Errorf("variable %q declared twice", d.Name)
			}
			v.names[d.Name] = d
		}
	}
	return v, nil
}

var registries sync.Map // *conf.Registry → *Variables

// VariablesOf is the variable registry of a module set: the variables of every
// module whose Ctx is *Hooks. It is built once per registry.
func VariablesOf(reg *conf.Registry) (*Variables, error) {
	if v, ok := registries.Load(reg); ok {
		return v.(*Variables), nil
	}
	var lists [][]Variable
	for _, m := range reg.Modules() {
		if h, ok := m.Ctx.(*Hooks); ok {
			lists = append(lists, h.Variables)
		}
	}
	v, err := NewVariables(lists...)
	if err != nil {
		return nil, err
	}
	actual, _ := registries.LoadOrStore(reg, v)
	return actual.(*Variables), nil
}

// CompileTemplate compiles s against the variables of the configuration being read,
// for a directive's Set function. A name no module registers may be declared later
// in the configuration (set, map ...): it is an error only if it never is.
func CompileTemplate(c *conf.Cursor, s string) (*Template, error) {
	v, err := VariablesFor(c.Config)
	if err != nil {
		return nil, err
	}
	return v.compile(s, c.Pos())
}

// part is a piece of a template: literal text, a variable with its parameter (the
// NAME of $http_NAME), a declared variable, or a regex capture ($1 ... $9).
type part struct {
	lit     string
	v       *Variable
	param   string
	decl    *Declared
	capture int
}

// Template is a string with $variables, compiled once at configuration load.
type Template struct {
	raw   string
	parts []part
}

// Compile parses "$name" and "${name}" references; "$" followed by anything else is
// literal, as in nginx. An unknown variable is an error.
func (v *Variables) Compile(s string) (*Template, error) { return v.compile(s, conf.Pos{}) }

// compile is Compile; pos is where s stands, for an unknown variable's error.
func (v *Variables) compile(s string, pos conf.Pos) (*Template, error) {
	t := &Template{raw: s}
	lit := strings.Builder{}
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			lit.WriteByte(s[i])
			continue
		}
		var name string
		if c := s[i+1]; c >= '1' && c <= '9' {
			// nginx's capture: one digit, "$12" is $1 and "2".
			flush()
			t.parts = append(t.parts, part{capture: int(c - '0')})
			i++
			continue
		}
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("the closing bracket in %q variable is missing", s[i+2:])
			}
			name = s[i+2 : i+2+end]
			i += 2 + end
		} else {
			j := i + 1
			for j < len(s) && isVarChar(s[j]) {
				j++
			}
			if j == i+1 {
				lit.WriteByte('$')
				continue
			}
			name = s[i+1 : j]
			i = j - 1
		}
		p, err := v.lookup(name, pos)
		if err != nil {
			return nil, err
		}
		flush()
		t.parts = append(t.parts, p)
	}
	flush()
	return t, nil
}

// MustCompile is Compile for templates known to be valid.
func (v *Variables) MustCompile(s string) *Template {
	t, err := v.Compile(s)
	if err != nil {
		panic(err)
	}
	return t
}

func (v *Variables) lookup(name string, pos conf.Pos) (part, error) {
	if name == "" {
		return part{}, fmt.Errorf("invalid variable name")
	}
	lower := strings.ToLower(name)
	if d := v.names[lower]; d != nil {
		if d.Compiled != nil {
			d.Compiled()
		}
		return part{v: d}, nil
	}
	for _, d := range v.prefixes {
		if strings.HasPrefix(lower, d.Name) && len(lower) > len(d.Name) {
			param := name[len(d.Name):]
			if d.Param != nil {
				param = d.Param(param)
			}
			if d.Compiled != nil {
				d.Compiled()
			}
			return part{v: d, param: param}, nil
		}
	}
	if d := v.declared[lower]; d != nil {
		return part{decl: d}, nil
	}
	if v.declared == nil || v.sealed {
		return part{}, fmt.Errorf("unknown %q variable", name)
	}
	// Perhaps declared further on: checked once the configuration is read (Seal).
	d := v.declare(lower)
	d.usedAt = pos
	return part{decl: d}, nil
}

func isVarChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// Static reports a template without variables.
func (t *Template) Static() bool {
	for _, p := range t.parts {
		if p.v != nil || p.decl != nil || p.capture != 0 {
			return false
		}
	}
	return true
}

// Uses reports whether the template names the variable called name (a prefix's
// name for a family: "http_").
func (t *Template) Uses(name string) bool {
	for _, p := range t.parts {
		if p.v != nil && p.v.Name == name || p.decl != nil && p.decl.Name == name {
			return true
		}
	}
	return false
}

// String returns the template as written.
func (t *Template) String() string { return t.raw }

// Append evaluates the template for r into dst.
func (t *Template) Append(dst []byte, r *Request) []byte {
	for i := range t.parts {
		p := &t.parts[i]
		switch {
		case p.v != nil:
			dst = p.v.Get(dst, r, p.param)
		case p.decl != nil:
			dst = r.appendDeclared(dst, p.decl)
		case p.capture != 0:
			dst = r.appendCapture(dst, p.capture)
		default:
			dst = append(dst, p.lit...)
		}
	}
	return dst
}

func (p *part) appendTo(dst []byte, r *Request) []byte {
	switch {
	case p.v != nil:
		return p.v.Get(dst, r, p.param)
	case p.decl != nil:
		return r.appendDeclared(dst, p.decl)
	case p.capture != 0:
		return r.appendCapture(dst, p.capture)
	}
	return append(dst, p.lit...)
}

// Ref is one variable compiled on its own (a module's, a family's member, one the
// configuration declares or a capture), for a module that treats each value apart,
// as the access log escapes them.
type Ref struct {
	p    part
	name string
}

// Ref compiles a reference to the variable called name (without "$"); pos is
// where it is named, for the error of a name nothing declares.
func (v *Variables) Ref(name string, pos conf.Pos) (Ref, error) {
	p, err := v.lookup(name, pos)
	return Ref{p: p, name: name}, err
}

// Append appends the variable's value for r. (Pointer receivers: a Ref is large,
// and copying it for each value was a quarter of the access log's formatting.)
func (ref *Ref) Append(dst []byte, r *Request) []byte { return ref.p.appendTo(dst, r) }

// Name is the variable's name as written.
func (ref *Ref) Name() string { return ref.name }

// Variable is the module's variable ref names, with the parameter its Get takes
// (the NAME of $http_NAME), for a caller that calls Get itself (the access log's
// compiled formats); nil for a variable the configuration declares or a capture.
func (ref *Ref) Variable() (*Variable, string) { return ref.p.v, ref.p.param }
