package headers

import (
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// Module declares add_header, inherited as nginx does: a level that sets any
// replaces all it would inherit.
var Module = &conf.Module{
	Name:       "headers",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP: func(parent, child any) error {
		if c := child.(*LocConf); !c.set {
			c.AddHeaders = parent.(*LocConf).AddHeaders
		}
		return nil
	},
	Ctx: &httpcore.Hooks{Init: initModule},
}

// self is Module, for the filter (Module's own initialiser cannot name it).
var self *conf.Module

func init() { self = Module }

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "add_header", Contexts: conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx | conf.LocIfCtx, Args: conf.Args2 | conf.Args3, Multi: true, Set: setAddHeader,
			Syntax: "add_header name value [always];",
			Doc:    "Adds a response header for 200, 201, 204, 206, 301, 302, 303, 304, 307 and 308 (any status with always). A level that sets any replaces all inherited ones."},
	}
}

// LocConf holds a level's add_header fields, after inheritance.
type LocConf struct {
	AddHeaders []AddHeader
	set        bool // this level has add_header of its own
}

// AddHeader is one add_header.
type AddHeader struct {
	Name   string
	Value  *httpcore.Template
	Always bool
	name   []byte
}

func setAddHeader(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	if !lc.set {
		lc.AddHeaders, lc.set = nil, true
	}
	if !http1.IsToken(s.Args[0].Value) {
		return s.InvalidValue(s.Args[0], "not a header field name")
	}
	t, err := httpcore.CompileTemplate(c, s.Args[1].Value)
	if err != nil {
		return s.InvalidValue(s.Args[1], err.Error())
	}
	h := AddHeader{Name: s.Args[0].Value, Value: t, name: []byte(s.Args[0].Value)}
	if len(s.Args) == 3 {
		if s.Args[2].Value != "always" {
			return s.InvalidValue(s.Args[2], `it must be "always"`)
		}
		h.Always = true
	}
	lc.AddHeaders = append(lc.AddHeaders, h)
	return nil
}

// initModule puts the filter in the header filter chain when some level has
// add_header: without one the module costs a response nothing.
func initModule(s *httpcore.Setup) error {
	used := false
	httpcore.Walk(s.Config, self, func(lc any) { used = used || len(lc.(*LocConf).AddHeaders) > 0 })
	if !used {
		return nil
	}
	next := s.HeaderFilter()
	s.SetHeaderFilter(func(r *httpcore.Request) {
		addHeaders(r)
		next(r)
	})
	return nil
}

// addHeaders adds the level's add_header fields that apply to the response's status.
// A value that comes out empty adds nothing, as in nginx; control characters in one
// are escaped.
func addHeaders(r *httpcore.Request) {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil {
		return
	}
	h := r.Header()
	always := applies(h.Status)
	for i := range lc.AddHeaders {
		a := &lc.AddHeaders[i]
		if !a.Always && !always {
			continue
		}
		b := h.Buf()
		from := len(b)
		b = httpcore.EscapeControls(a.Value.Append(b, r), from)
		if len(b) > from {
			h.AddBuilt(a.name, b, from)
		}
	}
}

// applies is nginx's list of statuses add_header acts on without "always".
func applies(code int) bool {
	switch code {
	case 200, 201, 204, 206, 301, 302, 303, 304, 307, 308:
		return true
	}
	return false
}
