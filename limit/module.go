package limit

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module is nginx's limit_req and limit_conn modules on the HTTP core: the zones'
// directives, the limits at each level, $limit_req_status and $limit_conn_status,
// and the handlers in the preaccess phase (limit_req first, as nginx) with the
// limit_conn counts given back when the request ends (its log phase). The zones'
// state is this package's table, shared by every loop.
var Module = &conf.Module{
	Name:       "limit",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP:  func(parent, child any) error { child.(*LocConf).inherit(parent.(*LocConf)); return nil },
	Check:      check,
	Ctx: &httpcore.Hooks{
		Init:    initModule,
		NewLoop: func(*httpcore.Worker) httpcore.LoopState { return &loopState{} },
		Key:     key,
		Variables: []httpcore.Variable{
			{Name: "limit_req_status", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
				if x := ctxOf(r, false); x != nil && x.reqStatus != 0 {
					dst = append(dst, x.reqStatus.String()...)
				}
				return dst
			}},
			{Name: "limit_conn_status", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
				if x := ctxOf(r, false); x != nil && x.connStatus != 0 {
					dst = append(dst, x.connStatus.String()...)
				}
				return dst
			}},
		},
	},
}

// self is Module, for the handlers (Module's own initialiser cannot name them).
var self *conf.Module

func init() { self = Module }

var key = httpcore.NewKey()

func directives() []conf.Directive {
	const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx
	return []conf.Directive{
		{Name: "limit_req_zone", Contexts: conf.HTTPCtx, Args: conf.Args1More, Multi: true, Set: setReqZone,
			Syntax: "limit_req_zone key zone=name:size rate=rate;",
			Doc:    "Declares a zone of request rates by key (variables; an empty key is not limited), rate in r/s or r/m. The zone holds for the whole process (every loop and domain); its size bounds the keys kept, the least recently used evicted. NGINX Plus's sync is refused."},
		{Name: "limit_req", Contexts: hsl, Args: conf.Args1 | conf.Args2 | conf.Args3, Multi: true, Set: setReq,
			Syntax: "limit_req zone=name [burst=number] [nodelay | delay=number];",
			Doc:    "Limits the request rate by a zone (several per level; a level without any inherits its parent's). Requests over the rate wait on the loop's timers up to burst (nodelay or delay=N: that many go at once), beyond it they are rejected. burst is at most 65535."},
		{Name: "limit_req_status", Contexts: hsl, Args: conf.Args1, Set: setStatus(func(c *LocConf) *int { return &c.ReqStatus }, bitReqStatus),
			Syntax: "limit_req_status code;", Default: "503",
			Doc: "The status of a rejected request (400 to 599)."},
		{Name: "limit_req_log_level", Contexts: hsl, Args: conf.Args1, Set: setLogLevel(func(c *LocConf) *slog.Level { return &c.ReqLogLevel }, bitReqLogLevel),
			Syntax: "limit_req_log_level info | notice | warn | error;", Default: "error",
			Doc: "The level of the rejection lines; delays are logged one level lower."},
		{Name: "limit_req_dry_run", Contexts: hsl, Args: conf.Args1, Set: setDryRun(func(c *LocConf) *bool { return &c.ReqDryRun }, bitReqDryRun),
			Syntax: "limit_req_dry_run on | off;", Default: "off",
			Doc: "Accounts and logs, but neither delays nor rejects ($limit_req_status says what would have happened)."},
		{Name: "limit_conn_zone", Contexts: conf.HTTPCtx, Args: conf.Args1More, Multi: true, Set: setConnZone,
			Syntax: "limit_conn_zone key zone=name:size;",
			Doc:    "Declares a zone of request counts in progress by key (variables; an empty key is not counted), held for the whole process. NGINX Plus's sync is refused."},
		{Name: "limit_conn", Contexts: hsl, Args: conf.Args2, Multi: true, Set: setConn,
			Syntax: "limit_conn zone number;",
			Doc:    "Limits the requests in progress per key of a zone (several per level; a level without any inherits its parent's); a request holds its count until it ends, proxied and long responses included."},
		{Name: "limit_conn_status", Contexts: hsl, Args: conf.Args1, Set: setStatus(func(c *LocConf) *int { return &c.ConnStatus }, bitConnStatus),
			Syntax: "limit_conn_status code;", Default: "503",
			Doc: "The status of a rejected request (400 to 599)."},
		{Name: "limit_conn_log_level", Contexts: hsl, Args: conf.Args1, Set: setLogLevel(func(c *LocConf) *slog.Level { return &c.ConnLogLevel }, bitConnLogLevel),
			Syntax: "limit_conn_log_level info | notice | warn | error;", Default: "error",
			Doc: "The level of the rejection lines."},
		{Name: "limit_conn_dry_run", Contexts: hsl, Args: conf.Args1, Set: setDryRun(func(c *LocConf) *bool { return &c.ConnDryRun }, bitConnDryRun),
			Syntax: "limit_conn_dry_run on | off;", Default: "off",
			Doc: "Counts and logs, but does not reject ($limit_conn_status says what would have happened)."},
	}
}

// LocConf is a level's limits, merged as nginx merges them.
type LocConf struct {
	set uint64

	// The http level's zones (nil at other levels), with their keys compiled.
	zones    *Zones
	zoneKeys map[string]*httpcore.Template

	Req          []ReqLimitConfig
	ReqStatus    int
	ReqLogLevel  slog.Level
	ReqDryRun    bool
	Conn         []ConnLimitConfig
	ConnStatus   int
	ConnLogLevel slog.Level
	ConnDryRun   bool

	// Made by Init for the snapshot: the limits on opened zones and their keys.
	req      *ReqConf
	reqKeys  []*httpcore.Template
	conn     *ConnConf
	connKeys []*httpcore.Template
}

const (
	bitReq uint64 = 1 << iota
	bitReqStatus
	bitReqLogLevel
	bitReqDryRun
	bitConn
	bitConnStatus
	bitConnLogLevel
	bitConnDryRun
)

func defaults() LocConf {
	return LocConf{ReqStatus: 503, ReqLogLevel: slog.LevelError, ConnStatus: 503, ConnLogLevel: slog.LevelError}
}

var inheritedFields = []conf.Inherited[LocConf]{
	{Bit: bitReq, Take: func(c, p *LocConf) { c.Req = p.Req }},
	{Bit: bitReqStatus, Take: func(c, p *LocConf) { c.ReqStatus = p.ReqStatus }},
	{Bit: bitReqLogLevel, Take: func(c, p *LocConf) { c.ReqLogLevel = p.ReqLogLevel }},
	{Bit: bitReqDryRun, Take: func(c, p *LocConf) { c.ReqDryRun = p.ReqDryRun }},
	{Bit: bitConn, Take: func(c, p *LocConf) { c.Conn = p.Conn }},
	{Bit: bitConnStatus, Take: func(c, p *LocConf) { c.ConnStatus = p.ConnStatus }},
	{Bit: bitConnLogLevel, Take: func(c, p *LocConf) { c.ConnLogLevel = p.ConnLogLevel }},
	{Bit: bitConnDryRun, Take: func(c, p *LocConf) { c.ConnDryRun = p.ConnDryRun }},
}

func (c *LocConf) inherit(parent *LocConf) {
	conf.Inherit(c, parent, func(lc *LocConf) *uint64 { return &lc.set }, defaults, inheritedFields)
}

func locConf(c *conf.Cursor) *LocConf { return c.HTTPConf().(*LocConf) }

// zoneKey compiles a zone's key; the zones live at the http level.
func declareKey(c *conf.Cursor, s *conf.Stmt, name, k string) error {
	t, err := httpcore.CompileTemplate(c, k)
	if err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	}
	lc := locConf(c)
	if lc.zoneKeys == nil {
		lc.zoneKeys = map[string]*httpcore.Template{}
	}
	lc.zoneKeys[name] = t
	return nil
}

func httpZones(c *conf.Cursor) *Zones {
	lc := locConf(c)
	if lc.zones == nil {
		lc.zones = &Zones{}
	}
	return lc.zones
}

func setReqZone(c *conf.Cursor, s *conf.Stmt) error {
	cfg, err := ParseReqZone(s)
	if err != nil {
		return err
	}
	if err := httpZones(c).DeclareReq(cfg); err != nil {
		return err
	}
	return declareKey(c, s, cfg.Name, cfg.Key)
}

func setConnZone(c *conf.Cursor, s *conf.Stmt) error {
	cfg, err := ParseConnZone(s)
	if err != nil {
		return err
	}
	if err := httpZones(c).DeclareConn(cfg); err != nil {
		return err
	}
	return declareKey(c, s, cfg.Name, cfg.Key)
}

func setReq(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	list, err := AddReqLimit(lc.Req, s)
	if err != nil {
		return err
	}
	lc.Req, lc.set = list, lc.set|bitReq
	return nil
}

func setConn(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	list, err := AddConnLimit(lc.Conn, s)
	if err != nil {
		return err
	}
	lc.Conn, lc.set = list, lc.set|bitConn
	return nil
}

func setMask(lc *LocConf) *uint64 { return &lc.set }

func setStatus(field func(*LocConf) *int, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetParsed(ParseStatus, field, setMask, bit)
}

func setLogLevel(field func(*LocConf) *slog.Level, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetParsed(ParseLogLevel, field, setMask, bit)
}

func setDryRun(field func(*LocConf) *bool, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetParsed(ParseDryRun, field, setMask, bit)
}

// check reports a limit naming no zone of its kind at the limit's line (nginx -t
// finds it too, without a place).
func check(cfg *conf.Config, m *conf.Module) error {
	if cfg.HTTP == nil {
		return nil
	}
	zs := cfg.HTTP.Conf(m).(*LocConf).zones
	if zs == nil {
		zs = &Zones{}
	}
	var err error
	httpcore.Walk(cfg, m, func(v any) {
		lc := v.(*LocConf)
		for _, l := range lc.Req {
			if _, ok := zs.reqCfg[l.Zone]; !ok && err == nil {
				err = missing(l.Zone, l.Pos, zs.connCfg)
			}
		}
		for _, l := range lc.Conn {
			if _, ok := zs.connCfg[l.Zone]; !ok && err == nil {
				err = missing(l.Zone, l.Pos, zs.reqCfg)
			}
		}
	})
	return err
}

// running is the zones of the configuration opened last: a reload's zones of the
// same name, kind and size take over their states, as nginx's shared zones.
var (
	runningMu sync.Mutex
	running   *Zones
)

// state marks a snapshot whose configuration has limits.
type state struct{}

func initModule(s *httpcore.Setup) error {
	if s.Config.HTTP == nil {
		return nil
	}
	hc := s.Config.HTTP.Conf(self).(*LocConf)
	used := false
	httpcore.Walk(s.Config, self, func(v any) {
		lc := v.(*LocConf)
		used = used || len(lc.Req) > 0 || len(lc.Conn) > 0
	})
	if !used {
		return nil
	}
	zs := hc.zones
	runningMu.Lock()
	err := zs.Open(running)
	if err == nil {
		running = zs
	}
	runningMu.Unlock()
	if err != nil {
		return err
	}
	httpcore.Walk(s.Config, self, func(v any) {
		lc := v.(*LocConf)
		if err != nil {
			return
		}
		lc.req, lc.reqKeys, lc.conn, lc.connKeys = nil, nil, nil, nil
		if len(lc.Req) > 0 {
			var limits []ReqLimit
			if limits, err = zs.ReqLimits(lc.Req); err != nil {
				return
			}
			lc.req = &ReqConf{Limits: limits, Status: lc.ReqStatus, LogLevel: lc.ReqLogLevel, DryRun: lc.ReqDryRun}
			for _, l := range lc.Req {
				lc.reqKeys = append(lc.reqKeys, hc.zoneKeys[l.Zone])
			}
		}
		if len(lc.Conn) > 0 {
			var limits []ConnLimit
			if limits, err = zs.ConnLimits(lc.Conn); err != nil {
				return
			}
			lc.conn = &ConnConf{Limits: limits, Status: lc.ConnStatus, LogLevel: lc.ConnLogLevel, DryRun: lc.ConnDryRun}
			for _, l := range lc.Conn {
				lc.connKeys = append(lc.connKeys, hc.zoneKeys[l.Zone])
			}
		}
	})
	if err != nil {
		return err
	}
	s.SetState(key, state{})
	// The preaccess handlers work only at levels with limits (inherited ones
	// included); the post-read and log handlers keep the request's state.
	s.ActiveWhere(func(c any) bool {
		lc := c.(*LocConf)
		return lc.req != nil || lc.conn != nil
	})
	for _, a := range []struct {
		p httpcore.Phase
		h httpcore.Handler
	}{
		{httpcore.PostReadPhase, startRequest},
		{httpcore.PreaccessPhase, limitReq},
		{httpcore.PreaccessPhase, limitConn},
		{httpcore.LogPhase, endRequest},
	} {
		if err := s.AddHandler(a.p, a.h); err != nil {
			return err
		}
	}
	return nil
}

// loopState is a loop's scratch for evaluating keys.
type loopState struct {
	buf  []byte
	keys [][]byte
	line []byte
}

func (*loopState) Reload(*httpcore.Snapshot) {}

// evalKeys evaluates the limits' keys for r into the loop's scratch (a key stays
// valid when the scratch grows: it keeps the array it was made in).
func (ls *loopState) evalKeys(ts []*httpcore.Template, r *httpcore.Request) [][]byte {
	ls.buf, ls.keys = ls.buf[:0], ls.keys[:0]
	for _, t := range ts {
		from := len(ls.buf)
		ls.buf = t.Append(ls.buf, r)
		ls.keys = append(ls.keys, ls.buf[from:len(ls.buf):len(ls.buf)])
	}
	return ls.keys
}

// reqCtx is a request's limit state, kept in the request's context and reused by
// the requests that reuse the request state. It is the delay's Pending: a client
// that goes away during the delay aborts it.
type reqCtx struct {
	r          *httpcore.Request
	reqStatus  ReqStatus
	connStatus ConnStatus
	hold       ConnHold
	timer      eventloop.Timer
	timerInit  bool
}

// ctxOf is r's limit state, made when create is true. A request served on a
// snapshot without limits has none to show.
func ctxOf(r *httpcore.Request, create bool) *reqCtx {
	x, _ := r.Ctx(key).(*reqCtx)
	if x == nil && create {
		x = &reqCtx{}
		r.SetCtx(key, x)
	}
	if x != nil && !create && r.Snapshot() != nil && r.Snapshot().State(key) == nil {
		return nil
	}
	return x
}

// startRequest clears the state a previous request left in the reused context
// (post-read runs once a request, not again after an internal redirect).
func startRequest(r *httpcore.Request) httpcore.Status {
	if x, _ := r.Ctx(key).(*reqCtx); x != nil {
		x.hold.Release()
		x.reqStatus, x.connStatus = 0, 0
	}
	return httpcore.Declined
}

// endRequest gives back what the request holds in limit_conn zones.
func endRequest(r *httpcore.Request) httpcore.Status {
	if x, _ := r.Ctx(key).(*reqCtx); x != nil {
		x.hold.Release()
		if x.timer.Pending() {
			x.timer.Stop()
		}
	}
	return httpcore.Declined
}

func limitReq(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || lc.req == nil {
		return httpcore.Declined
	}
	x := ctxOf(r, true)
	if x.reqStatus != 0 {
		return httpcore.Declined // applied once a request: after its delay, or before an internal redirect
	}
	ls := r.Worker().State(key).(*loopState)
	d := lc.req.Check(ls.evalKeys(lc.reqKeys, r), Now())
	x.reqStatus = d.Status
	switch d.Status {
	case ReqRejected, ReqRejectedDryRun:
		level := lc.req.LogLevel
		if d.Full {
			level = errorlog.LevelAlert
		}
		logDecision(r, ls, level, d.AppendLog(ls.line[:0]))
	case ReqDelayed, ReqDelayedDryRun:
		logDecision(r, ls, lc.req.DelayLogLevel(), d.AppendLog(ls.line[:0]))
	}
	if d.Code != 0 {
		return httpcore.Status(d.Code)
	}
	if d.Delay > 0 {
		x.delay(r, d.Delay)
		return httpcore.Again
	}
	return httpcore.Declined
}

func limitConn(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || lc.conn == nil {
		return httpcore.Declined
	}
	x := ctxOf(r, true)
	if x.connStatus != 0 {
		return httpcore.Declined
	}
	ls := r.Worker().State(key).(*loopState)
	d := lc.conn.Acquire(ls.evalKeys(lc.connKeys, r), &x.hold)
	x.connStatus = d.Status
	if d.Status == ConnRejected || d.Status == ConnRejectedDryRun {
		level := lc.conn.LogLevel
		if d.Full {
			level = errorlog.LevelCrit
		}
		logDecision(r, ls, level, d.AppendLog(ls.line[:0]))
	}
	if d.Code != 0 {
		return httpcore.Status(d.Code)
	}
	return httpcore.Declined
}

// logDecision writes nginx's line with the request's client, server, request and
// host.
func logDecision(r *httpcore.Request, ls *loopState, level slog.Level, line []byte) {
	ls.line = line[:0]
	log := r.Log()
	if !log.Enabled(context.Background(), level) {
		return
	}
	req := r.RawHead()
	if i := bytes.IndexByte(req, '\n'); i >= 0 {
		req = bytes.TrimRight(req[:i], "\r")
	}
	args := []any{"client", r.RemoteAddr().Addr().String(), "server", serverName(r), "request", string(req)}
	if h := r.Head().Host(); len(h) > 0 {
		args = append(args, "host", string(h))
	}
	log.Log(context.Background(), level, string(line), args...)
}

func serverName(r *httpcore.Request) string {
	if s := r.Server(); s != nil && len(s.Names) > 0 {
		return s.Names[0].Name
	}
	return ""
}

// delay holds r on the loop's timer; the client's going away aborts it (Pending).
func (x *reqCtx) delay(r *httpcore.Request, d time.Duration) {
	if !x.timerInit {
		r.Worker().Loop().InitTimer(&x.timer, x.fire)
		x.timerInit = true
	}
	x.r = r
	r.SetPending(x)
	x.timer.Reset(d)
}

// fire ends the delay: the phases go on (limit_req declines this time, limit_conn
// runs).
func (x *reqCtx) fire(*eventloop.Timer) {
	r := x.r
	if r == nil || r.Pending() != httpcore.Pending(x) {
		return
	}
	x.r = nil
	r.SetPending(nil)
	r.RunPhases()
}

// The Pending side of a delay: nothing of the body is read meanwhile.
func (x *reqCtx) BodyData([]byte)   {}
func (x *reqCtx) BodyRead()         {}
func (x *reqCtx) BodyEnd()          {}
func (x *reqCtx) ClientBlocked()    {}
func (x *reqCtx) ClientWritable()   {}
func (x *reqCtx) TunnelData([]byte) {}
func (x *reqCtx) ClientGone() bool  { return false }

// Abort: the request ended during its delay (the client went away).
func (x *reqCtx) Abort() {
	x.timer.Stop()
	x.r = nil
}
