// Package authrequest is nginx's ngx_http_auth_request_module: in the access phase,
// a subrequest to a URI (usually an internal location proxied to an SSO service)
// decides: a 2xx lets the request in, 401 and 403 are the answer (a 401 with the
// subrequest's WWW-Authenticate), anything else is 500. auth_request_set copies
// values of the subrequest's response ($upstream_http_*, $sent_http_*,
// $upstream_status) into variables of the request.
//
// The subrequest is the core's (httpcore.Request.StartSubrequest): the parent's
// method and fields, no request body (as nginx, whose examples pair the location
// with proxy_pass_request_body off and an empty Content-Length), its response body
// dropped. Where it differs from nginx: the subrequest's response body is read to
// its end before the request goes on (nginx stops at the head), so the upstream
// connection can be kept alive; auth_request_set values are taken when the
// subrequest's head is sent; a variable that auth_request_set declares can be
// named only by directives after it.
package authrequest

import (
	"strconv"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module declares auth_request and auth_request_set.
var Module = &conf.Module{
	Name:       "auth_request",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP: func(parent, child any) error {
		c, p := child.(*LocConf), parent.(*LocConf)
		if !c.uriSet {
			c.URI, c.uriSet = p.URI, p.uriSet
		}
		if !c.varsSet {
			c.Vars, c.varsSet = p.Vars, p.varsSet
		}
		return nil
	},
	Ctx: &httpcore.Hooks{Init: initModule, Key: key},
}

var key = httpcore.NewKey()

// self is Module, for the handler (Module's own initialiser cannot name it).
var self *conf.Module

func init() { self = Module }

const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "auth_request", Contexts: hsl, Args: conf.Args1, Set: setURI,
			Syntax: "auth_request uri | off;", Default: "off",
			Doc: "Asks a subrequest to uri whether the request may go on: a 2xx lets it in, 401 (with the subrequest's WWW-Authenticate) and 403 are answered, any other status is 500. The subrequest has the request's method and fields, no body; its response body is dropped."},
		{Name: "auth_request_set", Contexts: hsl, Args: conf.Args2, Multi: true, Set: setVar,
			Syntax: "auth_request_set $variable value;",
			Doc:    "Once the subrequest answered, sets $variable to value evaluated for the subrequest ($upstream_http_NAME, $sent_http_NAME, $upstream_status). A level that sets any replaces the inherited ones; the variable is known to the directives after it."},
	}
}

// LocConf is the module's configuration at one level, after inheritance.
type LocConf struct {
	URI     []byte // nil: off
	Vars    []SetVar
	uriSet  bool
	varsSet bool
}

// SetVar is one auth_request_set.
type SetVar struct {
	Var   *httpcore.Declared
	Value *httpcore.Template
}

func setURI(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	v := s.Args[0].Value
	lc.uriSet = true
	if v == "off" {
		lc.URI = nil
		return nil
	}
	if !strings.HasPrefix(v, "/") {
		return s.InvalidValue(s.Args[0], "the URI must start with \"/\"")
	}
	lc.URI = []byte(v)
	return nil
}

func setVar(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	name := s.Args[0].Value
	if len(name) < 2 || name[0] != '$' {
		return s.InvalidValue(s.Args[0], "")
	}
	vars, err := httpcore.ConfigVariables(c)
	if err != nil {
		return s.Errorf("%s", err.Error())
	}
	d, err := vars.Declare(name[1:])
	if err != nil {
		return s.Errorf("%s", err.Error())
	}
	t, err := httpcore.CompileTemplate(c, s.Args[1].Value)
	if err != nil {
		return s.InvalidValue(s.Args[1], err.Error())
	}
	if !lc.varsSet {
		lc.Vars, lc.varsSet = nil, true
	}
	lc.Vars = append(lc.Vars, SetVar{Var: d, Value: t})
	return nil
}

// initModule adds the handler when some level has auth_request.
func initModule(s *httpcore.Setup) error {
	used := false
	httpcore.Walk(s.Config, self, func(lc any) { used = used || lc.(*LocConf).URI != nil })
	if !used {
		return nil
	}
	return s.AddHandler(httpcore.AccessPhase, handle)
}

// check is a request's auth_request, kept in its context and reused by the
// requests its state serves. While the subrequest runs it is the request's
// Pending, so that the core tells it when the request goes away.
type check struct {
	r       *httpcore.Request
	lc      *LocConf
	sub     *httpcore.Request
	state   checkState
	status  int
	head    bool   // the subrequest's head was seen
	www     []byte // its WWW-Authenticate
	wwwName []byte
	hasWWW  bool
	vals    [][]byte // auth_request_set values, in lc.Vars' order
	hooks   httpcore.SubrequestHooks
	pending bool // the handler returned Again: done goes on with the phases
}

type checkState uint8

const (
	idle    checkState = iota
	running            // the subrequest runs
	done               // it answered: the handler, called again, decides
)

// handle is ngx_http_auth_request_handler.
func handle(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || lc.URI == nil {
		return httpcore.Declined
	}
	ck, _ := r.Ctx(key).(*check)
	if ck == nil {
		ck = &check{}
		ck.hooks = httpcore.SubrequestHooks{Header: ck.header, Done: ck.done}
		r.SetCtx(key, ck)
	}
	switch ck.state {
	case running:
		return httpcore.Again
	case done:
		ck.state = idle
		return ck.decide()
	}
	ck.r, ck.lc, ck.state, ck.status, ck.head, ck.hasWWW, ck.pending = r, lc, running, 0, false, false, false
	ck.sub = r.StartSubrequest(lc.URI, ck.hooks)
	if ck.state == done { // answered at once (a return, a missing location)
		ck.state, ck.sub = idle, nil
		return ck.decide()
	}
	ck.pending = true
	r.SetPending(ck)
	return httpcore.Again
}

// header takes what the parent needs from the subrequest's response head.
func (ck *check) header(sr *httpcore.Request) {
	ck.head, ck.status = true, sr.Status()
	if name, v, ok := sr.Header().Field("WWW-Authenticate"); ok {
		// The field as the subrequest had it, its name's case included (nginx
		// copies the header element).
		ck.wwwName = append(ck.wwwName[:0], name...)
		ck.www, ck.hasWWW = append(ck.www[:0], v...), true
	}
	for len(ck.vals) < len(ck.lc.Vars) {
		ck.vals = append(ck.vals, nil)
	}
	for i := range ck.lc.Vars {
		ck.vals[i] = ck.lc.Vars[i].Value.Append(ck.vals[i][:0], sr)
	}
}

// done: the subrequest ended; the parent's access phase goes on.
func (ck *check) done(status int) {
	if !ck.head {
		ck.status = status
	}
	ck.state, ck.sub = done, nil
	if ck.pending {
		ck.pending = false
		ck.r.SetPending(nil)
		ck.r.RunPhases()
	}
}

// decide sets the auth_request_set variables and answers as nginx.
func (ck *check) decide() httpcore.Status {
	r := ck.r
	for i := range ck.lc.Vars {
		var v []byte
		if ck.head {
			v = ck.vals[i]
		}
		r.SetVariable(ck.lc.Vars[i].Var, v)
	}
	switch st := ck.status; {
	case st == 403:
		return 403
	case st == 401:
		if ck.hasWWW {
			r.Carry(ck.wwwName, ck.www)
		}
		return 401
	case st >= 200 && st < 300:
		return httpcore.OK
	default:
		r.Log().Error("auth request unexpected status: "+strconv.Itoa(st), "client", r.RemoteAddr().String())
		return 500
	}
}

// The httpcore.Pending side while the subrequest runs: the request waits in the
// access phase, its body unread; only its end matters.

func (ck *check) BodyData([]byte)   {}
func (ck *check) BodyRead()         {}
func (ck *check) BodyEnd()          {}
func (ck *check) ClientBlocked()    {}
func (ck *check) ClientWritable()   {}
func (ck *check) TunnelData([]byte) {}
func (ck *check) ClientGone() bool  { return false }

// Abort: the request went away; its subrequest is canceled.
func (ck *check) Abort() {
	if ck.state == running && ck.sub != nil {
		ck.sub.CancelSubrequest()
	}
	ck.state, ck.sub, ck.pending = idle, nil, false
}
