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
		c, p := child.(*LocConf), parent.(*LocConf)
		if !c.set {
			c.AddHeaders = p.AddHeaders
		}
		if !c.trailersSet {
			c.AddTrailers = p.AddTrailers
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
		{Name: "add_trailer", Contexts: conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx | conf.LocIfCtx, Args: conf.Args2 | conf.Args3, Multi: true, Set: setAddTrailer,
			Syntax: "add_trailer name value [always];",
			Doc:    "Adds a trailer field at the end of a response for 200, 201, 204, 206, 301, 302, 303, 304, 307 and 308 (any status with always), which then goes chunked to an HTTP/1.1 client (without Content-Length); the value is evaluated when the body ends, an empty one adds nothing. A level that sets any replaces all inherited ones."},
	}
}

// LocConf holds a level's add_header and add_trailer fields, after inheritance.
type LocConf struct {
	AddHeaders  []AddHeader
	AddTrailers []AddHeader
	set         bool // this level has add_header of its own
	trailersSet bool // this level has add_trailer of its own
}

// AddHeader is one add_header or add_trailer.
type AddHeader struct {
	Name   string
	Value  *httpcore.Template
	Always bool
	name   []byte
}

func setAddHeader(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	return appendField(c, s, &lc.AddHeaders, &lc.set)
}

func setAddTrailer(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	return appendField(c, s, &lc.AddTrailers, &lc.trailersSet)
}

// appendField adds the field of s to a level's list; the first of the level
// replaces the inherited ones (set: the level has its own).
func appendField(c *conf.Cursor, s *conf.Stmt, list *[]AddHeader, set *bool) error {
	if !*set {
		*list, *set = nil, true
	}
	h, err := parseField(c, s)
	if err != nil {
		return err
	}
	*list = append(*list, h)
	return nil
}

// parseField parses "name value [always]".
func parseField(c *conf.Cursor, s *conf.Stmt) (AddHeader, error) {
	if !http1.IsToken(s.Args[0].Value) {
		return AddHeader{}, s.InvalidValue(s.Args[0], "not a header field name")
	}
	t, err := httpcore.CompileTemplate(c, s.Args[1].Value)
	if err != nil {
		return AddHeader{}, s.InvalidValue(s.Args[1], err.Error())
	}
	h := AddHeader{Name: s.Args[0].Value, Value: t, name: []byte(s.Args[0].Value)}
	if len(s.Args) == 3 {
		if s.Args[2].Value != "always" {
			return AddHeader{}, s.InvalidValue(s.Args[2], `it must be "always"`)
		}
		h.Always = true
	}
	return h, nil
}

// initModule puts the filter in the header filter chain when some level has
// add_header or add_trailer, and the trailers' in the body filter chain when some
// has add_trailer: without them the module costs a response nothing.
func initModule(s *httpcore.Setup) error {
	headers, trailers := false, false
	httpcore.Walk(s.Config, self, func(lc any) {
		headers = headers || len(lc.(*LocConf).AddHeaders) > 0
		trailers = trailers || len(lc.(*LocConf).AddTrailers) > 0
	})
	if headers || trailers {
		s.AddHeaderFilter(func(next httpcore.HeaderFilter) httpcore.HeaderFilter {
			return func(r *httpcore.Request) {
				addHeaders(r)
				next(r)
			}
		})
	}
	if trailers {
		s.AddBodyFilter(func(next httpcore.BodyFilter) httpcore.BodyFilter {
			return func(r *httpcore.Request, o *httpcore.Out) {
				if o.Last && r.TrailersExpected() {
					addTrailers(r)
				}
				next(r, o)
			}
		})
	}
	return nil
}

// addTrailers adds the level's add_trailer fields that apply to the response's
// status, as the last body bytes go on (nginx's ngx_http_trailers_filter).
func addTrailers(r *httpcore.Request) {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil {
		return
	}
	always := applies(r.Status())
	for i := range lc.AddTrailers {
		if a := &lc.AddTrailers[i]; a.Always || always {
			r.AddTrailer(a.name, a.Value)
		}
	}
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
	for i := range lc.AddTrailers {
		// nginx's header filter: a trailer that applies makes the body chunked.
		if lc.AddTrailers[i].Always || always {
			r.ExpectTrailers()
			break
		}
	}
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
