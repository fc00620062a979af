package httpcore

import (
	"fmt"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/pcre"
)

// Declared is a variable a configuration declares, as nginx's variables added at
// configuration time: by set (its value is what set stored), by map, geo or
// split_clients (Get computes it), or by a regex's named group (what the last match
// of that regex captured). Each request has a slot per declared variable: a value
// is computed once a request (unless Volatile) and set overrides it, as nginx's
// r->variables.
type Declared struct {
	Name  string
	Index int
	// Get computes the value (nil: only set or a regex gives one; until then it is
	// empty and Unset is told).
	Get func(dst []byte, r *Request) []byte
	// Volatile: Get runs each time the value is used (map's volatile).
	Volatile bool
	// Unset is called when a variable without Get is used before it got a value
	// (rewrite's "using uninitialized variable" warning); nil: nothing.
	Unset func(r *Request, d *Declared)

	defined bool     // declared by a directive, not only named by a template
	usedAt  conf.Pos // where a template first named it, for "unknown variable"
}

// coreModule is Module, for functions Module's own initialiser reaches.
var coreModule *conf.Module

func init() { coreModule = Module }

// configVars is the core's per-configuration state: the configuration's variables.
type configVars struct{ vars *Variables }

// VariablesFor is the variable registry of a configuration: its modules' variables
// and the ones its directives declare.
func VariablesFor(cfg *conf.Config) (*Variables, error) {
	cv, _ := cfg.MainConf(coreModule).(*configVars)
	if cv == nil {
		// A configuration read without the core (a module's own tests).
		return VariablesOf(cfg.Registry())
	}
	if cv.vars == nil {
		reg, err := VariablesOf(cfg.Registry())
		if err != nil {
			return nil, err
		}
		cv.vars = &Variables{names: reg.names, prefixes: reg.prefixes,
			declared: map[string]*Declared{}, named: map[*pcre.Regexp][]*Declared{}}
	}
	return cv.vars, nil
}

// ConfigVariables is VariablesFor the configuration a directive is read into.
func ConfigVariables(c *conf.Cursor) (*Variables, error) { return VariablesFor(c.Config) }

func (v *Variables) declare(name string) *Declared {
	d := v.declared[name]
	if d == nil {
		d = &Declared{Name: name, Index: len(v.decls)}
		v.declared[name] = d
		v.decls = append(v.decls, d)
	}
	return d
}

// owned reports a name that a module's variable (or family) answers.
func (v *Variables) owned(name string) bool {
	if v.names[name] != nil {
		return true
	}
	for _, p := range v.prefixes {
		if strings.HasPrefix(name, p.Name) && len(name) > len(p.Name) {
			return true
		}
	}
	return false
}

// Declare declares the variable name (without "$") for set: the same name declared
// twice is one variable. A module's own variable cannot be declared.
func (v *Variables) Declare(name string) (*Declared, error) {
	name = strings.ToLower(name)
	if v.declared == nil || v.sealed {
		return nil, fmt.Errorf("variables cannot be declared here")
	}
	if v.owned(name) {
		return nil, fmt.Errorf("the duplicate %q variable", name)
	}
	d := v.declare(name)
	d.defined = true
	return d, nil
}

// Define declares the variable name with the function that computes it (map, geo,
// split_clients). A name something else already computes is an error.
func (v *Variables) Define(name string, get func(dst []byte, r *Request) []byte, volatile bool) (*Declared, error) {
	d, err := v.Declare(name)
	if err != nil {
		return nil, err
	}
	if d.Get != nil {
		return nil, fmt.Errorf("the duplicate %q variable", name)
	}
	d.Get, d.Volatile = get, volatile
	return d, nil
}

// AddRegex declares the variables of re's named groups, which Request.Regex sets
// on every match of re, as nginx's ngx_http_regex_compile.
func (v *Variables) AddRegex(re *pcre.Regexp) error {
	if v.declared == nil || v.named[re] != nil {
		return nil
	}
	var byGroup []*Declared
	for n, name := range re.Names() {
		if name == "" {
			continue
		}
		d, err := v.Declare(name)
		if err != nil {
			return err
		}
		if byGroup == nil {
			byGroup = make([]*Declared, len(re.Names()))
		}
		byGroup[n] = d
	}
	if byGroup != nil {
		v.named[re] = byGroup
	}
	return nil
}

// seal ends the declarations of a configuration: every name a template used must
// have been declared by then.
func (v *Variables) seal() error {
	if v.declared == nil || v.sealed {
		return nil
	}
	v.sealed = true
	for _, d := range v.decls {
		if !d.defined {
			return &conf.Error{Pos: d.usedAt, Msg: fmt.Sprintf("unknown %q variable", d.Name)}
		}
	}
	return nil
}

// Settable returns the module variable called name that set may give a value to
// ($args), or nil.
func (v *Variables) Settable(name string) *Variable {
	if d := v.names[strings.ToLower(name)]; d != nil && d.Set != nil {
		return d
	}
	return nil
}

// Declared returns the declared variable called name, or nil.
func (v *Variables) Declared(name string) *Declared { return v.declared[strings.ToLower(name)] }

// declaredVars seals the configuration's variables: the named groups of the
// location and server_name regexes first.
func declaredVars(cfg *conf.Config) error {
	v, err := VariablesFor(cfg)
	if err != nil {
		return err
	}
	for _, srv := range cfg.HTTP.Servers {
		for _, n := range srv.Names {
			if n.Regex != nil {
				if err := v.AddRegex(n.Regex); err != nil {
					return &conf.Error{Pos: n.Pos, Msg: err.Error()}
				}
			}
		}
		var walk func(locs []*conf.Location) error
		walk = func(locs []*conf.Location) error {
			for _, loc := range locs {
				if loc.Regex != nil {
					if err := v.AddRegex(loc.Regex); err != nil {
						return &conf.Error{Pos: loc.Pos, Msg: err.Error()}
					}
				}
				if err := walk(loc.Locations); err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(srv.Locations); err != nil {
			return err
		}
	}
	return v.seal()
}

// varSlot is a request's value of a declared variable: varData[off:off+n].
type varSlot struct {
	off, n int32
	state  uint8
}

const (
	slotUnset uint8 = iota
	slotValid
)

// maxVarDepth bounds variables computed inside one another, nginx's
// ngx_http_variable_depth: a map of itself stops there.
const maxVarDepth = 100

// maxVarData bounds the value buffer a request state keeps for the next request.
const maxVarData = 64 << 10

// resetVars readies the declared variables and captures for a new request.
func (r *Request) resetVars() {
	n := len(r.snap.vars.decls)
	if cap(r.vslots) < n {
		r.vslots = make([]varSlot, n)
	} else {
		r.vslots = r.vslots[:n]
		clear(r.vslots)
	}
	if cap(r.varData) > maxVarData {
		r.varData = nil
	}
	r.varData = r.varData[:0]
	r.ncaps, r.varDepth = 0, 0
}

// appendDeclared appends the request's value of d.
func (r *Request) appendDeclared(dst []byte, d *Declared) []byte {
	if d.Index >= len(r.vslots) {
		return dst // a template of another snapshot: cannot happen
	}
	s := &r.vslots[d.Index]
	if s.state == slotValid {
		return append(dst, r.varData[s.off:s.off+s.n]...)
	}
	if d.Get == nil {
		if d.Unset != nil {
			d.Unset(r, d)
		}
		return dst
	}
	if r.varDepth >= maxVarDepth {
		r.Log().Error("cycle while evaluating variable \""+d.Name+"\"", "client", r.c.remoteAddr().String())
		return dst
	}
	r.varDepth++
	start := len(dst)
	dst = d.Get(dst, r)
	r.varDepth--
	if d.Volatile {
		return dst
	}
	r.SetVariable(d, dst[start:])
	return dst
}

// SetVariable gives d the value v for the rest of the request (set, a named
// capture, a computed value kept); v is copied.
func (r *Request) SetVariable(d *Declared, v []byte) {
	off := len(r.varData)
	r.varData = append(r.varData, v...)
	r.vslots[d.Index] = varSlot{off: int32(off), n: int32(len(v)), state: slotValid}
}

// Variable appends the request's value of d, as a template naming it would.
func (r *Request) Variable(dst []byte, d *Declared) []byte { return r.appendDeclared(dst, d) }

// Regex matches re against subject as nginx's ngx_http_regex_exec: on a match its
// groups become $1 ... $9 (none for a regex without groups) and its named groups'
// variables, until the next match; a failed match leaves them. It allocates
// nothing once its buffers have grown (see pcre.Regexp.Exec for long subjects).
func (r *Request) Regex(re *pcre.Regexp, subject []byte) bool {
	if re.NumCaptures() == 0 {
		if !re.Match(subject) {
			return false
		}
		r.ncaps = 0
		return true
	}
	need := re.CapLen()
	if cap(r.caps) < need {
		r.caps = make([]int, need)
	}
	caps := r.caps[:need]
	n, ok := re.Exec(subject, caps)
	if !ok {
		return false
	}
	r.capData = append(r.capData[:0], subject...)
	r.ncaps = n
	if named := r.snap.vars.named[re]; named != nil {
		for g, d := range named {
			if d == nil {
				continue
			}
			var v []byte
			if 2*g+1 < n && caps[2*g] >= 0 {
				v = r.capData[caps[2*g]:caps[2*g+1]]
			}
			r.SetVariable(d, v)
		}
	}
	return true
}

// ClearCaptures forgets $1 ... $9, as a rewrite or if regex that did not match.
func (r *Request) ClearCaptures() { r.ncaps = 0 }

// appendCapture appends $n of the last match.
func (r *Request) appendCapture(dst []byte, n int) []byte {
	if 2*n+1 >= r.ncaps || r.caps[2*n] < 0 {
		return dst
	}
	return append(dst, r.capData[r.caps[2*n]:r.caps[2*n+1]]...)
}

// escapeArgs is the bytes nginx's ngx_escape_uri(NGX_ESCAPE_ARGS) encodes:
// controls, space " # % & + ; < > ? \ ^ ` { | } DEL and non-ASCII.
var escapeArgs = func() (t [256]bool) {
	words := [8]uint32{0xffffffff, 0xd800086d, 0x50000000, 0xb8000001, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}
	for c := range t {
		t[c] = words[c>>5]&(1<<(c&31)) != 0
	}
	return t
}()

// AppendEscapedArgs appends s percent-encoded as ngx_escape_uri(NGX_ESCAPE_ARGS).
func AppendEscapedArgs(dst, s []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range s {
		if escapeArgs[c] {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// AppendEscapingCaptures is Append with $1 ... $9 percent-encoded as
// AppendEscapedArgs: nginx's rewrite does so in a redirect and in new arguments
// when the client's path held "%" or "+" (r->quoted_uri, r->plus_in_uri).
func (t *Template) AppendEscapingCaptures(dst []byte, r *Request) []byte {
	for i := range t.parts {
		p := &t.parts[i]
		if p.capture == 0 {
			dst = p.appendTo(dst, r)
			continue
		}
		if n := p.capture; 2*n+1 < r.ncaps && r.caps[2*n] >= 0 {
			dst = AppendEscapedArgs(dst, r.capData[r.caps[2*n]:r.caps[2*n+1]])
		}
	}
	return dst
}
