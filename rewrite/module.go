package rewrite

import (
	"strconv"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module declares the rewrite directives. Each level keeps its own: nginx's
// rewrite directives are not inherited, a server's run in the server rewrite phase,
// a location's in the location's rewrite phase.
var Module = &conf.Module{
	Name:       "rewrite",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	Ctx:        &httpcore.Hooks{Init: initModule, NewLoop: newLoop, Key: key},
}

// self is Module, for the handlers (Module's own initialiser cannot name them).
var self *conf.Module

func init() { self = Module }

var key = httpcore.NewKey()

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "return", Contexts: conf.ServerCtx | conf.LocationCtx, Args: conf.Args1 | conf.Args2, Set: setReturn,
			Syntax: "return code [text] | code URL | URL;",
			Doc:    "Answers at once: a status with a body text, a redirect (301 302 303 307 308) to a URL, or 302 to a URL alone. Variables allowed."},
	}
}

// LocConf holds a level's rewrite directives (not inherited).
type LocConf struct {
	Return *Return
}

// Return is a return directive.
type Return struct {
	Code int
	Text *httpcore.Template // body text, or the redirect URL for 301/302/303/307/308; nil for none
}

func setReturn(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
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
	lc.Return = r
	return nil
}

// initModule puts the handler in the rewrite phases whose levels have a return:
// without one the module costs a request nothing.
func initModule(s *httpcore.Setup) error {
	var servers, locations bool
	if s.Config.HTTP != nil {
		for _, srv := range s.Config.HTTP.Servers {
			servers = servers || srv.Conf(self).(*LocConf).Return != nil
		}
	}
	httpcore.Walk(s.Config, self, func(lc any) { locations = locations || lc.(*LocConf).Return != nil })
	if servers {
		if err := s.AddHandler(httpcore.ServerRewritePhase, handler); err != nil {
			return err
		}
	}
	if locations {
		return s.AddHandler(httpcore.RewritePhase, handler)
	}
	return nil
}

// loopState is the module's state in one loop.
type loopState struct {
	text []byte // a return's text as evaluated; reused
}

func newLoop(*httpcore.Worker) httpcore.LoopState { return &loopState{text: make([]byte, 0, 1<<10)} }

func (*loopState) Reload(*httpcore.Snapshot) {}

// handler runs the level's return, if it has one.
func handler(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || lc.Return == nil {
		return httpcore.Declined
	}
	ret := lc.Return
	code := ret.Code
	if code < 400 || ret.Text != nil {
		// nginx's return answers through ngx_http_send_response, which first drops
		// the request body: an invalid chunked body already here answers 400.
		if !r.DiscardRequestBody() {
			return 400
		}
	}
	if ret.Text == nil {
		if code >= 400 {
			return httpcore.Status(code) // nginx's special response, as for its own errors
		}
		r.SendPage(code, nil)
		return httpcore.Done
	}
	st := r.Worker().State(key).(*loopState)
	text := ret.Text.Append(st.text[:0], r)
	st.text = text[:0] // keep a grown buffer; the answer copies text before it returns
	if isRedirect(code) {
		r.SendPage(code, text)
		return httpcore.Done
	}
	// A status with a text is sent as it is: error_page does not apply (nginx sends
	// it with ngx_http_send_response, not as a special response). Its type is
	// text/plain unless an X-Accel-Redirect response passed one on.
	r.SendText(code, r.CarriedType(), text)
	return httpcore.Done
}

// isRedirect is the codes return treats as "code URL".
func isRedirect(code int) bool {
	return code == 301 || code == 302 || code == 303 || code == 307 || code == 308
}
