package conf

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Context is a set of places a directive may stand, as nginx's NGX_*_CONF bits.
type Context uint32

const (
	MainCtx     Context = 1 << iota // top level of the main file
	EventsCtx                       // events { }
	HTTPCtx                         // http { }
	ServerCtx                       // http { server { } }
	LocationCtx                     // location { }, at any depth
	UpstreamCtx                     // http { upstream NAME { } }
	SrvIfCtx                        // if ( ) { } in a server, nginx's NGX_HTTP_SIF_CONF
	LocIfCtx                        // if ( ) { } in a location, nginx's NGX_HTTP_LIF_CONF
	LmtCtx                          // limit_except METHOD ... { } in a location, nginx's NGX_HTTP_LMT_CONF

	AnyCtx = MainCtx | EventsCtx | HTTPCtx | ServerCtx | LocationCtx | UpstreamCtx | SrvIfCtx | LocIfCtx | LmtCtx
)

var contextNames = []struct {
	c    Context
	name string
}{
	{MainCtx, "main"}, {EventsCtx, "events"}, {HTTPCtx, "http"}, {ServerCtx, "server"},
	{LocationCtx, "location"}, {UpstreamCtx, "upstream"}, {SrvIfCtx, "if in server"}, {LocIfCtx, "if in location"},
	{LmtCtx, "limit_except"},
}

func (c Context) String() string {
	var names []string
	for _, n := range contextNames {
		if c&n.c != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ", ")
}

// Arity is the set of argument counts a directive takes, as nginx's NGX_CONF_TAKE*
// bits: Args1|Args2 takes one or two.
type Arity uint32

const (
	Args0 Arity = 1 << iota
	Args1
	Args2
	Args3
	Args4
	Args5
	Args6
	Args7
	Args1More // one or more
	Args2More // two or more
	Flag      // exactly one: on or off
)

// accepts reports whether n arguments fit.
func (a Arity) accepts(n int) bool {
	switch {
	case a&Flag != 0 && n == 1,
		a&Args1More != 0 && n >= 1,
		a&Args2More != 0 && n >= 2,
		n <= 7 && a&(Args0<<uint(n)) != 0:
		return true
	}
	return false
}

// Directive declares one configuration directive: where it may stand, how many
// arguments it takes and the function that turns them into typed config.
type Directive struct {
	Name     string
	Contexts Context
	Args     Arity
	Block    bool // followed by { } rather than ;
	Multi    bool // may appear more than once in one block
	Set      func(c *Cursor, s *Stmt) error

	// For the README's reference (generated from this table).
	Syntax  string // e.g. "worker_processes number | auto;"
	Default string // "" when there is none
	Doc     string // one line
	// NoEffect marks a directive that tunes an nginx internal numaproxy does not
	// have (hash sizes, accept_mutex): it is validated and accepted, and changes
	// nothing; the reference says so and Doc says why.
	NoEffect bool
}

// Module is one package's contribution to the configuration, like nginx's
// ngx_module_t: its directives and the typed config it keeps at each level.
type Module struct {
	Name       string
	Directives []Directive

	// NewMain makes the module's one config for the whole snapshot (nil: none).
	NewMain func() any
	// NewHTTP makes the module's config for the http block, for each server and for
	// each location (nil: none). After parsing, each level inherits from the one above
	// through MergeHTTP(parent, child), as nginx merges loc_conf.
	NewHTTP   func() any
	MergeHTTP func(parent, child any) error
	// Check validates across the whole snapshot once everything is parsed and merged
	// (for example that every proxy_pass names an upstream that exists). It gets its
	// own Module so it can reach its configs without naming its package's variable,
	// which Go would call an initialisation cycle.
	Check func(cfg *Config, self *Module) error

	// slot is the module's index + 1 in every block's configs (moduleConfs), given
	// once, by the first registry that lists it; 0 before.
	slot atomic.Int32

	// Ctx is what the layer that runs the module needs of it besides directives and
	// configs, as ngx_module_t's ctx: for an HTTP module, its *httpcore.Hooks
	// (variables, phase handlers, filters). conf does not look at it.
	Ctx any
}

// Registry is the set of modules a binary is built with. Build it once with
// NewRegistry; it is read-only afterwards and safe to share.
type Registry struct {
	modules []*Module
	byName  map[string][]*registered
	slots   int // the length of a block's moduleConfs: the highest slot of modules
}

// moduleSlots numbers modules for moduleConfs, across all registries.
var moduleSlots atomic.Int32

// moduleConfs are a block's module configs, by the modules' slots: a request asks
// for several per phase, and indexing costs less than a map lookup.
type moduleConfs []any

// get is module m's config in the block, nil if it has none.
func (c moduleConfs) get(m *Module) any {
	if i := int(m.slot.Load()) - 1; uint(i) < uint(len(c)) {
		return c[i]
	}
	return nil
}

type registered struct {
	d *Directive
	m *Module
}

// NewRegistry indexes the modules' directives. Core (this package's module) comes
// first whether or not it is listed.
func NewRegistry(modules ...*Module) (*Registry, error) {
	r := &Registry{byName: map[string][]*registered{}}
	all := append([]*Module{CoreModule}, modules...)
	for i, m := range all {
		if m == CoreModule && i > 0 {
			continue
		}
		r.modules = append(r.modules, m)
		if m.slot.Load() == 0 {
			m.slot.CompareAndSwap(0, moduleSlots.Add(1))
		}
		r.slots = max(r.slots, int(m.slot.Load()))
		for i := range m.Directives {
			d := &m.Directives[i]
			for _, other := range r.byName[d.Name] {
				if other.d.Contexts&d.Contexts != 0 {
					return nil, fmt.Errorf("directive %q declared twice for context %s (modules %s and %s)",
						d.Name, other.d.Contexts&d.Contexts, other.m.Name, m.Name)
				}
			}
			r.byName[d.Name] = append(r.byName[d.Name], &registered{d: d, m: m})
		}
	}
	return r, nil
}

// MustRegistry is NewRegistry for a fixed module list known to be consistent.
func MustRegistry(modules ...*Module) *Registry {
	r, err := NewRegistry(modules...)
	if err != nil {
		panic(err)
	}
	return r
}

// Modules lists the registry's modules in order.
func (r *Registry) Modules() []*Module { return r.modules }

// lookup finds the declaration of name that may stand in ctx. known says whether the
// name exists at all (for "not allowed here" versus "unknown directive").
func (r *Registry) lookup(name string, ctx Context) (found *registered, known bool) {
	for _, reg := range r.byName[name] {
		if reg.d.Contexts&ctx != 0 {
			return reg, true
		}
	}
	return nil, len(r.byName[name]) > 0
}
