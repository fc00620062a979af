package resolver

import (
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module declares nginx's core resolver and resolver_timeout directives at the
// http, server and location levels, and keeps each loop's resolvers. The upstream
// block's own resolver directives are the upstream package's (they use
// ParseResolver and ParseTimeout too).
var Module = &conf.Module{
	Name: "resolver",
	Directives: []conf.Directive{
		{Name: "resolver", Contexts: hsl, Args: conf.Args1More, Set: setResolver,
			Syntax: "resolver address ... [valid=time] [ipv4=on|off] [ipv6=on|off] [status_zone=zone];",
			Doc:    "Name servers (IP address or name looked up at start, optional port, default 53) that resolve proxy_pass hosts made of variables and upstream servers with resolve, from each loop without blocking it. Answers are cached for their TTL or valid=; ipv4=off or ipv6=off leaves out A or AAAA queries. status_zone is accepted for NGINX Plus's syntax and has no effect."},
		{Name: "resolver_timeout", Contexts: hsl, Args: conf.Args1, Set: setTimeout,
			Syntax: "resolver_timeout time;", Default: "30s",
			Doc: "Longest time a name lookup may take; then the request waiting for it gets 502."},
	},
	NewHTTP:   func() any { return &LocConf{} },
	MergeHTTP: func(parent, child any) error { child.(*LocConf).inherit(parent.(*LocConf)); return nil },
	Ctx:       &httpcore.Hooks{NewLoop: newLoop, Key: key},
}

var key = httpcore.NewKey()

const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx

// LocConf is the resolver directives at one level, after inheritance: as nginx,
// each level takes the nearest resolver and, separately, the nearest
// resolver_timeout.
type LocConf struct {
	Resolver *Config // nil: no resolver
	Timeout  time.Duration
	set      uint64
}

const (
	bitResolver = 1 << iota
	bitTimeout
)

func defaults() LocConf { return LocConf{Timeout: defaultTimeout} }

var inherited = []conf.Inherited[LocConf]{
	{Bit: bitResolver, Take: func(c, p *LocConf) { c.Resolver = p.Resolver }},
	{Bit: bitTimeout, Take: func(c, p *LocConf) { c.Timeout = p.Timeout }},
}

func (c *LocConf) inherit(parent *LocConf) {
	conf.Inherit(c, parent, func(lc *LocConf) *uint64 { return &lc.set }, defaults, inherited)
}

func setResolver(c *conf.Cursor, s *conf.Stmt) error {
	cfg, err := ParseResolver(s)
	if err != nil {
		return err
	}
	lc := c.HTTPConf().(*LocConf)
	lc.Resolver, lc.set = &cfg, lc.set|bitResolver
	return nil
}

func setTimeout(c *conf.Cursor, s *conf.Stmt) error {
	d, err := ParseTimeout(s)
	if err != nil {
		return err
	}
	lc := c.HTTPConf().(*LocConf)
	lc.Timeout, lc.set = d, lc.set|bitTimeout
	return nil
}

// HTTPConf is the resolver settings of the http level (the fallback of upstream
// blocks without a resolver of their own).
func HTTPConf(h *conf.HTTP) *LocConf {
	if lc, ok := h.Conf(Module).(*LocConf); ok {
		return lc
	}
	return &LocConf{Timeout: defaultTimeout}
}

// loopState is a loop's resolvers, one per set of settings.
type loopState struct {
	w  *httpcore.Worker
	rs map[string]*Resolver
}

func newLoop(w *httpcore.Worker) httpcore.LoopState {
	return &loopState{w: w, rs: map[string]*Resolver{}}
}

// Reload keeps the resolvers: a new snapshot with the same settings finds its
// resolver, and its cache, again. One whose settings are gone holds no socket
// once its last query ended and stays idle.
func (st *loopState) Reload(*httpcore.Snapshot) {}

// For returns the loop's resolver of the request's location and its
// resolver_timeout; a nil Resolver when the location has none.
func For(r *httpcore.Request) (*Resolver, time.Duration) {
	lc, _ := r.LocConf(Module).(*LocConf)
	if lc == nil || lc.Resolver == nil {
		return nil, defaultTimeout
	}
	return Of(r.Worker(), lc.Resolver), lc.Timeout
}

// Of returns w's resolver for cfg, made on first use. Loops share nothing: each
// asks the name servers and caches for itself. Call it on w's loop.
func Of(w *httpcore.Worker, cfg *Config) *Resolver {
	st, _ := w.State(key).(*loopState)
	if st == nil {
		return nil // the binary was built without this module
	}
	k := cfg.key // set by ParseResolver: the Config is shared by the loops
	if k == "" {
		k = settingsKey(cfg)
	}
	r := st.rs[k]
	if r == nil {
		var err error
		if r, err = New(w.Loop(), *cfg); err != nil {
			return nil // ParseResolver refused such settings already
		}
		st.rs[k] = r
	}
	return r
}

// settingsKey identifies what makes two resolvers answer alike.
func settingsKey(cfg *Config) string {
	var b strings.Builder
	for _, s := range cfg.Servers {
		b.WriteString(s.String())
		b.WriteByte(' ')
	}
	b.WriteString(strconv.FormatInt(int64(cfg.Valid), 10))
	b.WriteString(strconv.FormatBool(cfg.NoIPv4))
	b.WriteString(strconv.FormatBool(cfg.NoIPv6))
	return b.String()
}
