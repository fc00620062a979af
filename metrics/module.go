package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/server"
)

// Module declares metrics, stub_status and status_zone, and the $connections_*
// variables.
var Module = &conf.Module{
	Name:       "metrics",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	Ctx:        &httpcore.Hooks{Variables: variables, Init: initModule, NewLoop: newLoop, Key: key},
}

// self is Module, for the handlers (Module's own initialiser cannot name them).
var self *conf.Module

func init() { self = Module }

var key = httpcore.NewKey()

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "metrics", Contexts: conf.LocationCtx, Args: conf.Args0, Set: setMetrics,
			Syntax: "metrics;",
			Doc:    "Serves the Prometheus metrics of every loop in the location (text format 0.0.4, or OpenMetrics when the scraper asks for it): requests, durations, connections, upstreams, TLS, reloads, buffer pools, BPF steering and NUMA locality, by domain. Its presence makes every request counted."},
		{Name: "stub_status", Contexts: conf.LocationCtx, Args: conf.Args0 | conf.Args1, Set: setStubStatus,
			Syntax: "stub_status;",
			Doc:    "Serves nginx's basic status page (active connections, accepts, handled, requests, reading, writing, waiting), summed over every loop. An argument, as nginx's old syntax, is ignored."},
		{Name: "status_zone", Contexts: conf.ServerCtx | conf.LocationCtx, Args: conf.Args1, Set: setStatusZone,
			Syntax: "status_zone zone;",
			Doc:    "Counts the requests of the server or location in the zone's own metrics (numaproxy_http_zone_*{zone=\"zone\"}), as NGINX Plus's status_zone; levels may share a zone. Not inherited."},
	}
}

// LocConf is a level's metrics directives; none is inherited.
type LocConf struct {
	Zone   *zone // status_zone
	serves bool  // the location serves metrics or the status page
}

// zone is a status_zone name with its process-wide index into the loops' figures.
type zone struct {
	name string
	id   int
}

// zones gives each zone name one index for the life of the process, so that a
// zone's figures carry over a reload; touched only while configurations load.
var zones struct {
	sync.Mutex
	ids   map[string]int
	names []string
}

func zoneID(name string) int {
	zones.Lock()
	defer zones.Unlock()
	if zones.ids == nil {
		zones.ids = map[string]int{}
	}
	id, ok := zones.ids[name]
	if !ok {
		id = len(zones.names)
		zones.ids[name] = id
		zones.names = append(zones.names, name)
	}
	return id
}

func zoneName(id int) string {
	zones.Lock()
	defer zones.Unlock()
	return zones.names[id]
}

func setMetrics(c *conf.Cursor, s *conf.Stmt) error {
	c.HTTPConf().(*LocConf).serves = true
	return httpcore.SetContentHandler(c, s, serveMetrics, false)
}

func setStubStatus(c *conf.Cursor, s *conf.Stmt) error {
	c.HTTPConf().(*LocConf).serves = true
	return httpcore.SetContentHandler(c, s, serveStubStatus, false)
}

func setStatusZone(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	if lc.Zone != nil {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	name := s.Args[0].Value
	if name == "" {
		return s.InvalidValue(s.Args[0], "")
	}
	lc.Zone = &zone{name: name, id: zoneID(name)}
	return nil
}

// initModule counts requests in the log phase when a location serves metrics or
// the status page, or a level has a status_zone; otherwise the module adds nothing
// to a request. It also asks the other modules for their figures.
func initModule(s *httpcore.Setup) error {
	var zoned, served bool
	httpcore.Walk(s.Config, self, func(a any) {
		lc := a.(*LocConf)
		zoned, served = zoned || lc.Zone != nil, served || lc.serves
	})
	if connVarsUsed.Load() {
		s.EnableStats() // the core's connection gauges
	}
	if !zoned && !served {
		return nil
	}
	s.EnableStats()
	if err := s.AddHandler(httpcore.PostReadPhase, sampleConnection); err != nil {
		return err
	}
	return s.AddHandler(httpcore.LogPhase, logRequest)
}

// source is the running server whose loops a scrape reads (Attach).
var source atomic.Pointer[server.Server]

// Attach tells the module which server's loops, pools and programs to report. The
// binary calls it once its server runs; without it a scrape reports the loop it
// runs on only.
func Attach(s *server.Server) { source.Store(s) }

// monitor is the current view of the attached server, or nil.
func monitor() *server.Monitor {
	if s := source.Load(); s != nil {
		return s.Monitor()
	}
	return nil
}

// connStats sums the client connection figures of every loop (or of w's alone
// without a server): atomic loads, no allocation.
func connStats(w *httpcore.Worker) httpcore.ConnStats {
	m := monitor()
	if m == nil {
		return w.ConnStats()
	}
	var sum httpcore.ConnStats
	for i := range m.Loops {
		sum = sum.Add(m.Loops[i].Worker.ConnStats())
	}
	return sum
}

// connVarsUsed: a template named a $connections_* variable, whose values need the
// core's connection gauges; from then on every configuration keeps them (a
// configuration read but refused may have set it: counting costs little).
var connVarsUsed atomic.Bool

func useConnVars() { connVarsUsed.Store(true) }

// variables are the stub status module's.
var variables = []httpcore.Variable{
	{Name: "connections_active", Compiled: useConnVars, Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return strconv.AppendInt(dst, connStats(r.Worker()).Active(), 10)
	}},
	{Name: "connections_reading", Compiled: useConnVars, Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		own, _ := r.CountedWhileLogged()
		return strconv.AppendInt(dst, connStats(r.Worker()).Reading-own, 10)
	}},
	{Name: "connections_writing", Compiled: useConnVars, Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		_, own := r.CountedWhileLogged()
		return strconv.AppendInt(dst, connStats(r.Worker()).Writing-own, 10)
	}},
	{Name: "connections_waiting", Compiled: useConnVars, Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return strconv.AppendInt(dst, connStats(r.Worker()).Waiting, 10)
	}},
}

// serveStubStatus answers nginx's status page, byte for byte its format
// (ngx_http_stub_status_handler).
func serveStubStatus(r *httpcore.Request) httpcore.Status {
	if m := string(r.Head().Method()); m != "GET" && m != "HEAD" {
		return 405
	}
	if !r.DiscardRequestBody() {
		return 400
	}
	s := connStats(r.Worker())
	st := r.Worker().State(key).(*loopState)
	b := append(st.text[:0], "Active connections: "...)
	b = strconv.AppendInt(b, s.Active(), 10)
	b = append(b, " \nserver accepts handled requests\n "...)
	b = strconv.AppendUint(b, s.Accepts, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, s.Accepts, 10) // handled: every accepted connection is
	b = append(b, ' ')
	b = strconv.AppendUint(b, s.Requests, 10)
	b = append(b, " \nReading: "...)
	b = strconv.AppendInt(b, s.Reading, 10)
	b = append(b, " Writing: "...)
	b = strconv.AppendInt(b, s.Writing, 10)
	b = append(b, " Waiting: "...)
	b = strconv.AppendInt(b, s.Waiting, 10)
	b = append(b, " \n"...)
	st.text = b[:0]
	r.SendText(200, textPlain, b)
	return httpcore.Done
}

var textPlain = []byte("text/plain")
