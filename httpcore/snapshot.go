package httpcore

import (
	"errors"
	"fmt"
	"os"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore/route"
)

// Snapshot is what the data path needs from one configuration, compiled once: its
// routes, the phase handlers and filter chains the modules set up for it, and their
// per-snapshot state. A request keeps the snapshot it started with to its end, so a
// reload never changes a request in flight.
type Snapshot struct {
	Config *conf.Config
	Routes *route.Table

	vars *Variables
	// engine is every phase's handlers in phase order, nginx's phase engine; the
	// core's own steps are entries without a handler.
	engine       []phaseHandler
	serverIndex  int // the first entry of the server rewrite phase
	contentIndex int // the content phase's step (a background request starts there)
	rewriteIndex int // the first entry of the location rewrite phase
	logHandlers  []logHandler
	// all is every module at work, for a level the snapshot did not see (each
	// level it did has its own, LocConf.mods).
	all    levelModules
	states [maxKeys]any
	hooks  []*Hooks // the registry's HTTP modules, in order
	stats  bool     // a module reports figures (Setup.EnableStats)
}

// phaseHandler is one entry of the engine: a module's handler, or a step of the
// core's own.
type phaseHandler struct {
	phase Phase
	h     Handler
	step  coreStep
	next  int    // the first entry of the next phase
	bit   uint64 // the module's bit in levelModules.idle (0: it is active everywhere)
}

// logHandler is a log phase handler; one with a bit runs only for a request its
// module worked for (Request.met).
type logHandler struct {
	h   Handler
	bit uint64
}

// levelModules is what works at the levels where the same modules are active
// (Setup.ActiveWhere): their filter chains, and the modules left out.
type levelModules struct {
	snap        *Snapshot
	idle        uint64 // the bits of the modules inactive here
	active      uint64 // the bits of the others
	header      HeaderFilter
	body        BodyFilter
	bodyFilters bool // a body filter is in the chain
}

// maxActiveWhere bounds the modules that are active at some levels only: their bits
// make a uint64.
const maxActiveWhere = 64

// coreStep is a phase engine entry of the core itself.
type coreStep uint8

const (
	stepNone        coreStep = iota // a module's handler
	stepFindConfig                  // find the location
	stepPostRewrite                 // back to find config after a rewrite
	stepContent                     // the location's content handler, first in the content phase
	stepNotFound                    // 404, last in the content phase
	stepPostAccess                  // answers the access phase's kept 401 or 403 (satisfy any)
)

// NewSnapshot compiles cfg for the data path: routes, the client_body_temp_path
// directories that are missing (as nginx makes them at start and on reload), then
// every HTTP module's Init, in registry order, and the phase engine.
func NewSnapshot(cfg *conf.Config) (*Snapshot, error) {
	vars, err := VariablesFor(cfg)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Config: cfg, Routes: route.Build(cfg), vars: vars}
	if err := createTempPaths(cfg); err != nil {
		return nil, err
	}
	setup := &Setup{Config: cfg, snap: s}
	var mods []*conf.Module
	for _, m := range cfg.Registry().Modules() {
		h, ok := m.Ctx.(*Hooks)
		if !ok {
			continue
		}
		if h.NewLoop != nil && h.Key == 0 {
			return nil, fmt.Errorf("module %s: loop state without a key (httpcore.NewKey)", m.Name)
		}
		s.hooks = append(s.hooks, h)
		mods = append(mods, m)
		setup.mod = len(s.hooks) - 1
		setup.active = append(setup.active, nil)
		if h.Init != nil {
			if err := h.Init(setup); err != nil {
				return nil, fmt.Errorf("module %s: %w", m.Name, err)
			}
		}
	}
	bits, err := setup.bits()
	if err != nil {
		return nil, err
	}
	s.buildEngine(setup, bits)
	s.setLevels(setup, mods, bits)
	return s, nil
}

// bits gives each module that is active at some levels only its bit.
func (s *Setup) bits() ([]uint64, error) {
	bits := make([]uint64, len(s.active))
	n := 0
	for i, a := range s.active {
		if a == nil {
			continue
		}
		if n == maxActiveWhere {
			return nil, fmt.Errorf("httpcore: more than %d modules active at some levels only", maxActiveWhere)
		}
		bits[i] = 1 << n
		n++
	}
	return bits, nil
}

// setLevels decides at each level of the configuration which modules work there,
// and makes the filter chains of each set of them once.
func (s *Snapshot) setLevels(setup *Setup, mods []*conf.Module, bits []uint64) {
	sets := map[uint64]*levelModules{}
	set := func(idle uint64) *levelModules {
		if m := sets[idle]; m != nil {
			return m
		}
		m := &levelModules{snap: s, idle: idle, header: (*Request).writeHeader, body: (*Request).writeBody}
		for _, b := range bits {
			m.active |= b &^ idle
		}
		for _, f := range setup.headers {
			if idle&bits[f.mod] == 0 {
				m.header = f.f(m.header)
			}
		}
		for _, f := range setup.bodies {
			if idle&bits[f.mod] == 0 {
				m.body, m.bodyFilters = f.f(m.body), true
			}
		}
		sets[idle] = m
		return m
	}
	s.all = *set(0)
	if s.Config.HTTP == nil || HTTPConf(s.Config.HTTP).mods != nil {
		// A configuration keeps the levels of its first snapshot: a later one (a
		// binary upgrade undone, while the old loops finish their requests) does
		// not write what those loops read, and works with every module everywhere.
		return
	}
	done := map[*LocConf]*levelModules{}
	level := func(lcf *LocConf, conf func(*conf.Module) any) {
		var idle uint64
		for i, a := range setup.active {
			if a != nil && !a(conf(mods[i])) {
				idle |= bits[i]
			}
		}
		m := set(idle)
		if prev, ok := done[lcf]; ok && prev != m {
			m = nil // levels that share a config (none do today): everything works there
		}
		done[lcf], lcf.mods = m, m
	}
	level(HTTPConf(s.Config.HTTP), s.Config.HTTP.Conf)
	var walk func(locs []*conf.Location)
	walk = func(locs []*conf.Location) {
		for _, loc := range locs {
			level(LocationConf(loc), loc.Conf)
			walk(loc.Locations)
		}
	}
	for _, srv := range s.Config.HTTP.Servers {
		level(ServerConf(srv), srv.Conf)
		walk(srv.Locations)
	}
}

// modules is what works at the request's level of snap: the filters, the modules
// left out.
func (c *conn) modules(snap *Snapshot) *levelModules {
	if lcf := c.lcf; lcf != nil {
		if m := lcf.mods; m != nil && m.snap == snap {
			return m
		}
	}
	return &snap.all
}

// buildEngine lays the phases out in one list, as ngx_http_init_phase_handlers.
func (s *Snapshot) buildEngine(setup *Setup, bits []uint64) {
	for p := PostReadPhase; p < LogPhase; p++ {
		start := len(s.engine)
		switch p {
		case ServerRewritePhase:
			s.serverIndex = start
		case RewritePhase:
			s.rewriteIndex = start
		}
		switch p {
		case FindConfigPhase:
			s.engine = append(s.engine, phaseHandler{phase: p, step: stepFindConfig})
		case PostRewritePhase:
			s.engine = append(s.engine, phaseHandler{phase: p, step: stepPostRewrite})
		case ContentPhase:
			s.contentIndex = len(s.engine)
			s.engine = append(s.engine, phaseHandler{phase: p, step: stepContent})
		}
		for _, h := range setup.phases[p] {
			ph := phaseHandler{phase: p, h: h.h}
			if p >= FindConfigPhase && p <= ContentPhase {
				ph.bit = bits[h.mod] // left out where the location's level says
			}
			s.engine = append(s.engine, ph)
		}
		switch {
		case p == ContentPhase:
			s.engine = append(s.engine, phaseHandler{phase: p, step: stepNotFound})
		case p == AccessPhase && len(setup.phases[p]) > 0:
			// nginx's post-access phase, there only when some module checks access.
			s.engine = append(s.engine, phaseHandler{phase: p, step: stepPostAccess})
		}
		for i := start; i < len(s.engine); i++ {
			s.engine[i].next = len(s.engine)
		}
	}
	for _, h := range setup.phases[LogPhase] {
		s.logHandlers = append(s.logHandlers, logHandler{h: h.h, bit: bits[h.mod]})
	}
}

// StatsEnabled reports that a module reports figures: modules count for it.
func (s *Snapshot) StatsEnabled() bool { return s.stats }

// State is module key's state for this snapshot (Setup.SetState).
func (s *Snapshot) State(k Key) any { return s.states[k] }

// Variables is the snapshot's variable registry.
func (s *Snapshot) Variables() *Variables { return s.vars }

// createTempPaths makes the client_body_temp_path directories that do not exist, as
// nginx does at start: the last component only, mode 0700.
func createTempPaths(cfg *conf.Config) error {
	if cfg.HTTP == nil {
		return nil
	}
	seen := map[string]bool{}
	mk := func(lc *LocConf) error {
		p := lc.ClientBodyTemp
		if p == nil || seen[p.Dir] {
			return nil
		}
		seen[p.Dir] = true
		if err := os.Mkdir(p.Dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return &conf.Error{Pos: p.Pos, Msg: fmt.Sprintf("mkdir() %q failed (%v)", p.Dir, errors.Unwrap(err)), Err: err}
		}
		return nil
	}
	var walk func(locs []*conf.Location) error
	walk = func(locs []*conf.Location) error {
		for _, loc := range locs {
			if err := mk(LocationConf(loc)); err != nil {
				return err
			}
			if err := walk(loc.Locations); err != nil {
				return err
			}
		}
		return nil
	}
	if err := mk(HTTPConf(cfg.HTTP)); err != nil {
		return err
	}
	for _, srv := range cfg.HTTP.Servers {
		if err := mk(ServerConf(srv)); err != nil {
			return err
		}
		if err := walk(srv.Locations); err != nil {
			return err
		}
	}
	return nil
}

// Walk calls fn for the http level's, every server's and every location's config of
// module m (nested locations included), for a module's Init or Check to see whether
// the configuration uses it.
func Walk(cfg *conf.Config, m *conf.Module, fn func(lc any)) {
	if cfg.HTTP == nil {
		return
	}
	fn(cfg.HTTP.Conf(m))
	var walk func(locs []*conf.Location)
	walk = func(locs []*conf.Location) {
		for _, loc := range locs {
			fn(loc.Conf(m))
			walk(loc.Locations)
		}
	}
	for _, srv := range cfg.HTTP.Servers {
		fn(srv.Conf(m))
		walk(srv.Locations)
	}
}
