package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
)

// daemonEnv, in the process "daemon on" starts, names the file descriptor on which
// it tells the command that started it that it serves.
const daemonEnv = "NUMAPROXY_DAEMON"

// readyMsg is what the daemon writes on that descriptor once it serves.
const readyMsg = "ready\n"

// daemonize is "daemon on" in the command the user ran. Go cannot fork without
// exec, so the daemon is this binary executed again, in a new session, with stdin
// and stdout on /dev/null and stderr where the command's is until it serves, so
// that start-up errors reach the terminal. The command returns 0 once the daemon
// serves and has written its pid file, 1 if it fails to start.
func daemonize(stderr io.Writer) int {
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "numaproxy: [emerg] "+format+"\n", a...) }
	exe, err := os.Executable()
	if err != nil {
		say("daemon: finding this binary failed: %v", err)
		return 1
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		say("open() %q failed %s", os.DevNull, errorlog.Errno(err))
		return 1
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		say("pipe() failed %s", errorlog.Errno(err))
		return 1
	}
	defer r.Close()
	errFile, ok := stderr.(*os.File)
	if !ok {
		errFile = os.Stderr
	}
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        self.args, // argv[0] as given: the daemon resolves the binary upgrade's path from it as this process did
		Env:         append(os.Environ(), daemonEnv+"=3"),
		Stdin:       null,
		Stdout:      null,
		Stderr:      errFile,
		ExtraFiles:  []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		say("execve() %q failed %s", exe, errorlog.Errno(err))
		return 1
	}
	w.Close()
	got, _ := io.ReadAll(r) // until the daemon says it serves or ends
	if string(got) == readyMsg {
		cmd.Process.Release()
		return 0
	}
	state, err := cmd.Process.Wait()
	switch {
	case err != nil:
		say("waitpid() for the daemon %d failed %s", cmd.Process.Pid, errorlog.Errno(err))
	case state.Exited():
		say("the daemon process %d exited with code %d before it served", cmd.Process.Pid, state.ExitCode())
	default:
		say("the daemon process %d ended before it served: %s", cmd.Process.Pid, state)
	}
	return 1
}

// daemonChild is the daemon's side: its readiness pipe; nil in a process that is
// not one.
type daemonChild struct {
	pipe *os.File
}

// takeDaemon finds, in a process daemonize started, the readiness pipe.
func takeDaemon() *daemonChild {
	v, ok := takeEnv(daemonEnv)
	if !ok {
		return nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	unix.CloseOnExec(fd)
	return &daemonChild{pipe: os.NewFile(uintptr(fd), "daemon-ready")}
}

// ready lets go of the terminal (stdin and stdout to /dev/null, stderr to the error
// log, as nginx's daemon) and lets the command that started the daemon return.
func (d *daemonChild) ready(cfg *conf.Config) error {
	if d == nil {
		return nil
	}
	if err := redirectStd(cfg); err != nil {
		return err
	}
	_, err := d.pipe.WriteString(readyMsg)
	d.pipe.Close()
	return err
}

// redirectStd points stdin and stdout at /dev/null and stderr (where the Go runtime
// writes a crash) at the first error_log file, /dev/null if there is none; again
// after USR1 and reload, so that stderr follows the log's rotation.
func redirectStd(cfg *conf.Config) error {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open() %q failed %s", os.DevNull, errorlog.Errno(err))
	}
	defer null.Close()
	errFile := null
	for _, l := range cfg.Main.ErrorLogs {
		if l.Path != "stderr" {
			f, err := os.OpenFile(l.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return fmt.Errorf("open() %q failed %s", l.Path, errorlog.Errno(err))
			}
			defer f.Close()
			errFile = f
			break
		}
	}
	for fd, f := range []*os.File{null, null, errFile} {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return fmt.Errorf("dup2() to %d failed %s", fd, errorlog.Errno(err))
		}
	}
	return nil
}
