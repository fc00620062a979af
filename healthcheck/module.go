// Package healthcheck is NGINX Plus's ngx_http_upstream_hc_module: health_check in
// a location probes the servers of the upstream group its proxy_pass names, and
// match blocks say what a passing response is. A server whose checks fail is
// skipped by every balancing method until it passes again.
//
// One loop of the process runs all the probes of a configuration (the first loop
// that starts or reloads claims them), each probe a non-blocking connection on
// that loop; a thousand loops send one probe per server and interval, not a
// thousand. The verdict is an atomic in the peer (upstream.Health) that every
// loop reads when it picks a server: no lock, no message. A reload stops the old
// configuration's probes and starts the new one's; the verdicts carry over for
// servers of the same group and address (except with mandatory without
// persistent, where a server waits for its first check as NGINX Plus's).
package healthcheck

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/pcre"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/upstream"
)

// Module declares health_check and match.
var Module = &conf.Module{
	Name: "healthcheck",
	Directives: []conf.Directive{
		{Name: "health_check", Contexts: conf.LocationCtx, Args: conf.Args0 | conf.Args1More, Multi: true, Set: setHealthCheck,
			Syntax: "health_check [interval=time] [jitter=time] [fails=number] [passes=number] [uri=uri] [match=name] [port=number] [mandatory [persistent]];",
			Doc:    "NGINX Plus's active health checks of the servers of the group this location's proxy_pass names (the group needs zone): every interval (default 5s, plus up to jitter at random) each server is sent \"GET uri HTTP/1.0\" (uri default /, Host the group's name) on its address or port=, within the location's proxy_connect_timeout and proxy_read_timeout. A response that fails match (default: a 2xx or 3xx status), an error or a timeout counts as a failure; after fails consecutive failures (default 1) the server is unhealthy and skipped by every balancing method, after passes consecutive passes (default 1) it is healthy again, with slow_start if its server has one. mandatory: a new server is \"checking\" (skipped) until its first check passes; persistent: after a reload a server keeps the state it had. Without mandatory a new server is healthy until a check fails, and after a reload a server keeps its state. The state changes are logged (\"peer is unhealthy while ...\") and shown in the metrics. One loop of the process sends all the probes. type=grpc is refused."},
		{Name: "match", Contexts: conf.HTTPCtx, Args: conf.Args1, Block: true, Multi: true, Set: setMatch,
			Syntax: "match name { ... }",
			Doc:    "The tests a health check's response must pass (NGINX Plus): status 200; status ! 500; status 200 204; status 200-399; status ! 400-599; header Name = value; header Name != value; header Name ~ regex; header Name !~ regex; header Name; header ! Name; body ~ regex; body !~ regex (the first 256k of the body). Every test must pass."},
	},
	NewMain: func() any { return &mainConf{matches: map[string]*Match{}} },
	Check:   check,
	Ctx:     &httpcore.Hooks{Init: initModule, NewLoop: newLoop, Key: key},
}

var key = httpcore.NewKey()

// self is Module, for Init (Module's own initialiser cannot name it).
var self *conf.Module

func init() { self = Module }

type mainConf struct {
	matches map[string]*Match
	checks  []*Check
}

// Check is one health_check directive.
type Check struct {
	Pos        conf.Pos
	Interval   time.Duration
	Jitter     time.Duration
	Fails      int
	Passes     int
	URI        string
	MatchName  string
	Port       uint16
	Mandatory  bool
	Persistent bool

	loc   *conf.Location
	match *Match
	group *upstream.Group
	// from the location's proxy settings
	connectTimeout, readTimeout time.Duration
}

// Match is a match block.
type Match struct {
	Name    string
	Pos     conf.Pos
	status  []statusTest
	headers []headerTest
	bodies  []bodyTest
}

type statusTest struct {
	not    bool
	ranges [][2]int
}

type headerTest struct {
	name    string
	op      string // "=", "!=", "~", "!~", "" (present), "!" (absent)
	value   string
	re      *pcre.Regexp
	present bool
}

type bodyTest struct {
	not bool
	re  *pcre.Regexp
}

func setHealthCheck(c *conf.Cursor, s *conf.Stmt) error {
	m := c.MainConf().(*mainConf)
	hc := &Check{Pos: s.Pos, Interval: 5 * time.Second, Fails: 1, Passes: 1, URI: "/", loc: c.Location}
	for _, a := range s.Args {
		k, v, hasVal := strings.Cut(a.Value, "=")
		var err error
		switch {
		case hasVal && k == "interval":
			hc.Interval, err = conf.ParseTime(v)
			if err == nil && hc.Interval <= 0 {
				err = fmt.Errorf("zero")
			}
		case hasVal && k == "jitter":
			hc.Jitter, err = conf.ParseTime(v)
		case hasVal && (k == "fails" || k == "passes"):
			var n int
			n, err = conf.ParseNumber(v)
			if err == nil && n < 1 {
				err = fmt.Errorf("zero")
			}
			if k == "fails" {
				hc.Fails = n
			} else {
				hc.Passes = n
			}
		case hasVal && k == "uri":
			if v == "" || v[0] != '/' {
				err = fmt.Errorf("not a URI")
			}
			hc.URI = v
		case hasVal && k == "match":
			hc.MatchName = v
		case hasVal && k == "port":
			var n int
			n, err = strconv.Atoi(v)
			if err == nil && (n < 1 || n > 65535) {
				err = fmt.Errorf("out of range")
			}
			hc.Port = uint16(n)
		case !hasVal && k == "mandatory":
			hc.Mandatory = true
		case !hasVal && k == "persistent":
			hc.Persistent = true
		case hasVal && (k == "type" || k == "grpc_service" || k == "grpc_status" || k == "keepalive_time"):
			return &conf.Error{Pos: a.Pos, Msg: fmt.Sprintf("health_check parameter %q is not supported by numaproxy", a.Value)}
		default:
			return &conf.Error{Pos: a.Pos, Msg: fmt.Sprintf("invalid parameter %q", a.Value)}
		}
		if err != nil {
			return s.InvalidValue(a, "")
		}
	}
	if hc.Persistent && !hc.Mandatory {
		return s.Errorf("\"persistent\" requires \"mandatory\"")
	}
	m.checks = append(m.checks, hc)
	return nil
}

func setMatch(c *conf.Cursor, s *conf.Stmt) error {
	m := c.MainConf().(*mainConf)
	name := s.Args[0].Value
	if m.matches[name] != nil {
		return s.Errorf("duplicate match %q", name)
	}
	mt := &Match{Name: name, Pos: s.Pos}
	m.matches[name] = mt
	return c.ParseRawBlock(func(c *conf.Cursor, s *conf.Stmt) error {
		switch s.Name {
		case "status":
			return mt.addStatus(s)
		case "header":
			return mt.addHeader(s)
		case "body":
			return mt.addBody(s)
		case "require":
			return s.Errorf("\"require\" in match is not supported by numaproxy")
		}
		return s.Errorf("unknown directive %q in match", s.Name)
	})
}

func (mt *Match) addStatus(s *conf.Stmt) error {
	t := statusTest{}
	args := s.Args
	if len(args) > 0 && args[0].Value == "!" {
		t.not, args = true, args[1:]
	}
	if len(args) == 0 {
		return s.Errorf("invalid number of arguments in \"status\"")
	}
	for _, a := range args {
		lo, hi, isRange := strings.Cut(a.Value, "-")
		l, err1 := strconv.Atoi(lo)
		h := l
		var err2 error
		if isRange {
			h, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || l < 100 || h > 599 || l > h {
			return s.InvalidValue(a, "")
		}
		t.ranges = append(t.ranges, [2]int{l, h})
	}
	mt.status = append(mt.status, t)
	return nil
}

func (mt *Match) addHeader(s *conf.Stmt) error {
	a := s.Args
	t := headerTest{}
	switch {
	case len(a) == 1:
		t.name, t.op = a[0].Value, ""
	case len(a) == 2 && a[0].Value == "!":
		t.name, t.op = a[1].Value, "!"
	case len(a) == 3 && (a[1].Value == "=" || a[1].Value == "!=" || a[1].Value == "~" || a[1].Value == "!~"):
		t.name, t.op, t.value = a[0].Value, a[1].Value, a[2].Value
		if t.op == "~" || t.op == "!~" {
			re, err := pcre.Compile(t.value, false)
			if err != nil {
				return s.InvalidValue(a[2], err.Error())
			}
			t.re = re
		}
	default:
		return s.Errorf("invalid \"header\" test")
	}
	mt.headers = append(mt.headers, t)
	return nil
}

func (mt *Match) addBody(s *conf.Stmt) error {
	a := s.Args
	if len(a) != 2 || (a[0].Value != "~" && a[0].Value != "!~") {
		return s.Errorf("invalid \"body\" test")
	}
	re, err := pcre.Compile(a[1].Value, false)
	if err != nil {
		return s.InvalidValue(a[1], err.Error())
	}
	mt.bodies = append(mt.bodies, bodyTest{not: a[0].Value == "!~", re: re})
	return nil
}

// check ties each health_check to its location's group and match, with nginx's
// errors; the proxy's check (earlier in the registry) has found the groups.
func check(cfg *conf.Config, self *conf.Module) error {
	m := cfg.MainConf(self).(*mainConf)
	for _, hc := range m.checks {
		lc, _ := hc.loc.Conf(proxy.Module).(*proxy.LocConf)
		if lc == nil || lc.Pass == nil || lc.Pass.Group == nil {
			return &conf.Error{Pos: hc.Pos, Msg: "\"health_check\" requires \"proxy_pass\" to an upstream group in the same location"}
		}
		g := lc.Pass.Group
		if g.Implicit || g.Zone == "" {
			return &conf.Error{Pos: hc.Pos, Msg: fmt.Sprintf("health check requires upstream %q to be in shared memory", g.Name)}
		}
		if len(g.Resolve) > 0 {
			return &conf.Error{Pos: hc.Pos, Msg: fmt.Sprintf("health checks of servers with resolve (upstream %q) are not supported by numaproxy", g.Name)}
		}
		if hc.MatchName != "" {
			if hc.match = m.matches[hc.MatchName]; hc.match == nil {
				return &conf.Error{Pos: hc.Pos, Msg: fmt.Sprintf("match %q not found", hc.MatchName)}
			}
		}
		hc.group = g
		hc.connectTimeout, hc.readTimeout = lc.ConnectTimeout, lc.ReadTimeout
	}
	return nil
}
