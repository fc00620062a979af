package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/errorlog"
)

// notifySocket is systemd's NOTIFY_SOCKET (Type=notify), read before any env
// directive filters the environment.
var notifySocket = os.Getenv("NOTIFY_SOCKET")

// notifier speaks systemd's sd_notify protocol: READY=1 once serving, RELOADING=1
// and READY=1 around a reload (Type=notify-reload's protocol, which Type=notify
// understands too), STOPPING=1 before a stop, MAINPID= when a binary upgrade hands
// the service over. nil when systemd did not ask.
type notifier struct {
	addr unix.SockaddrUnix
	fd   int
	log  *slog.Logger
}

// newNotifier connects to NOTIFY_SOCKET, before the process gives up root: the
// socket may be out of the user's reach, and a connected datagram socket keeps
// working after the switch.
func newNotifier(log *slog.Logger) *notifier {
	if notifySocket == "" {
		return nil
	}
	if notifySocket[0] != '/' && notifySocket[0] != '@' {
		log.Warn(fmt.Sprintf("NOTIFY_SOCKET %q is not a unix socket path or an abstract name (@name): systemd is not notified", notifySocket))
		return nil
	}
	n := &notifier{addr: unix.SockaddrUnix{Name: notifySocket}, fd: -1, log: log} // a leading @ is abstract to x/sys/unix too
	if err := n.connect(); err != nil {
		log.Log(nil, errorlog.LevelAlert, err.Error())
	}
	return n
}

func (n *notifier) connect() error {
	if n.fd >= 0 {
		unix.Close(n.fd)
		n.fd = -1
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket() for NOTIFY_SOCKET failed %s", errorlog.Errno(err))
	}
	if err := unix.Connect(fd, &n.addr); err != nil {
		unix.Close(fd)
		return fmt.Errorf("connect() to NOTIFY_SOCKET %q failed %s", notifySocket, errorlog.Errno(err))
	}
	n.fd = fd
	return nil
}

// send writes one notification; a socket systemd has replaced is connected again
// once.
func (n *notifier) send(state string) {
	if n == nil {
		return
	}
	var err error = unix.ENOTCONN
	if n.fd >= 0 {
		_, err = unix.Write(n.fd, []byte(state))
	}
	if err != nil {
		if cerr := n.connect(); cerr != nil {
			n.log.Log(nil, errorlog.LevelAlert, cerr.Error())
			return
		}
		if _, err = unix.Write(n.fd, []byte(state)); err != nil {
			n.log.Log(nil, errorlog.LevelAlert, fmt.Sprintf("notifying systemd (%q) failed %s", state, errorlog.Errno(err)))
		}
	}
}

// ready is sent once serving; MAINPID= lets systemd follow a daemon's or a new
// binary's process (it takes it from a process other than the main one only with
// NotifyAccess=all).
func (n *notifier) ready() { n.send("READY=1\nMAINPID=" + strconv.Itoa(os.Getpid())) }

// reloading starts a reload; ready() ends it, whatever its outcome.
func (n *notifier) reloading() {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	n.send("RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10))
}

func (n *notifier) stopping() { n.send("STOPPING=1") }

// mainPID hands the service to process pid (the old binary when this new one quits
// before it).
func (n *notifier) mainPID(pid int) { n.send("MAINPID=" + strconv.Itoa(pid)) }
