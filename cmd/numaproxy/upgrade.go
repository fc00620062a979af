package main

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/server"
	"golang.org/x/sys/unix"
)

// listenersEnv names, in a process started by a binary upgrade (SIGUSR2), which
// inherited file descriptor is a listening socket of which address, as nginx's
// NGINX variable does: "127.0.0.1:8080=3,4;[::1]:8080=5,6".
const listenersEnv = "NUMAPROXY_LISTENERS"

// self is how this process was started, resolved once at start: a binary upgrade
// runs whatever file is at that path then (a binary replaced on disk, a symbolic link
// moved to a new release), with the same arguments.
var self struct {
	path string
	args []string
}

// resolveSelf records the path of the running binary from argv[0], as a shell found
// it: a name with a slash against the working directory, a bare name in $PATH;
// /proc/self/exe when neither works.
func resolveSelf(argv []string) {
	self.args = argv
	if len(argv) > 0 && argv[0] != "" {
		name := argv[0]
		if strings.Contains(name, "/") {
			if abs, err := filepath.Abs(name); err == nil {
				self.path = abs
				return
			}
		} else if p, err := exec.LookPath(name); err == nil {
			if abs, err := filepath.Abs(p); err == nil {
				self.path = abs
				return
			}
		}
	}
	if p, err := os.Executable(); err == nil {
		self.path = p
	}
	if len(self.args) == 0 {
		self.args = []string{self.path}
	}
}

// encodeListeners numbers the listening sockets as a child started with them after
// stdin, stdout and stderr sees them (3, 4, ...), in address order, and returns the
// value of listenersEnv and the sockets in that order.
func encodeListeners(fds map[netip.AddrPort][]int) (string, []int) {
	addrs := make([]netip.AddrPort, 0, len(fds))
	for a := range fds {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, func(a, b netip.AddrPort) int { return cmp.Compare(a.String(), b.String()) })
	var env []string
	var order []int
	for _, a := range addrs {
		var nums []string
		for _, fd := range fds[a] {
			nums = append(nums, strconv.Itoa(3+len(order)))
			order = append(order, fd)
		}
		if len(nums) > 0 {
			env = append(env, a.String()+"="+strings.Join(nums, ","))
		}
	}
	return strings.Join(env, ";"), order
}

// parseListeners reads a value of listenersEnv.
func parseListeners(s string) (map[netip.AddrPort][]int, error) {
	out := map[netip.AddrPort][]int{}
	if s == "" {
		return out, nil
	}
	seen := map[int]bool{}
	for _, item := range strings.Split(s, ";") {
		eq := strings.LastIndexByte(item, '=')
		if eq < 0 {
			return nil, fmt.Errorf("invalid socket list %q in %s: no \"=\"", item, listenersEnv)
		}
		addr, err := netip.ParseAddrPort(item[:eq])
		if err != nil {
			return nil, fmt.Errorf("invalid socket list %q in %s: %v", item, listenersEnv, err)
		}
		for _, n := range strings.Split(item[eq+1:], ",") {
			fd, err := strconv.Atoi(n)
			if err != nil || fd < 3 || seen[fd] {
				return nil, fmt.Errorf("invalid socket number %q in %s", n, listenersEnv)
			}
			seen[fd] = true
			out[addr] = append(out[addr], fd)
		}
	}
	return out, nil
}

// inheritListeners reads and unsets listenersEnv; nil when this process was not
// started by a binary upgrade. The sockets are made close-on-exec at once, so that
// a later upgrade does not leak them into its child.
func inheritListeners() (map[netip.AddrPort][]int, error) {
	s, ok := takeEnv(listenersEnv)
	if !ok {
		return nil, nil
	}
	fds, err := parseListeners(s)
	if err != nil {
		return nil, err
	}
	for _, list := range fds {
		for _, fd := range list {
			unix.CloseOnExec(fd)
		}
	}
	return fds, nil
}

// closeListeners closes inherited sockets that nothing adopted.
func closeListeners(fds map[netip.AddrPort][]int) {
	for _, list := range fds {
		for _, fd := range list {
			unix.Close(fd)
		}
	}
}

// startBinary starts path with args and the environment of this process, handing
// it the listening sockets as fds 3, 4, ... named in listenersEnv, and returns its
// pid. It forks with the raw descriptors: os/exec's ExtraFiles would go through
// os.File.Fd, which puts the sockets in blocking mode, and that flag belongs to the
// open file shared with this process's event loops.
func startBinary(path string, args []string, fds map[netip.AddrPort][]int) (int, error) {
	value, order := encodeListeners(fds)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, listenersEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, listenersEnv+"="+value)
	files := []uintptr{0, 1, 2}
	for _, fd := range order {
		files = append(files, uintptr(fd))
	}
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{Env: env, Files: files})
	if err != nil {
		return 0, fmt.Errorf("execve() %q failed %s", path, errorlog.Errno(err))
	}
	return pid, nil
}

// renamePidFile renames from to to, with nginx's rename() error text.
func renamePidFile(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("rename() %q to %q failed %s", from, to, errorlog.Errno(err))
	}
	return nil
}

// pidFileHolds reports whether the file at path holds pid; false when absent.
func pidFileHolds(path string, pid int) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(data)) == strconv.Itoa(pid)
}

// upgrade is an instance's side of binary upgrades.
type upgrade struct {
	parent   int            // the old binary's pid when this process was started by an upgrade, else 0
	child    int            // the new binary's pid while it runs, else 0
	exited   chan childExit // the new binary's end
	noaccept bool           // SIGWINCH: in.server drains; kept holds its sockets
	kept     map[netip.AddrPort][]int
	draining []retiredServer
}

// childExit is how the new binary ended.
type childExit struct {
	pid    int
	status syscall.WaitStatus
	err    error
}

// retiredServer is a server draining after SIGWINCH.
type retiredServer struct {
	srv  *server.Server
	done chan struct{}
}

// oldParent reports whether the old binary that started this process still runs
// (it is still our parent): both share the listening sockets then.
func (up *upgrade) oldParent() bool {
	return up.parent > 1 && os.Getppid() == up.parent
}

// changeBinary is SIGUSR2: rename the pid file to .oldbin, let go of BPF steering
// and start the binary again with the listening sockets.
func (in *instance) changeBinary() {
	const ignored = "the changing binary signal is ignored: "
	switch {
	case in.up.child != 0:
		in.log.Log(nil, errorlog.LevelNotice, ignored+fmt.Sprintf("the new binary process %d is running; stop it or this one first", in.up.child))
		return
	case in.up.noaccept:
		in.log.Log(nil, errorlog.LevelNotice, ignored+"this process no longer accepts connections (SIGWINCH)")
		return
	case in.up.oldParent():
		in.log.Log(nil, errorlog.LevelNotice, ignored+fmt.Sprintf("the old binary process %d is still running; stop it or this one first", in.up.parent))
		return
	}
	if in.pidFile != "" {
		if err := renamePidFile(in.pidFile, oldbinFile(in.pidFile)); err != nil {
			in.log.Log(nil, errorlog.LevelAlert, err.Error()+" before executing new binary process")
			return
		}
	}
	in.server.ReleaseSteering()
	pid, err := startBinary(self.path, self.args, in.server.ListenerFDs())
	if err != nil {
		in.log.Log(nil, errorlog.LevelAlert, err.Error())
		in.carryOn(0)
		return
	}
	in.up.child = pid
	in.up.exited = make(chan childExit, 1)
	go func(exited chan<- childExit) {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			exited <- childExit{pid: pid, status: ws, err: err}
			return
		}
	}(in.up.exited)
	in.log.Log(nil, errorlog.LevelNotice, fmt.Sprintf("start new binary process %d", pid), "path", self.path)
}

// childExited is the new binary's end: this process carries on as before the
// upgrade, serving again if SIGWINCH had stopped it.
func (in *instance) childExited(e childExit) {
	in.up.child, in.up.exited = 0, nil
	switch {
	case e.err != nil:
		in.log.Log(nil, errorlog.LevelAlert, fmt.Sprintf("waitpid() for new binary process %d failed %s", e.pid, errorlog.Errno(e.err)))
	case e.status.Signaled():
		in.log.Log(nil, errorlog.LevelAlert, fmt.Sprintf("new binary process %d exited on signal %d", e.pid, int(e.status.Signal())))
	default:
		in.log.Log(nil, errorlog.LevelNotice, fmt.Sprintf("new binary process %d exited with code %d", e.pid, e.status.ExitStatus()))
	}
	in.carryOn(e.pid)
}

// carryOn undoes an upgrade whose new binary is gone (pid, 0 if it never started):
// the pid file gets its name back and the listeners are steered here again.
func (in *instance) carryOn(pid int) {
	if in.pidFile != "" {
		oldbin := oldbinFile(in.pidFile)
		_, err := os.Stat(in.pidFile)
		if (os.IsNotExist(err) || (pid != 0 && pidFileHolds(in.pidFile, pid))) && pidFileHolds(oldbin, os.Getpid()) {
			if err := renamePidFile(oldbin, in.pidFile); err != nil {
				in.log.Log(nil, errorlog.LevelAlert, err.Error())
			}
		}
	}
	// The new binary may have become systemd's main process.
	in.notify.ready()
	if !in.up.noaccept {
		in.server.RestoreSteering()
		in.log.Log(nil, errorlog.LevelNotice, "binary upgrade undone: this process carries on")
		return
	}
	// SIGWINCH stopped this server: serve again on the sockets kept aside.
	kept := in.up.kept
	in.up.noaccept, in.up.kept = false, nil
	snap, err := httpcore.NewSnapshot(in.cfg)
	if err == nil {
		var srv *server.Server
		srv, err = server.StartWith(in.cfg, snap, in.log, server.Options{Inherited: adoptable(snap, kept)})
		if err == nil {
			in.server = srv
			in.log.Log(nil, errorlog.LevelNotice, "binary upgrade undone: this process accepts connections again")
			return
		}
	}
	in.log.Log(nil, errorlog.LevelAlert, "serving again after the new binary exited failed: "+err.Error()+"; nothing accepts connections, restart numaproxy")
}

// stopAccepting is SIGWINCH after a binary upgrade: the server stops accepting and
// drains in the background, leaving the new binary alone on the listening sockets;
// this process stays until SIGQUIT or SIGTERM, or serves again if the new binary
// exits.
func (in *instance) stopAccepting() {
	const ignored = "the shutting down signal is ignored: "
	switch {
	case in.up.noaccept:
		in.log.Log(nil, errorlog.LevelNotice, ignored+"this process no longer accepts connections already")
		return
	case in.up.child == 0:
		in.log.Log(nil, errorlog.LevelNotice, ignored+"no new binary process is running (SIGUSR2 starts one)")
		return
	case in.pidFile != "" && !pidFileHolds(in.pidFile, in.up.child):
		in.log.Log(nil, errorlog.LevelNotice, ignored+fmt.Sprintf("the new binary process %d is not serving yet (its pid file is not written)", in.up.child))
		return
	}
	kept, err := dupListeners(in.server.ListenerFDs())
	if err != nil {
		in.log.Log(nil, errorlog.LevelAlert, ignored+err.Error())
		return
	}
	srv, done, log := in.server, make(chan struct{}), in.log
	timeout := in.cfg.Main.WorkerShutdownTimeout
	go func() {
		srv.Drain(timeout)
		log.Log(nil, errorlog.LevelNotice, "old binary's connections finished")
		close(done)
	}()
	in.up.noaccept, in.up.kept = true, kept
	in.up.draining = append(in.up.draining, retiredServer{srv: srv, done: done})
	in.log.Log(nil, errorlog.LevelNotice, fmt.Sprintf("gracefully shutting down: no new connections, the new binary process %d serves them; this process stays until SIGQUIT", in.up.child))
}

// finish waits for the servers draining since SIGWINCH (stop: closing them now)
// and closes the sockets kept aside.
func (in *instance) finish(stop bool) {
	for _, r := range in.up.draining {
		if stop {
			for _, l := range r.srv.Loops() {
				l.Stop()
			}
		}
		<-r.done
	}
	in.up.draining = nil
	closeListeners(in.up.kept)
	in.up.kept = nil
}

// dupListeners duplicates the listening sockets (close-on-exec).
func dupListeners(fds map[netip.AddrPort][]int) (map[netip.AddrPort][]int, error) {
	out := map[netip.AddrPort][]int{}
	for a, list := range fds {
		for _, fd := range list {
			dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
			if err != nil {
				closeListeners(out)
				return nil, fmt.Errorf("dup() of a listening socket of %s failed %s", a, errorlog.Errno(err))
			}
			out[a] = append(out[a], dup)
		}
	}
	return out, nil
}

// adoptable keeps the inherited sockets of the addresses snap listens on and
// closes the others.
func adoptable(snap *httpcore.Snapshot, fds map[netip.AddrPort][]int) map[netip.AddrPort][]int {
	want := map[netip.AddrPort]bool{}
	for _, a := range snap.Routes.Addrs() {
		want[a.Addr] = true
	}
	out := map[netip.AddrPort][]int{}
	for a, list := range fds {
		if want[a] {
			out[a] = list
		} else {
			closeListeners(map[netip.AddrPort][]int{a: list})
		}
	}
	return out
}

// oldbinFile is where SIGUSR2 moves the pid file ("" for pid off).
func oldbinFile(pidFile string) string {
	if pidFile == "" {
		return ""
	}
	return pidFile + ".oldbin"
}

// releaseShared lets go of BPF steering before this process stops if the old
// binary that started it still runs on the same sockets: the old one then steers
// them again (a socket sits in one BPF socket array at most).
func (in *instance) releaseShared() {
	if in.up.oldParent() {
		in.server.ReleaseSteering()
	}
}
