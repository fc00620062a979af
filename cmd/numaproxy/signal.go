package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/numaproxy/numaproxy/errorlog"
)

// signalNames maps -s arguments to the signals nginx sends for them.
var signalNames = map[string]syscall.Signal{
	"stop":   syscall.SIGTERM,
	"quit":   syscall.SIGQUIT,
	"reopen": syscall.SIGUSR1,
	"reload": syscall.SIGHUP,
}

// sendSignal signals the instance whose pid the pid file holds.
func sendSignal(pidFile, name string) error {
	if pidFile == "" {
		return errors.New(`[error] "pid" is off in the configuration: cannot find the running instance`)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("[error] open() %q failed %s", pidFile, errorlog.Errno(err))
	}
	text := strings.TrimSpace(string(data))
	pid, err := strconv.Atoi(text)
	if err != nil || pid <= 0 {
		return fmt.Errorf("[error] invalid PID number %q in %q", text, pidFile)
	}
	sig := signalNames[name]
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("[alert] kill(%d, %d) failed %s", pid, int(sig), errorlog.Errno(err))
	}
	return nil
}
