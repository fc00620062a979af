package conf

import (
	"strconv"
	"strings"
)

// processDirectives are the main- and events-context directives of nginx's core and
// event modules that shape the process (its priority, limits, folder and
// environment) or tune nginx internals numaproxy does not have. The latter are
// accepted so that stock configurations load, and the reference says they do
// nothing here.
func processDirectives() []Directive {
	return []Directive{
		{Name: "worker_priority", Contexts: MainCtx, Args: Args1, Set: setWorkerPriority,
			Syntax: "worker_priority number;", Default: "0",
			Doc: "Nice value (-20 to 20) of every thread of the process, the loops' included; applied at start and on reload."},
		{Name: "worker_rlimit_core", Contexts: MainCtx, Args: Args1, Set: setWorkerRlimitCore,
			Syntax: "worker_rlimit_core size;",
			Doc:    "Sets RLIMIT_CORE (the largest core file) for the process at start."},
		{Name: "working_directory", Contexts: MainCtx, Args: Args1, Set: setWorkingDirectory,
			Syntax: "working_directory directory;",
			Doc:    "The process's working directory (where a core file is written); it must exist. Paths in the configuration are not affected: they resolve against the prefix."},
		{Name: "env", Contexts: MainCtx, Args: Args1, Multi: true, Set: setEnv,
			Syntax: "env variable[=value];", Default: "env TZ;",
			Doc: "As nginx, the process keeps only the environment variables named here (and TZ), or sets them to the value given; a new binary started by USR2 gets that environment."},
		{Name: "load_module", Contexts: MainCtx, Args: Args1, Multi: true, Set: setLoadModule,
			Syntax: "load_module file;",
			Doc:    "Always an error: numaproxy has no dynamic modules; the error lists the modules compiled in."},
		{Name: "pcre_jit", Contexts: MainCtx, Args: Flag, Set: setNoEffectFlag, NoEffect: true,
			Syntax: "pcre_jit on | off;", Default: "off",
			Doc: "Regular expressions are Go's RE2, which has no JIT and runs in linear time."},
		{Name: "timer_resolution", Contexts: MainCtx, Args: Args1, Set: setNoEffectTime, NoEffect: true,
			Syntax: "timer_resolution interval;",
			Doc:    "Go reads the clock through the vDSO without a system call, so there is nothing to save."},
		{Name: "thread_pool", Contexts: MainCtx, Args: Args2 | Args3, Multi: true, Set: setThreadPool, NoEffect: true,
			Syntax: "thread_pool name threads=number [max_queue=number];", Default: "thread_pool default threads=32 max_queue=65536;",
			Doc: "nginx's pools serve aio threads, which numaproxy does not have; the arguments are checked."},
		{Name: "accept_mutex", Contexts: EventsCtx, Args: Flag, Set: setNoEffectFlag, NoEffect: true,
			Syntax: "accept_mutex on | off;", Default: "off",
			Doc: "Every loop has its own SO_REUSEPORT listener, so loops never contend for one accept queue."},
		{Name: "accept_mutex_delay", Contexts: EventsCtx, Args: Args1, Set: setNoEffectTime, NoEffect: true,
			Syntax: "accept_mutex_delay time;", Default: "500ms",
			Doc: "See accept_mutex."},
		{Name: "multi_accept", Contexts: EventsCtx, Args: Flag, Set: setNoEffectFlag, NoEffect: true,
			Syntax: "multi_accept on | off;", Default: "off",
			Doc: "A loop accepts from its own listener until the queue is empty (or its worker_connections are reached) on each wake-up; with one listener per loop there is no other worker to leave connections to."},
	}
}

func setWorkerPriority(c *Cursor, s *Stmt) error {
	v := s.Args[0].Value
	n, err := strconv.Atoi(v)
	if err != nil || n < -20 || n > 20 || strings.HasPrefix(v, "+") {
		return s.InvalidValue(s.Args[0], "it must be a number from -20 to 20")
	}
	c.Config.Main.WorkerPriority = &n
	return nil
}

func setWorkerRlimitCore(c *Cursor, s *Stmt) error {
	n, err := ParseSize(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	c.Config.Main.WorkerRlimitCore = n
	return nil
}

func setWorkingDirectory(c *Cursor, s *Stmt) error {
	c.Config.Main.WorkingDirectory = c.Path(s.Args[0].Value)
	return nil
}

func setEnv(c *Cursor, s *Stmt) error {
	v := s.Args[0].Value
	name, value, set := strings.Cut(v, "=")
	if name == "" {
		return s.InvalidValue(s.Args[0], "a variable name must come before \"=\"")
	}
	c.Config.Main.Env = append(c.Config.Main.Env, EnvVar{Name: name, Value: value, Set: set})
	return nil
}

func setLoadModule(c *Cursor, s *Stmt) error {
	var names []string
	for _, m := range c.p.reg.modules {
		names = append(names, m.Name)
	}
	return s.Errorf("load_module %q: numaproxy has no dynamic modules; the modules compiled in are %s", s.Args[0].Value, strings.Join(names, ", "))
}

func setNoEffectFlag(c *Cursor, s *Stmt) error {
	if _, err := ParseFlag(s.Args[0].Value); err != nil {
		return s.InvalidValue(s.Args[0], `it must be "on" or "off"`)
	}
	return nil
}

func setNoEffectTime(c *Cursor, s *Stmt) error {
	if _, err := ParseTime(s.Args[0].Value); err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	return nil
}

func setThreadPool(c *Cursor, s *Stmt) error {
	threads := false
	for _, a := range s.Args[1:] {
		key, val, _ := strings.Cut(a.Value, "=")
		n, err := ParseNumber(val)
		switch {
		case key == "threads" && err == nil && n > 0:
			threads = true
		case key == "max_queue" && err == nil:
		default:
			return s.InvalidValue(a, "")
		}
	}
	if !threads {
		return s.Errorf(`"%s" must have "threads" parameter`, s.Args[0].Value)
	}
	return nil
}

// hashTuningDirectives are nginx's hash-table sizing directives. numaproxy builds no
// such tables from them (Go maps and sorted name lists size themselves), so they are
// checked and change nothing.
func hashTuningDirectives() []Directive {
	var ds []Directive
	for _, t := range []struct {
		prefix   string
		contexts Context
		bucket   string
		max      string
	}{
		{"server_names_hash", HTTPCtx, "32|64|128", "512"},
		{"types_hash", HTTPCtx | ServerCtx | LocationCtx, "64", "1024"},
		{"variables_hash", HTTPCtx, "64", "1024"},
		{"map_hash", HTTPCtx, "32|64|128", "2048"},
		{"proxy_headers_hash", HTTPCtx | ServerCtx | LocationCtx, "64", "512"},
	} {
		ds = append(ds,
			Directive{Name: t.prefix + "_bucket_size", Contexts: t.contexts, Args: Args1, Set: setNoEffectSize, NoEffect: true,
				Syntax: t.prefix + "_bucket_size size;", Default: t.bucket,
				Doc: "Sizes an nginx hash table; numaproxy's lookups need no sizing."},
			Directive{Name: t.prefix + "_max_size", Contexts: t.contexts, Args: Args1, Set: setNoEffectSize, NoEffect: true,
				Syntax: t.prefix + "_max_size size;", Default: t.max,
				Doc: "Sizes an nginx hash table; numaproxy's lookups need no sizing."})
	}
	return ds
}

func setNoEffectSize(c *Cursor, s *Stmt) error {
	if n, err := ParseSize(s.Args[0].Value); err != nil || n == 0 {
		return s.InvalidValue(s.Args[0], "")
	}
	return nil
}
