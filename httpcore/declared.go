package httpcore

import (
	"fmt"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
)

// Declared variables are those a configuration names for a module to set per
// request, as nginx's ngx_http_add_variable with NGX_HTTP_VAR_CHANGEABLE
// (auth_request_set $name ...): the core keeps their values in the request, from its
// start to its end (internal redirects keep them). A template names one after the
// directive that declares it.

// declared is the configuration's declared variables (the core's main config).
type declared struct {
	byName map[string]*Variable
	n      int
}

func newDeclared() any { return &declared{byName: map[string]*Variable{}} }

// DeclareVariable makes $name a variable of the configuration being read, for a
// module that sets it per request (SetVariable); it returns its index. A name
// declared again is the same variable; a variable of a module's is refused, as
// nginx refuses a "duplicate" variable.
func DeclareVariable(c *conf.Cursor, name string) (int, error) {
	reg, err := VariablesOf(c.Config.Registry())
	if err != nil {
		return 0, err
	}
	lower := strings.ToLower(name)
	if _, err := reg.lookup(lower); err == nil {
		return 0, fmt.Errorf("the duplicate %q variable", name)
	}
	d := c.Config.MainConf(Module).(*declared)
	if v := d.byName[lower]; v != nil {
		return v.index, nil
	}
	idx := d.n
	d.n++
	d.byName[lower] = &Variable{Name: lower, index: idx, Get: func(dst []byte, r *Request, _ string) []byte {
		if idx < len(r.declared) && r.declared[idx].set {
			return append(dst, r.declared[idx].v...)
		}
		return dst
	}}
	return idx, nil
}

// declaredValue is a declared variable's value in a request.
type declaredValue struct {
	v   []byte // reused from request to request
	set bool
}

// SetVariable sets the declared variable idx (DeclareVariable) for the rest of the
// request, copying value.
func (r *Request) SetVariable(idx int, value []byte) {
	for len(r.declared) <= idx {
		r.declared = append(r.declared, declaredValue{})
	}
	d := &r.declared[idx]
	d.v, d.set = append(d.v[:0], value...), true
}

// clearDeclared forgets the declared variables' values at a request's start.
func (r *Request) clearDeclared() {
	for i := range r.declared {
		r.declared[i].set = false
	}
}
