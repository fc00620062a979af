package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/numaproxy/numaproxy/accesslog"
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/metrics"
	"github.com/numaproxy/numaproxy/server"
)

// instance is one running numaproxy process.
type instance struct {
	cfg    *conf.Config
	load   func() (*conf.Config, error)
	elog   *errorlog.Log
	log    *slog.Logger
	server *server.Server
	// pidFile is the pid file written at start ("" for pid off).
	pidFile string
	up      upgrade
	notify  *notifier    // systemd's NOTIFY_SOCKET, nil without
	daemon  *daemonChild // daemon on: this is the background process, nil in the foreground
}

// runInstance runs in the foreground until a stop signal; it returns the exit status.
func runInstance(cfg *conf.Config, load func() (*conf.Config, error), opts *options, stderr io.Writer, daemon *daemonChild) int {
	elog, err := openErrorLog(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "numaproxy: [emerg] %s\n", err)
		return 1
	}
	in := &instance{cfg: cfg, load: load, elog: elog, log: elog.Logger(), daemon: daemon}
	defer elog.Close()
	// A start-up error ends the process; the daemon also prints it on the terminal of
	// the command that started it, which waits for it.
	fatal := func(msg string) int {
		in.log.Log(nil, errorlog.LevelEmerg, msg)
		if daemon != nil && !logsToStderr(cfg) {
			fmt.Fprintf(stderr, "numaproxy: [emerg] %s\n", msg)
		}
		return 1
	}
	in.notify = newNotifier(in.log)

	// Signals are ours from now on: one arriving during start-up must not kill the
	// process with its default action.
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGINT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	defer signal.Stop(signals)

	if n := cfg.Main.WorkerRlimitNofile; n > 0 {
		lim := syscall.Rlimit{Cur: uint64(n), Max: uint64(n)}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			in.log.Log(nil, errorlog.LevelAlert, fmt.Sprintf("setrlimit(RLIMIT_NOFILE, %d) failed %s", n, errorlog.Errno(err)))
		}
	}

	// A binary upgrade hands over the old binary's listening sockets.
	inherited, err := inheritListeners()
	if err != nil {
		return fatal(err.Error())
	}
	if inherited != nil {
		in.up.parent = os.Getppid()
	}
	applyProcess(cfg, in.log)

	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		return fatal(err.Error())
	}
	restore := ownSockets(cfg.Main.User)
	in.server, err = server.StartWith(cfg, snap, in.log, server.Options{Inherited: adoptable(snap, inherited)})
	restore()
	if err != nil {
		return fatal(err.Error())
	}
	metrics.Attach(in.server)
	// Written once serving: its presence tells -s and scripts the instance is up.
	if err := writePidFile(cfg.Main.PidFile); err != nil {
		in.server.Stop()
		return fatal(err.Error())
	}
	in.pidFile = cfg.Main.PidFile
	defer removePidFile(cfg.Main.PidFile)
	defer removePidFile(oldbinFile(cfg.Main.PidFile))
	// Everything that needs root is done: listeners, BPF, pid file, log files.
	if u := cfg.Main.User; u != nil && os.Geteuid() == 0 {
		if err := switchUser(u, cfg, in.log); err != nil {
			in.server.Stop()
			return fatal(err.Error())
		}
	}

	in.log.Log(nil, errorlog.LevelNotice, "numaproxy/"+httpcore.Version+" started", "pid", os.Getpid(), "config", cfg.File, "loops", len(in.server.Loops()))
	in.notify.ready()
	if err := daemon.ready(cfg); err != nil {
		in.log.Log(nil, errorlog.LevelAlert, "daemon: "+err.Error())
	}

	for {
		var sig os.Signal
		select {
		case sig = <-signals:
		case e := <-in.up.exited:
			in.childExited(e)
			continue
		}
		s := sig.(syscall.Signal)
		what := fmt.Sprintf("signal %d (%s) received", int(s), signalName(s))
		switch s {
		case syscall.SIGHUP:
			in.notify.reloading()
			if in.up.noaccept {
				in.log.Log(nil, errorlog.LevelNotice, what+", ignored: this process no longer accepts connections (SIGWINCH); SIGQUIT to the new binary process rolls back")
			} else {
				in.log.Log(nil, errorlog.LevelNotice, what+", reconfiguring")
				in.reload()
			}
			in.notify.ready()
		case syscall.SIGUSR1:
			in.log.Log(nil, errorlog.LevelNotice, what+", reopening logs")
			if !in.up.noaccept {
				in.server.LogStats()
				accesslog.LogStats(in.log)
			}
			err := in.elog.Reopen()
			if alErr := accesslog.Reopen(); err == nil {
				err = alErr
			}
			if err != nil {
				in.log.Error("reopening logs: " + err.Error())
			} else {
				in.log.Log(nil, errorlog.LevelNotice, "logs reopened")
			}
			in.redirectStd()
		case syscall.SIGQUIT:
			in.log.Log(nil, errorlog.LevelNotice, what+", shutting down gracefully")
			in.stopping()
			if !in.up.noaccept {
				in.releaseShared()
				in.server.Drain(in.cfg.Main.WorkerShutdownTimeout)
			}
			in.finish(false)
			accesslog.Flush() // the lines of the last requests
			accesslog.LogStats(in.log)
			in.log.Log(nil, errorlog.LevelNotice, "exiting")
			return 0
		case syscall.SIGTERM, syscall.SIGINT:
			in.log.Log(nil, errorlog.LevelNotice, what+", exiting")
			in.stopping()
			if !in.up.noaccept {
				in.releaseShared()
				in.server.Stop()
			}
			in.finish(true)
			accesslog.Flush()
			accesslog.LogStats(in.log)
			return 0
		case syscall.SIGUSR2:
			in.log.Log(nil, errorlog.LevelNotice, what+", changing binary")
			in.changeBinary()
		case syscall.SIGWINCH:
			in.log.Log(nil, errorlog.LevelNotice, what+", gracefully shutting down the old binary's connections")
			in.stopAccepting()
		}
	}
}

// reload reads the configuration again; a bad one is logged and changes nothing.
func (in *instance) reload() {
	cfg, err := in.load()
	if err != nil {
		in.configRefused(err)
		return
	}
	for _, w := range cfg.Warnings {
		in.log.Warn(w.Error())
	}
	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		in.configRefused(err)
		return
	}
	dests, err := logDestinations(cfg)
	if err != nil {
		in.configRefused(err)
		return
	}
	if err := in.server.Reload(cfg, snap); err != nil {
		in.log.Log(nil, errorlog.LevelEmerg, err.Error())
		in.log.Log(nil, errorlog.LevelNotice, "configuration not changed: the running configuration stays")
		return
	}
	// The loops keep their loggers: the log itself moves to the new destinations.
	if err := in.elog.Reconfigure(dests); err != nil {
		in.log.Log(nil, errorlog.LevelAlert, "error_log of the new configuration: "+err.Error()+"; logging stays where it was")
	}
	in.cfg = cfg
	applyProcess(cfg, in.log)
	in.redirectStd()
	// nginx's new workers would switch; here the listening sockets a reload keeps
	// are root's, and the user could not add sockets to their reuseport groups.
	if u := cfg.Main.User; u != nil && os.Geteuid() == 0 {
		in.log.Warn(fmt.Sprintf(`the "user" directive takes effect at start: restart numaproxy to run as %q in %s`, u.Name, u.Pos))
	}
	in.log.Log(nil, errorlog.LevelNotice, "configuration reloaded", "config", cfg.File)
}

// configRefused logs a reload whose configuration did not reach the server, and
// counts it.
func (in *instance) configRefused(err error) {
	in.log.Log(nil, errorlog.LevelEmerg, err.Error())
	in.log.Log(nil, errorlog.LevelNotice, "configuration not changed: the running configuration stays")
	in.server.NoteReloadFailure()
}

// stopping tells systemd the service stops, unless this process is not the
// service's main one: a new binary that started from it and took over (the old
// one leaves, the service stays), or a new binary whose old one still runs (a
// rollback: the old one becomes the main process again).
func (in *instance) stopping() {
	switch {
	case in.up.child != 0:
	case in.up.oldParent():
		in.notify.mainPID(in.up.parent)
	default:
		in.notify.stopping()
	}
}

// redirectStd keeps a daemon's stderr on its error log after a rotation or reload.
func (in *instance) redirectStd() {
	if in.daemon == nil {
		return
	}
	if err := redirectStd(in.cfg); err != nil {
		in.log.Log(nil, errorlog.LevelAlert, "daemon: "+err.Error())
	}
}

// logsToStderr reports whether an error_log of cfg is stderr.
func logsToStderr(cfg *conf.Config) bool {
	for _, l := range cfg.Main.ErrorLogs {
		if l.Path == "stderr" {
			return true
		}
	}
	return false
}

func openErrorLog(cfg *conf.Config) (*errorlog.Log, error) {
	dests, err := logDestinations(cfg)
	if err != nil {
		return nil, err
	}
	return errorlog.Open(dests)
}

func logDestinations(cfg *conf.Config) ([]errorlog.Destination, error) {
	var dests []errorlog.Destination
	for _, l := range cfg.Main.ErrorLogs {
		level, err := errorlog.ParseLevel(l.Level)
		if err != nil {
			return nil, err
		}
		dests = append(dests, errorlog.Destination{Path: l.Path, Level: level})
	}
	return dests, nil
}

func writePidFile(path string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("open() %q failed %s", path, errorlog.Errno(err))
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("open() %q failed %s", path, errorlog.Errno(err))
	}
	return nil
}

// removePidFile removes the pid file if it is still ours (a newer instance may have
// written its own).
func removePidFile(path string) {
	if path == "" {
		return
	}
	if data, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(data)) == strconv.Itoa(os.Getpid()) {
		os.Remove(path)
	}
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2", syscall.SIGWINCH: "SIGWINCH",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return s.String()
}
