package accesslog

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module declares nginx's ngx_http_log_module directives: log_format, access_log,
// open_log_file_cache and log_subrequest.
var Module = &conf.Module{
	Name:       "http_log",
	Directives: directives(),
	NewMain:    func() any { return &MainConf{formats: map[string]*Format{}} },
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP:  func(parent, child any) error { child.(*LocConf).inherit(parent.(*LocConf)); return nil },
	Ctx:        &httpcore.Hooks{Init: initModule, NewLoop: newLoop, Key: key},
}

// self is Module, for the handlers (Module's own initialiser cannot name them).
var self *conf.Module

func init() { self = Module }

var key = httpcore.NewKey()

const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx

// defaultPath is nginx's default access log, relative to the prefix.
const defaultPath = "logs/access.log"

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "log_format", Contexts: conf.HTTPCtx, Args: conf.Args2More, Multi: true, Set: setLogFormat,
			Syntax: "log_format name [escape=default|json|none] string ...;", Default: "combined \"...\"",
			Doc: "Names a line format for access_log: text with variables; values are escaped as nginx does (default: \\\", \\\\, control and non-ASCII bytes as \\xHH and \"-\" for a missing value; json: JSON string escapes; none). combined is predefined."},
		{Name: "access_log", Contexts: hsl, Args: conf.Args1More, Multi: true, Set: setAccessLog,
			Syntax: "access_log path [format [buffer=size] [gzip[=level]] [flush=time] [if=condition]] | off;", Default: "logs/access.log combined",
			Doc: "Writes a line per request, in the location the request ended in: to a file (path relative to the prefix, variables allowed, created 0644), or syslog:server=address[,facility=][,severity=][,tag=][,nohostname] (UDP or unix:path). A level with access_log replaces all it would inherit. Each loop formats into its own buffer and hands whole lines (at the end of each event batch; with buffer=, when full or after flush=) to a writer thread of its NUMA domain, so a slow disk stalls no loop: when the writer falls behind, lines are dropped and counted. gzip writes gzip members (buffer 64k by default). if= skips the line when the condition is empty or \"0\"."},
		{Name: "open_log_file_cache", Contexts: hsl, Args: conf.Args1 | conf.Args2 | conf.Args3 | conf.Args4, Set: setOpenLogFileCache,
			Syntax: "open_log_file_cache max=N [inactive=time] [min_uses=N] [valid=time] | off;", Default: "off",
			Doc: "Keeps the descriptors of the files of access logs whose paths have variables open between lines (per NUMA domain's writer; nginx's is per worker): at most max, closed when unused for inactive (10s), kept once used min_uses (1) times within inactive, their names checked again every valid (60s)."},
		{Name: "log_subrequest", Contexts: hsl, Args: conf.Flag, Set: setLogSubrequest,
			Syntax: "log_subrequest on | off;", Default: "off",
			Doc: "Only off: subrequests (auth_request's) are not logged; on is refused, numaproxy cannot log them yet."},
	}
}

// MainConf holds the formats, by name.
type MainConf struct {
	formats map[string]*Format
}

// LocConf is a level's access logs after inheritance.
type LocConf struct {
	Logs  []*Log
	Off   bool
	Cache *CacheConf // open_log_file_cache; nil: off

	set, cacheSet bool
}

// Log is one access_log.
type Log struct {
	Format *Format // nil: combined, bound in Init (the default log)
	Path   string  // a file's path as written ("" for syslog)
	path   *httpcore.Template
	static bool // the path has no variables
	peer   *syslogPeer
	Buffer int
	Gzip   int // 0: none, else the level
	Flush  time.Duration
	If     *httpcore.Template
	Pos    conf.Pos

	prefix string
	cache  *CacheConf
	sink   *sink
}

func (c *LocConf) inherit(p *LocConf) {
	if !c.cacheSet {
		c.Cache, c.cacheSet = p.Cache, p.cacheSet
	}
	if c.set {
		return
	}
	c.Logs, c.Off, c.set = p.Logs, p.Off, p.set
	if !c.set {
		// nginx's default, where no level above has access_log.
		c.Logs, c.set = []*Log{{Path: defaultPath, static: true}}, true
	}
}

// ensureCombined defines the predefined combined format.
func ensureCombined(c *conf.Cursor) (*MainConf, error) {
	mc := c.MainConf().(*MainConf)
	if mc.formats["combined"] == nil {
		vars, err := httpcore.ConfigVariables(c)
		if err != nil {
			return nil, err
		}
		f, err := compileFormat(vars, "combined", EscapeDefault, []string{combinedFormat}, c.Pos())
		if err != nil {
			return nil, err
		}
		mc.formats["combined"] = f
	}
	return mc, nil
}

func setLogFormat(c *conf.Cursor, s *conf.Stmt) error {
	mc, err := ensureCombined(c)
	if err != nil {
		return err
	}
	name := s.Args[0].Value
	if mc.formats[name] != nil {
		return s.Errorf("duplicate \"log_format\" name %q", name)
	}
	args := s.Args[1:]
	esc := EscapeDefault
	if v, ok := strings.CutPrefix(args[0].Value, "escape="); ok {
		switch v {
		case "default":
		case "json":
			esc = EscapeJSON
		case "none":
			esc = EscapeNone
		default:
			return s.Errorf("unknown log format escaping %q", v)
		}
		args = args[1:]
		if len(args) == 0 {
			return s.Errorf("invalid number of arguments in \"log_format\" directive")
		}
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = a.Value
	}
	vars, err := httpcore.ConfigVariables(c)
	if err != nil {
		return err
	}
	f, err := compileFormat(vars, name, esc, parts, s.Pos)
	if err != nil {
		return s.Errorf("%s", err.Error())
	}
	mc.formats[name] = f
	return nil
}

func setAccessLog(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	if !lc.set {
		lc.Logs, lc.set = nil, true
	}
	first := s.Args[0].Value
	if first == "off" {
		if len(s.Args) > 1 {
			return s.InvalidValue(s.Args[1], "")
		}
		lc.Off = true
		return nil
	}
	if lc.Off {
		return s.Errorf("\"access_log off\" and another access_log at the same level")
	}
	mc, err := ensureCombined(c)
	if err != nil {
		return err
	}
	lg := &Log{Pos: s.Pos, Path: first, prefix: c.Config.Prefix}
	if params, ok := strings.CutPrefix(first, "syslog:"); ok {
		if lg.peer, err = parseSyslog(params); err != nil {
			return s.InvalidValue(s.Args[0], err.Error())
		}
		lg.Path = ""
	} else {
		t, err := httpcore.CompileTemplate(c, first)
		if err != nil {
			return s.InvalidValue(s.Args[0], err.Error())
		}
		lg.path, lg.static = t, t.Static()
		if lg.static {
			lg.Path = c.Path(first)
		}
	}
	name := "combined"
	if len(s.Args) >= 2 {
		name = s.Args[1].Value
	}
	if lg.Format = mc.formats[name]; lg.Format == nil {
		return s.Errorf("unknown log format %q", name)
	}
	gzipSet := false
	for _, a := range s.Args[min(2, len(s.Args)):] {
		v := a.Value
		switch {
		case strings.HasPrefix(v, "buffer="):
			n, err := conf.ParseSize(v[len("buffer="):])
			if err != nil || n <= 0 {
				return s.InvalidValue(a, "invalid buffer size")
			}
			lg.Buffer = int(n)
		case strings.HasPrefix(v, "flush="):
			d, err := conf.ParseTime(v[len("flush="):])
			if err != nil || d <= 0 {
				return s.InvalidValue(a, "invalid flush time")
			}
			lg.Flush = d
		case v == "gzip" || strings.HasPrefix(v, "gzip="):
			lg.Gzip, gzipSet = 1, true
			if lv, ok := strings.CutPrefix(v, "gzip="); ok {
				n, err := strconv.Atoi(lv)
				if err != nil || n < 1 || n > 9 {
					return s.InvalidValue(a, "invalid compression level")
				}
				lg.Gzip = n
			}
		case strings.HasPrefix(v, "if="):
			t, err := httpcore.CompileTemplate(c, v[len("if="):])
			if err != nil {
				return s.InvalidValue(a, err.Error())
			}
			lg.If = t
		default:
			return s.InvalidValue(a, "")
		}
	}
	if lg.Flush > 0 && lg.Buffer == 0 && !gzipSet {
		return s.Errorf("no buffer is defined for access_log %q", first)
	}
	if lg.Buffer > 0 || gzipSet {
		if lg.peer != nil {
			return s.Errorf("logs to syslog cannot be buffered")
		}
		if !lg.static {
			return s.Errorf("buffered logs cannot have variables in name")
		}
		if lg.Buffer == 0 {
			lg.Buffer = 64 << 10 // nginx's default with gzip
		}
	}
	lc.Logs = append(lc.Logs, lg)
	return nil
}

func setOpenLogFileCache(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	lc.cacheSet = true
	if s.Args[0].Value == "off" {
		if len(s.Args) > 1 {
			return s.InvalidValue(s.Args[1], "")
		}
		lc.Cache = nil
		return nil
	}
	cc := &CacheConf{Inactive: 10 * time.Second, MinUses: 1, Valid: 60 * time.Second}
	for _, a := range s.Args {
		k, v, _ := strings.Cut(a.Value, "=")
		var err error
		switch k {
		case "max":
			cc.Max, err = strconv.Atoi(v)
			if err == nil && cc.Max <= 0 {
				err = fmt.Errorf("not positive")
			}
		case "min_uses":
			cc.MinUses, err = strconv.Atoi(v)
			if err == nil && cc.MinUses <= 0 {
				err = fmt.Errorf("not positive")
			}
		case "inactive":
			cc.Inactive, err = conf.ParseTime(v)
		case "valid":
			cc.Valid, err = conf.ParseTime(v)
		default:
			err = fmt.Errorf("unknown")
		}
		if err != nil {
			return s.InvalidValue(a, "")
		}
	}
	if cc.Max == 0 {
		return s.Errorf("\"max\" parameter is required in \"open_log_file_cache\" directive")
	}
	lc.Cache = cc
	return nil
}

func setLogSubrequest(c *conf.Cursor, s *conf.Stmt) error {
	if s.Args[0].Value == "on" {
		return s.InvalidValue(s.Args[0], "subrequests are not logged")
	}
	return nil
}

// initModule opens the files of the configuration's logs (a file already open for
// the running configuration is kept, with what its loops have buffered) and adds
// the log phase handler when some level logs.
func initModule(s *httpcore.Setup) error {
	gen := nextGeneration()
	var combined *Format
	var firstErr error
	used := false
	httpcore.Walk(s.Config, self, func(v any) {
		lc := v.(*LocConf)
		if lc.Off || firstErr != nil {
			return
		}
		if lc.Cache != nil {
			for _, lg := range lc.Logs {
				if !lg.static && lg.peer == nil && lg.cache == nil {
					lg.cache = lc.Cache
				}
			}
		}
		for _, lg := range lc.Logs {
			used = true
			if lg.Format == nil {
				if combined == nil {
					f, err := compileFormat(s.Variables(), "combined", EscapeDefault, []string{combinedFormat}, conf.Pos{})
					if err != nil {
						firstErr = err
						return
					}
					combined = f
				}
				lg.Format = combined
				lg.Path = filepath.Join(s.Config.Prefix, lg.Path)
			}
			if err := lg.resolve(gen); err != nil {
				firstErr = &conf.Error{Pos: lg.Pos, Msg: err.Error()}
				return
			}
		}
	})
	if firstErr != nil {
		return firstErr
	}
	if !used {
		return nil
	}
	return s.AddHandler(httpcore.LogPhase, logHandler)
}

// resolve finds the log's sink for configuration generation gen.
func (lg *Log) resolve(gen int64) error {
	switch {
	case lg.peer != nil:
		lg.sink = otherSink(lg.peer.key(), func() *sink { return &sink{kind: sinkSyslog, peer: lg.peer} }, gen)
	case lg.static:
		s, err := fileSink(lg.Path, lg.Buffer, lg.Gzip, gen)
		if err != nil {
			return err
		}
		lg.sink = s
	default:
		k := "dynamic:"
		if c := lg.cache; c != nil {
			k = fmt.Sprintf("dynamic:%d:%d:%d:%d:", c.Max, c.Inactive, c.MinUses, c.Valid)
		}
		cc := lg.cache
		lg.sink = otherSink(k, func() *sink { return &sink{kind: sinkDynamic, cache: cc} }, gen)
	}
	return nil
}
