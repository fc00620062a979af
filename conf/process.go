package conf

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
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
		{Name: "user", Contexts: MainCtx, Args: Args1 | Args2, Set: setUser,
			Syntax: "user user [group];",
			Doc:    "Started as root, the process becomes this user and group (group: the one named as the user when omitted) once it serves, after binding, loading BPF, writing the pid file and giving the log files to the user; it keeps CAP_NET_BIND_SERVICE and CAP_BPF for reloads and binary upgrades. Read at start only. Without it the process stays who started it (nginx's default: nobody); not started as root, it is ignored with a warning."},
		{Name: "daemon", Contexts: MainCtx, Args: Flag, Set: setDaemon,
			Syntax: "daemon on | off;", Default: "off",
			Doc: "on: start in the background; the command returns 0 once the instance serves and its pid file is written, or 1 with the start-up error. nginx's default is on; numaproxy's is off (foreground, for systemd Type=notify and make run)."},
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

func setUser(c *Cursor, s *Stmt) error {
	name, group := s.Args[0].Value, s.Args[0].Value
	if len(s.Args) == 2 {
		group = s.Args[1].Value
	}
	u, err := lookupUser(name, group)
	if os.Geteuid() == 0 {
		if err != nil {
			return s.Errorf("%s", err)
		}
		u.Pos = s.Pos
		c.Config.Main.User = u
		return nil
	}
	// Already that user: a reload after the switch, a binary upgrade's new process,
	// or a service manager that started the process as the user.
	if err == nil && u.UID == os.Geteuid() && u.GID == os.Getegid() {
		u.Pos = s.Pos
		c.Config.Main.User = u
		return nil
	}
	c.Warn(s.Pos, `the "user" directive makes sense only if numaproxy runs with super-user privileges, ignored`)
	return nil
}

// lookupUser resolves a user directive with nginx's messages. The supplementary
// groups are initgroups(name, group)'s: the group itself and those that list the
// user as a member; the user's primary group only when it is that group.
func lookupUser(name, group string) (*User, error) {
	pw, err := user.Lookup(name)
	if err != nil {
		return nil, lookupError("getpwnam", name, err)
	}
	gr, err := user.LookupGroup(group)
	if err != nil {
		return nil, lookupError("getgrnam", group, err)
	}
	u := &User{Name: name, Group: group}
	if u.UID, err = strconv.Atoi(pw.Uid); err != nil {
		return nil, fmt.Errorf("getpwnam(%q): uid %q is not a number", name, pw.Uid)
	}
	if u.GID, err = strconv.Atoi(gr.Gid); err != nil {
		return nil, fmt.Errorf("getgrnam(%q): gid %q is not a number", group, gr.Gid)
	}
	u.Groups = []int{u.GID}
	ids, err := pw.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("initgroups(%q, %d) failed (%v)", name, u.GID, err)
	}
	for _, id := range ids {
		n, err := strconv.Atoi(id)
		if err != nil || (id == pw.Gid && pw.Gid != gr.Gid) || slices.Contains(u.Groups, n) {
			continue
		}
		u.Groups = append(u.Groups, n)
	}
	return u, nil
}

func lookupError(fn, name string, err error) error {
	var uu user.UnknownUserError
	var ug user.UnknownGroupError
	if errors.As(err, &uu) || errors.As(err, &ug) {
		return fmt.Errorf("%s(%q) failed", fn, name)
	}
	return fmt.Errorf("%s(%q) failed (%v)", fn, name, err)
}

func setDaemon(c *Cursor, s *Stmt) error {
	on, err := ParseFlag(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], `it must be "on" or "off"`)
	}
	c.Config.Main.Daemon = on
	return nil
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
