package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
)

// startEnv is the environment the process was started with: env directives choose
// from it on every (re)load, as nginx's master keeps its own and filters it for
// each generation of workers.
var startEnv = os.Environ()

// keptEnv reports whether a variable survives without an env directive: TZ (nginx's
// default), numaproxy's own hand-over variables, the Go runtime's settings, which a
// new binary started by USR2 must run with too, and systemd's NOTIFY_SOCKET, through
// which that new binary tells systemd it is the main process now.
func keptEnv(name string) bool {
	switch name {
	case "TZ", "GODEBUG", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GOTRACEBACK", "NOTIFY_SOCKET":
		return true
	}
	return strings.HasPrefix(name, "NUMAPROXY_")
}

// takeEnv reads and removes a hand-over variable meant for this process alone (the
// listening sockets of a binary upgrade, the daemon's readiness pipe), from the
// environment and from startEnv, so that no reload puts it back and no later binary
// upgrade passes it on.
func takeEnv(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	os.Unsetenv(name)
	startEnv = slices.DeleteFunc(startEnv, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return v, ok
}

// filterEnv is the environment env directives make of start.
func filterEnv(start []string, vars []conf.EnvVar) []string {
	var out []string
	named := map[string]bool{}
	for _, v := range vars {
		named[v.Name] = true
	}
	for _, kv := range start {
		name, _, _ := strings.Cut(kv, "=")
		if keptEnv(name) || named[name] {
			out = append(out, kv)
		}
	}
	for _, v := range vars {
		if !v.Set {
			continue
		}
		for i := len(out) - 1; i >= 0; i-- {
			if strings.HasPrefix(out[i], v.Name+"=") {
				out = append(out[:i], out[i+1:]...)
			}
		}
		out = append(out, v.Name+"="+v.Value)
	}
	return out
}

// applyProcess applies the main-context directives that shape the process: at
// start and again on reload, as nginx applies them to each new set of workers. A
// failure is logged and the rest still applies, as nginx's workers do.
func applyProcess(cfg *conf.Config, log *slog.Logger) {
	m := &cfg.Main
	if m.WorkerRlimitCore >= 0 {
		lim := syscall.Rlimit{Cur: uint64(m.WorkerRlimitCore), Max: uint64(m.WorkerRlimitCore)}
		if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &lim); err != nil {
			log.Log(nil, errorlog.LevelAlert, fmt.Sprintf("setrlimit(RLIMIT_CORE, %d) failed %s", m.WorkerRlimitCore, errorlog.Errno(err)))
		}
	}
	if m.WorkingDirectory != "" {
		if err := os.Chdir(m.WorkingDirectory); err != nil {
			log.Log(nil, errorlog.LevelAlert, fmt.Sprintf("chdir(%q) failed %s", m.WorkingDirectory, errorlog.Errno(err)))
		}
	}
	if m.WorkerPriority != nil {
		if err := setPriority(*m.WorkerPriority); err != nil {
			log.Log(nil, errorlog.LevelAlert, fmt.Sprintf("setpriority(%d) failed %s", *m.WorkerPriority, errorlog.Errno(err)))
		}
	}
	os.Clearenv()
	for _, kv := range filterEnv(startEnv, m.Env) {
		name, value, _ := strings.Cut(kv, "=")
		os.Setenv(name, value)
	}
}

// setPriority sets the nice value of every thread of the process: on Linux a nice
// value belongs to a thread, and threads the runtime starts later inherit it from
// the thread that starts them. A thread started during a pass by one not yet reniced
// is caught by the next pass, which runs until no new thread appears.
func setPriority(nice int) error {
	done := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh = true
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && err != unix.ESRCH {
				return err
			}
			done[tid] = true
		}
		if !fresh {
			return nil
		}
	}
	return nil
}
