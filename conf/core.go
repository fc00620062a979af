package conf

import (
	"path/filepath"
	"strings"
)

// CoreModule declares the skeleton every configuration shares: the process-wide
// directives of the main context, include, and the events block. The http skeleton
// (http, server, listen, server_name, location) is in http.go.
var CoreModule = &Module{
	Name:       "core",
	Directives: concat(mainDirectives(), processDirectives(), httpDirectives(), hashTuningDirectives()),
}

func mainDirectives() []Directive {
	return []Directive{
		{Name: "include", Contexts: AnyCtx, Args: Args1, Multi: true, Set: setInclude,
			Syntax: "include file | mask;",
			Doc:    "Reads another file, or every file matching a glob, in place. Relative names resolve against the including file's folder, then the main file's."},
		{Name: "worker_processes", Contexts: MainCtx, Args: Args1, Set: setWorkerProcesses,
			Syntax: "worker_processes number | auto;", Default: "1",
			Doc: "Number of event loops. auto: one per CPU the process may run on (affinity mask and cgroup cpuset)."},
		{Name: "worker_rlimit_nofile", Contexts: MainCtx, Args: Args1, Set: setNumber(func(c *Cursor) *int { return &c.Config.Main.WorkerRlimitNofile }),
			Syntax: "worker_rlimit_nofile number;",
			Doc:    "Sets RLIMIT_NOFILE for the process at start."},
		{Name: "worker_shutdown_timeout", Contexts: MainCtx, Args: Args1, Set: setWorkerShutdownTimeout,
			Syntax: "worker_shutdown_timeout time;",
			Doc:    "Longest a graceful stop waits for in-flight work before closing connections. Unset: wait until they finish."},
		{Name: "pid", Contexts: MainCtx, Args: Args1, Set: setPid,
			Syntax: "pid file | off;", Default: "logs/numaproxy.pid",
			Doc: "File the running instance writes its process id to; -s finds the instance through it."},
		{Name: "error_log", Contexts: MainCtx, Args: Args1 | Args2, Multi: true, Set: setErrorLog,
			Syntax: "error_log file | stderr [level];", Default: "logs/error.log error",
			Doc: "Where the error log goes and its lowest level: debug, info, notice, warn, error, crit, alert, emerg."},
		{Name: "events", Contexts: MainCtx, Args: Args0, Block: true, Set: setEvents,
			Syntax: "events { ... }",
			Doc:    "Connection-processing settings."},
		{Name: "worker_connections", Contexts: EventsCtx, Args: Args1, Set: setNumber(func(c *Cursor) *int { return &c.Config.Events.WorkerConnections }),
			Syntax: "worker_connections number;", Default: "512",
			Doc: "Most connections (client and upstream) one loop keeps open; past it a loop stops accepting until one closes."},
		{Name: "use", Contexts: EventsCtx, Args: Args1, Set: setUse,
			Syntax: "use epoll;",
			Doc:    "Accepted for nginx compatibility; epoll is the only method."},
	}
}

func concat(lists ...[]Directive) []Directive {
	var all []Directive
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

var errorLogLevels = []string{"debug", "info", "notice", "warn", "error", "crit", "alert", "emerg"}

// initMain sets nginx's defaults before anything is parsed.
func initMain(cfg *Config) {
	cfg.Main.WorkerProcesses = 1
	cfg.Main.PidFile = filepath.Join(cfg.Prefix, "logs/numaproxy.pid")
	cfg.Events.WorkerConnections = 512
	cfg.Main.WorkerRlimitCore = -1
}

func setInclude(c *Cursor, s *Stmt) error { return c.p.include(c, s) }

func setWorkerProcesses(c *Cursor, s *Stmt) error {
	if s.Args[0].Value == "auto" {
		c.Config.Main.WorkerProcesses = 0
		return nil
	}
	n, err := ParseNumber(s.Args[0].Value)
	if err != nil || n < 1 {
		return s.InvalidValue(s.Args[0], "")
	}
	c.Config.Main.WorkerProcesses = n
	return nil
}

// setNumber stores a non-negative integer argument.
func setNumber(field func(c *Cursor) *int) func(c *Cursor, s *Stmt) error {
	return func(c *Cursor, s *Stmt) error {
		n, err := ParseNumber(s.Args[0].Value)
		if err != nil {
			return s.InvalidValue(s.Args[0], "")
		}
		*field(c) = n
		return nil
	}
}

func setWorkerShutdownTimeout(c *Cursor, s *Stmt) error {
	d, err := ParseTime(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	c.Config.Main.WorkerShutdownTimeout = d
	return nil
}

func setPid(c *Cursor, s *Stmt) error {
	if s.Args[0].Value == "off" {
		c.Config.Main.PidFile = ""
		return nil
	}
	c.Config.Main.PidFile = c.Path(s.Args[0].Value)
	return nil
}

func setErrorLog(c *Cursor, s *Stmt) error {
	log := ErrorLog{Path: s.Args[0].Value, Level: "error"}
	if log.Path != "stderr" {
		log.Path = c.Path(log.Path)
	}
	if len(s.Args) == 2 {
		level := s.Args[1].Value
		ok := false
		for _, l := range errorLogLevels {
			ok = ok || l == level
		}
		if !ok {
			return s.InvalidValue(s.Args[1], "it must be one of "+strings.Join(errorLogLevels, ", "))
		}
		log.Level = level
	}
	c.Config.Main.ErrorLogs = append(c.Config.Main.ErrorLogs, log)
	return nil
}

func setEvents(c *Cursor, s *Stmt) error { return c.ParseBlock(EventsCtx, nil) }

func setUse(c *Cursor, s *Stmt) error {
	if s.Args[0].Value != "epoll" {
		return s.InvalidValue(s.Args[0], `only "epoll" is supported`)
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

// finish completes a parsed config: defaults that depend on the whole file, merges,
// and the checks that need everything at once.
func finish(cfg *Config) error {
	if len(cfg.Main.ErrorLogs) == 0 {
		cfg.Main.ErrorLogs = []ErrorLog{{Path: filepath.Join(cfg.Prefix, "logs/error.log"), Level: "error"}}
	}
	if cfg.HTTP != nil {
		if err := finishHTTP(cfg); err != nil {
			return err
		}
	}
	for _, m := range cfg.registry.modules {
		if m.Check != nil {
			if err := m.Check(cfg, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// Registry returns the registry the config was read with.
func (c *Config) Registry() *Registry { return c.registry }
