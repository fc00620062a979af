package main

import (
	"fmt"
	"github.com/numaproxy/numaproxy/accesslog"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
)

// The user directive. nginx's master stays root and only its workers change user;
// numaproxy is one process, so after the switch nothing is root any more. What a
// reload or a binary upgrade still needs is kept as two capabilities, held by one
// thread only: the main goroutine's, locked to the main thread below, which handles
// signals and does every reload, upgrade and listener bind. Capabilities belong to
// threads on Linux; setuid(2) clears them on every thread (Go applies set*id calls
// to all threads) except the one that asked to keep them, and threads the runtime
// starts later are cloned by its template thread, not by a locked one, so the loops'
// threads hold none.
func init() { runtime.LockOSThread() }

// keptCaps are what reloads and binary upgrades need once the process is not root:
// CAP_NET_BIND_SERVICE binds a new listen address below 1024; CAP_BPF loads the
// steering program of a new address, of a new set of loops and of the new binary
// (on 6.18 CAP_BPF alone loads, fills and attaches it: numa/steering's tests pass
// under setpriv with it and nothing else). They are raised as ambient too, so that
// the new binary of a USR2, executed as the user, starts with them.
var keptCaps = []struct {
	c    uint
	name string
}{{unix.CAP_NET_BIND_SERVICE, "CAP_NET_BIND_SERVICE"}, {unix.CAP_BPF, "CAP_BPF"}}

// switchUser makes the process u: log files become u's (so that USR1 can reopen
// them), then supplementary groups, group and user change on every thread, and
// the calling thread, which must be the main one, keeps keptCaps. An error means
// the process could not leave root. Problems that leave it safely unprivileged are
// logged.
func switchUser(u *conf.User, cfg *conf.Config, log *slog.Logger) error {
	files := accesslog.Files()
	for _, l := range cfg.Main.ErrorLogs {
		if l.Path != "stderr" {
			files = append(files, l.Path)
		}
	}
	for _, f := range files {
		if err := giveFile(f, u.UID); err != nil {
			log.Log(nil, errorlog.LevelAlert, err.Error())
		}
	}
	var keep [2]uint32 // the capability sets' two 32-bit words
	var kept []string
	if u.UID != 0 {
		have, err := capPermitted()
		if err != nil {
			log.Log(nil, errorlog.LevelAlert, err.Error())
		}
		for _, k := range keptCaps {
			if have[k.c/32]&(1<<(k.c%32)) != 0 {
				keep[k.c/32] |= 1 << (k.c % 32)
				kept = append(kept, k.name)
			}
		}
		if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_KEEPCAPS, 1) failed %s", errorlog.Errno(err))
		}
	}
	if err := syscall.Setgroups(u.Groups); err != nil {
		return fmt.Errorf("initgroups(%s, %d) failed %s", u.Name, u.GID, errorlog.Errno(err))
	}
	if err := syscall.Setgid(u.GID); err != nil {
		return fmt.Errorf("setgid(%d) failed %s", u.GID, errorlog.Errno(err))
	}
	if err := syscall.Setuid(u.UID); err != nil {
		return fmt.Errorf("setuid(%d) failed %s", u.UID, errorlog.Errno(err))
	}
	if u.UID != 0 {
		unix.Prctl(unix.PR_SET_KEEPCAPS, 0, 0, 0, 0)
		if err := setCaps(keep); err != nil {
			log.Log(nil, errorlog.LevelAlert, err.Error()+": a reload cannot bind ports below 1024 nor load BPF steering")
			kept = nil
		}
		for _, k := range keptCaps {
			if keep[k.c/32]&(1<<(k.c%32)) == 0 {
				continue
			}
			if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(k.c), 0, 0); err != nil {
				log.Log(nil, errorlog.LevelAlert, fmt.Sprintf("prctl(PR_CAP_AMBIENT_RAISE, %s) failed %s: a binary upgrade starts without it", k.name, errorlog.Errno(err)))
			}
		}
	}
	if len(kept) == 0 {
		kept = []string{"none"}
	}
	log.Log(nil, errorlog.LevelNotice, fmt.Sprintf("switched to user %q (%d), group %q (%d); capabilities kept: %s",
		u.Name, u.UID, u.Group, u.GID, strings.Join(kept, ", ")))
	if pid := cfg.Main.PidFile; pid != "" && u.UID != 0 {
		if dir := filepath.Dir(pid); unix.Access(dir, unix.W_OK|unix.X_OK) != nil {
			log.Warn(fmt.Sprintf("the folder %q of the pid file is not writable by user %q: the pid file stays behind at exit, and a binary upgrade (USR2), which renames it, is refused", dir, u.Name))
		}
	}
	return nil
}

// giveFile is what nginx's master does to a log file on reopen, done here at start
// because afterwards nobody can: the file becomes uid's, readable and writable by it.
func giveFile(path string, uid int) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("stat() %q failed %s", path, errorlog.Errno(err))
	}
	if int(st.Uid) != uid {
		if err := unix.Chown(path, uid, -1); err != nil {
			return fmt.Errorf("chown(%q, %d) failed %s", path, uid, errorlog.Errno(err))
		}
	}
	if st.Mode&(unix.S_IRUSR|unix.S_IWUSR) != unix.S_IRUSR|unix.S_IWUSR {
		if err := unix.Chmod(path, st.Mode&0o7777|unix.S_IRUSR|unix.S_IWUSR); err != nil {
			return fmt.Errorf("chmod() %q failed %s", path, errorlog.Errno(err))
		}
	}
	return nil
}

// capPermitted is the calling thread's permitted capabilities.
func capPermitted() ([2]uint32, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return [2]uint32{}, fmt.Errorf("capget() failed %s", errorlog.Errno(err))
	}
	return [2]uint32{data[0].Permitted, data[1].Permitted}, nil
}

// setCaps makes keep the calling thread's permitted, effective and inheritable
// capabilities (inheritable so that they can be raised as ambient).
func setCaps(keep [2]uint32) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for i := range data {
		data[i] = unix.CapUserData{Effective: keep[i], Permitted: keep[i], Inheritable: keep[i]}
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset() failed %s", errorlog.Errno(err))
	}
	return nil
}

// ownSockets makes the sockets the calling thread creates u's until the returned
// function is called: a socket belongs to the file system uid that made it, and the
// kernel lets a socket join a SO_REUSEPORT group only if it has the same owner as
// those in it. After the switch the user adds sockets to the groups made at start
// (a reload's new set of loops, a binary upgrade's extra loops), so these must be
// the user's too. Files opened meanwhile are opened with the user's rights.
func ownSockets(u *conf.User) (restore func()) {
	if u == nil || u.UID == 0 || os.Geteuid() != 0 {
		return func() {}
	}
	unix.Setfsuid(u.UID)
	return func() { unix.Setfsuid(0) }
}
