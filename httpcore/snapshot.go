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
	logHandlers  []Handler
	topHeader    HeaderFilter
	topBody      BodyFilter
	bodyFilters  bool // a module added a body filter
	states       [maxKeys]any
	hooks        []*Hooks // the registry's HTTP modules, in order
	stats        bool     // a module reports figures (Setup.EnableStats)
}

// phaseHandler is one entry of the engine: a module's handler, or a step of the
// core's own.
type phaseHandler struct {
	phase Phase
	h     Handler
	step  coreStep
	next  int // the first entry of the next phase
}

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
	s.topHeader = (*Request).writeHeader
	s.topBody = (*Request).writeBody
	if err := createTempPaths(cfg); err != nil {
		return nil, err
	}
	setup := &Setup{Config: cfg, snap: s}
	for _, m := range cfg.Registry().Modules() {
		h, ok := m.Ctx.(*Hooks)
		if !ok {
			continue
		}
		if h.NewLoop != nil && h.Key == 0 {
			return nil, fmt.Errorf("module %s: loop state without a key (httpcore.NewKey)", m.Name)
		}
		s.hooks = append(s.hooks, h)
		if h.Init != nil {
			if err := h.Init(setup); err != nil {
				return nil, fmt.Errorf("module %s: %w", m.Name, err)
			}
		}
	}
	s.buildEngine(setup)
	return s, nil
}

// buildEngine lays the phases out in one list, as ngx_http_init_phase_handlers.
func (s *Snapshot) buildEngine(setup *Setup) {
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
			s.engine = append(s.engine, phaseHandler{phase: p, h: h})
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
	s.logHandlers = setup.phases[LogPhase]
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
