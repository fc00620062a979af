// Package access is nginx's ngx_http_access_module: allow and deny by client
// address ($remote_addr, after realip) in the access phase, the first rule that
// matches deciding, 403 for a deny.
//
// As nginx, a level keeps three lists, one per address family (IPv4, IPv6,
// unix-domain), in the order written; "all" goes into each. An IPv4-mapped IPv6
// client is checked against the IPv4 rules when there are any. A level with any
// rule replaces all it would inherit. "unix:" rules are accepted and never match
// here: numaproxy has no unix-domain listeners.
package access

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/cidr"
)

// Module declares allow and deny.
var Module = &conf.Module{
	Name:       "access",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP: func(parent, child any) error {
		if c := child.(*LocConf); !c.set {
			p := parent.(*LocConf)
			c.v4, c.v6, c.unix, c.set = p.v4, p.v6, p.unix, p.set
		}
		return nil
	},
	Ctx: &httpcore.Hooks{Init: initModule},
}

// self is Module, for the handler (Module's own initialiser cannot name it).
var self *conf.Module

func init() { self = Module }

const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "allow", Contexts: hsl | conf.LmtCtx, Args: conf.Args1, Multi: true, Set: setRule(false),
			Syntax: "allow address | CIDR | unix: | all;",
			Doc:    "Lets clients from the address or network in; the rules of a level are checked in order and the first that matches decides. A level with any allow or deny replaces all inherited ones."},
		{Name: "deny", Contexts: hsl | conf.LmtCtx, Args: conf.Args1, Multi: true, Set: setRule(true),
			Syntax: "deny address | CIDR | unix: | all;",
			Doc:    "Answers 403 to clients from the address or network, when no rule before it matched."},
	}
}

// rule is one allow or deny.
type rule struct {
	net  netip.Prefix // unused in the unix list
	all  bool
	deny bool
}

// LocConf is the module's configuration at one level, after inheritance.
type LocConf struct {
	v4, v6, unix []rule
	set          bool // this level (or the one it inherited from) has rules
}

func setRule(deny bool) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		lc := c.HTTPConf().(*LocConf)
		lc.set = true
		v := s.Args[0].Value
		switch v {
		case "all":
			r := rule{all: true, deny: deny}
			lc.v4, lc.v6, lc.unix = append(lc.v4, r), append(lc.v6, r), append(lc.unix, r)
			return nil
		case "unix:":
			lc.unix = append(lc.unix, rule{all: true, deny: deny})
			return nil
		}
		p, masked, err := cidr.Parse(v)
		if err != nil {
			return s.Errorf("invalid parameter %q", v)
		}
		if masked {
			c.Warn(s.Args[0].Pos, "low address bits of %s are meaningless", v)
		}
		if p.Addr().Is4() {
			lc.v4 = append(lc.v4, rule{net: p, deny: deny})
		} else {
			lc.v6 = append(lc.v6, rule{net: p, deny: deny})
		}
		return nil
	}
}

// initModule adds the access handler when some level has rules.
func initModule(s *httpcore.Setup) error {
	used := false
	httpcore.Walk(s.Config, self, func(lc any) { used = used || lc.(*LocConf).set })
	if !used {
		return nil
	}
	return s.AddHandler(httpcore.AccessPhase, handle)
}

// handle is ngx_http_access_handler: the rules of the client's family, first match.
func handle(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || !lc.set {
		return httpcore.Declined
	}
	a := r.RemoteAddr().Addr()
	var rules []rule
	switch {
	case !a.IsValid():
		rules = lc.unix
	case a.Is4():
		rules = lc.v4
	case a.Is4In6() && lc.v4 != nil:
		rules, a = lc.v4, a.Unmap()
	default:
		rules = lc.v6
	}
	for i := range rules {
		if rl := &rules[i]; rl.all || rl.net.Contains(a) {
			if !rl.deny {
				return httpcore.OK
			}
			if log := r.Log(); !r.CoreConf().SatisfyAny && log.Enabled(context.Background(), slog.LevelError) {
				log.Error("access forbidden by rule", "client", r.RemoteAddr().String())
			}
			return 403
		}
	}
	return httpcore.Declined
}
