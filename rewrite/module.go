package rewrite

import (
	"strconv"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/pcre"
)

// Module declares the rewrite directives. Each level keeps its own list of them:
// nginx's rewrite directives are not inherited, a server's run in the server rewrite
// phase, a location's in the location's rewrite phase.
var Module = &conf.Module{
	Name:       "rewrite",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP:  merge,
	Ctx:        &httpcore.Hooks{Init: initModule, NewLoop: newLoop, Key: key},
}

// self is Module, for the handlers (Module's own initialiser cannot name them).
var self *conf.Module

func init() { self = Module }

var key = httpcore.NewKey()

const (
	// sl is where the rewrite directives stand: server, location and if blocks.
	sl  = conf.ServerCtx | conf.LocationCtx | conf.SrvIfCtx | conf.LocIfCtx
	hsl = conf.HTTPCtx | sl
)

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "return", Contexts: sl, Args: conf.Args1 | conf.Args2, Multi: true, Set: setReturn,
			Syntax: "return code [text] | code URL | URL;",
			Doc:    "Stops the rewrite directives and answers: a status with a body text, a redirect (301 302 303 307 308) to a URL, or 302 to a URL alone. Variables allowed."},
		{Name: "rewrite", Contexts: sl, Args: conf.Args2 | conf.Args3, Multi: true, Set: setRewrite,
			Syntax: "rewrite regex replacement [last | break | redirect | permanent];",
			Doc:    "Replaces $uri matching regex (PCRE syntax, captures $1..$9 and named) with replacement: last looks for the location again (10 times at most, then 500), break stops here, redirect/permanent (or a replacement starting with http://, https://, $scheme) answer 302/301. The request's arguments follow unless the replacement ends with \"?\"."},
		{Name: "set", Contexts: sl, Args: conf.Args2, Multi: true, Set: setSet,
			Syntax: "set $variable value;",
			Doc:    "Gives a variable a value (with variables) for the rest of the request; the variable exists for every directive's templates."},
		{Name: "if", Contexts: sl, Args: conf.Args1More, Block: true, Multi: true, Set: setIf,
			Syntax: "if (condition) { ... }",
			Doc:    "Runs the block's directives when the condition holds: a variable (false when empty or \"0\"), = and != a value, ~ ~* !~ !~* a regex, -f -d -e -x and !-f !-d !-e !-x a file. Inside a location the block is a location of its own, nginx's implicit one."},
		{Name: "break", Contexts: sl, Args: conf.Args0, Multi: true, Set: setBreak,
			Syntax: "break;",
			Doc:    "Stops the rewrite directives of this level."},
		{Name: "rewrite_log", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.Log }, bitLog),
			Syntax: "rewrite_log on | off;", Default: "off",
			Doc: "Logs each rewrite and regex if condition's result to the error log at the notice level."},
		{Name: "uninitialized_variable_warn", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.UninitWarn }, bitUninit),
			Syntax: "uninitialized_variable_warn on | off;", Default: "on",
			Doc: "Logs a warning when a variable that set gives a value is used before it got one."},
	}
}

// LocConf holds a level's rewrite directives in order (not inherited) and the
// inherited flags.
type LocConf struct {
	ops        []op
	Log        bool
	UninitWarn bool
	set        uint64
}

const (
	bitLog = 1 << iota
	bitUninit
)

// Ops reports how many rewrite directives the level has (for tests and Init).
func (lc *LocConf) Ops() int { return len(lc.ops) }

func merge(parent, child any) error {
	c, p := child.(*LocConf), parent.(*LocConf)
	conf.Inherit(c, p, func(lc *LocConf) *uint64 { return &lc.set },
		func() LocConf { return LocConf{UninitWarn: true} }, inherited)
	return nil
}

var inherited = []conf.Inherited[LocConf]{
	{Bit: bitLog, Take: func(c, p *LocConf) { c.Log = p.Log }},
	{Bit: bitUninit, Take: func(c, p *LocConf) { c.UninitWarn = p.UninitWarn }},
}

// setFlag stores on|off (checked by the parser: Flag arity).
func setFlag(field func(*LocConf) *bool, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseFlag, field, func(lc *LocConf) *uint64 { return &lc.set }, bit)
}

// opKind is what one rewrite directive does, nginx's script codes.
type opKind uint8

const (
	opReturn opKind = iota
	opRewrite
	opSet
	opIf
	opBreak
)

// op is one compiled rewrite directive.
type op struct {
	kind opKind
	ret  *Return
	rw   *rewriteOp
	set  *setOp
	cond *ifOp
}

// Return is a return directive.
type Return struct {
	Code int
	Text *httpcore.Template // body text, or the redirect URL for 301/302/303/307/308; nil for none
}

func addOp(c *conf.Cursor, o op) {
	lc := c.HTTPConf().(*LocConf)
	lc.ops = append(lc.ops, o)
}

func setReturn(c *conf.Cursor, s *conf.Stmt) error {
	r := &Return{}
	first := s.Args[0].Value
	code, err := strconv.Atoi(first)
	switch {
	case err != nil && len(s.Args) == 1 && (strings.HasPrefix(first, "http://") || strings.HasPrefix(first, "https://") || strings.HasPrefix(first, "$scheme")):
		r.Code = 302
		if r.Text, err = httpcore.CompileTemplate(c, first); err != nil {
			return s.InvalidValue(s.Args[0], err.Error())
		}
	case err != nil || code < 100 || code > 999:
		return s.InvalidValue(s.Args[0], "invalid return code")
	default:
		r.Code = code
		if len(s.Args) == 2 {
			if r.Text, err = httpcore.CompileTemplate(c, s.Args[1].Value); err != nil {
				return s.InvalidValue(s.Args[1], err.Error())
			}
		}
	}
	addOp(c, op{kind: opReturn, ret: r})
	return nil
}

func setBreak(c *conf.Cursor, s *conf.Stmt) error {
	addOp(c, op{kind: opBreak})
	return nil
}

// setOp is "set $variable value".
type setOp struct {
	v        *httpcore.Declared
	owned    *httpcore.Variable // a module's variable that takes a value ($args), instead of v
	value    *httpcore.Template
	static   []byte // the value when it has no variables (isStatic)
	isStatic bool
}

func setSet(c *conf.Cursor, s *conf.Stmt) error {
	name := s.Args[0].Value
	if len(name) < 2 || name[0] != '$' {
		return s.InvalidValue(s.Args[0], "")
	}
	vars, err := httpcore.ConfigVariables(c)
	if err != nil {
		return err
	}
	so := &setOp{owned: vars.Settable(name[1:])}
	if so.owned == nil {
		d, err := vars.Declare(name[1:])
		if err != nil {
			return s.Errorf("%s", err)
		}
		if d.Get == nil {
			d.Unset = warnUnset
		}
		so.v = d
	}
	t, err := httpcore.CompileTemplate(c, s.Args[1].Value)
	if err != nil {
		return s.InvalidValue(s.Args[1], err.Error())
	}
	so.value = t
	if t.Static() {
		so.static, so.isStatic = t.Append(nil, nil), true
	}
	addOp(c, op{kind: opSet, set: so})
	return nil
}

// warnUnset is nginx's ngx_http_rewrite_var: a variable set gives a value to, used
// before it got one, is empty, with a warning unless uninitialized_variable_warn is
// off.
func warnUnset(r *httpcore.Request, d *httpcore.Declared) {
	if lc, _ := r.LocConf(self).(*LocConf); lc != nil && !lc.UninitWarn {
		return
	}
	r.Log().Warn("using uninitialized \""+d.Name+"\" variable", "client", r.RemoteAddr().String())
}

// flag is a rewrite's last argument.
type flag uint8

const (
	flagNone flag = iota
	flagLast
	flagBreak
	flagRedirect
)

// rewriteOp is "rewrite regex replacement [flag]".
type rewriteOp struct {
	re      *pcre.Regexp
	path    *httpcore.Template // the replacement, up to its "?"
	args    *httpcore.Template // after its "?"; nil without one
	addArgs bool               // the request's arguments follow (no trailing "?")
	flag    flag
	status  int // 301 or 302 for a redirect
}

func setRewrite(c *conf.Cursor, s *conf.Stmt) error {
	repl := s.Args[1].Value
	if repl == "" {
		return s.Errorf("empty replacement")
	}
	re, err := conf.CompileRegex(s.Args[0], false)
	if err != nil {
		return err
	}
	if err := addRegex(c, re, s); err != nil {
		return err
	}
	rw := &rewriteOp{re: re, addArgs: true}
	if strings.HasSuffix(repl, "?") {
		// the last "?" drops the original arguments
		repl, rw.addArgs = repl[:len(repl)-1], false
	}
	if strings.HasPrefix(repl, "http://") || strings.HasPrefix(repl, "https://") || strings.HasPrefix(repl, "$scheme") {
		rw.flag, rw.status = flagRedirect, 302
	}
	if len(s.Args) == 3 {
		switch s.Args[2].Value {
		case "last":
			rw.flag = flagLast
		case "break":
			rw.flag = flagBreak
		case "redirect":
			rw.flag, rw.status = flagRedirect, 302
		case "permanent":
			rw.flag, rw.status = flagRedirect, 301
		default:
			return &conf.Error{Pos: s.Args[2].Pos, Msg: "invalid parameter \"" + s.Args[2].Value + "\""}
		}
	}
	path, args, hasArgs := repl, "", false
	if rw.flag != flagRedirect {
		// A redirect keeps its "?" in the URL; otherwise the first literal "?"
		// starts the new arguments.
		path, args, hasArgs = splitArgs(repl)
	}
	if rw.path, err = httpcore.CompileTemplate(c, path); err != nil {
		return s.InvalidValue(s.Args[1], err.Error())
	}
	if hasArgs {
		if rw.args, err = httpcore.CompileTemplate(c, args); err != nil {
			return s.InvalidValue(s.Args[1], err.Error())
		}
	}
	addOp(c, op{kind: opRewrite, rw: rw})
	return nil
}

// splitArgs cuts a replacement at its first "?" outside a variable's name.
func splitArgs(s string) (path, args string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '?':
			return s[:i], s[i+1:], true
		case '$':
			j := i + 1
			switch {
			case j < len(s) && s[j] >= '1' && s[j] <= '9':
				j++
			case j < len(s) && s[j] == '{':
				if end := strings.IndexByte(s[j:], '}'); end >= 0 {
					j += end + 1
				}
			default:
				for j < len(s) && isVarChar(s[j]) {
					j++
				}
			}
			i = j - 1
		}
	}
	return s, "", false
}

func isVarChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// addRegex declares a regex's named groups as variables.
func addRegex(c *conf.Cursor, re *pcre.Regexp, s *conf.Stmt) error {
	vars, err := httpcore.ConfigVariables(c)
	if err != nil {
		return err
	}
	if err := vars.AddRegex(re); err != nil {
		return s.Errorf("%s", err)
	}
	return nil
}

// initModule puts the handler in the rewrite phases whose levels have rewrite
// directives: without them the module costs a request nothing, nor does a
// location without any.
func initModule(s *httpcore.Setup) error {
	if s.Config.HTTP == nil {
		return nil
	}
	var servers, locations bool
	for _, srv := range s.Config.HTTP.Servers {
		servers = servers || len(srv.Conf(self).(*LocConf).ops) > 0
	}
	httpcore.Walk(s.Config, self, func(lc any) { locations = locations || len(lc.(*LocConf).ops) > 0 })
	if servers {
		if err := s.AddHandler(httpcore.ServerRewritePhase, serverHandler); err != nil {
			return err
		}
	}
	if locations {
		// Only at the levels with rewrite directives of their own (they are
		// not inherited): elsewhere a request does not meet the handler.
		s.ActiveWhere(func(lc any) bool { return len(lc.(*LocConf).ops) > 0 })
		return s.AddHandler(httpcore.RewritePhase, locationHandler)
	}
	return nil
}

// loopState is the module's state in one loop: buffers reused by every request.
type loopState struct {
	a, b []byte
}

func newLoop(*httpcore.Worker) httpcore.LoopState {
	return &loopState{a: make([]byte, 0, 1<<10), b: make([]byte, 0, 1<<10)}
}

func (*loopState) Reload(*httpcore.Snapshot) {}

// serverHandler runs the server level's directives (the server rewrite phase).
func serverHandler(r *httpcore.Request) httpcore.Status {
	if r.Location() != nil {
		return httpcore.Declined // a named location's rewrite phase comes next
	}
	return run(r)
}

// locationHandler runs the location's directives; nginx skips the phase when no
// location matched.
func locationHandler(r *httpcore.Request) httpcore.Status {
	if r.Location() == nil {
		return httpcore.Declined
	}
	return run(r)
}

func run(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || len(lc.ops) == 0 {
		return httpcore.Declined
	}
	st := r.Worker().State(key).(*loopState)
	rc, _ := exec(r, st, lc, lc.ops)
	return rc
}
