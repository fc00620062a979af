package integration

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The process directives user and daemon, and systemd's notification protocol.

// needRoot skips a test that starts numaproxy as root to see it switch user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the user directive switches only from root")
	}
}

// nobody returns the uid and gid of nobody:nogroup, the account the tests switch to.
func nobody(t *testing.T) (int, int) {
	t.Helper()
	out, err := exec.Command("id", "-u", "nobody").Output()
	if err != nil {
		t.Skip("no user nobody here")
	}
	uid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	out, err = exec.Command("getent", "group", "nogroup").Output()
	if err != nil {
		t.Skip("no group nogroup here")
	}
	gid, _ := strconv.Atoi(strings.Split(string(out), ":")[2])
	return uid, gid
}

// openToAll lets any user reach dir (the test's temp folders are 0700) and run the
// binary: the switched process reads its configuration on reload and executes the
// binary on USR2 as nobody.
func openToAll(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{dir, filepath.Dir(dir), filepath.Dir(binary)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// privilegedPort finds a port below 1024 on 127.0.0.1 that nothing listens on.
func privilegedPort(t *testing.T) int {
	t.Helper()
	first := 600 + rand.IntN(300)
	for p := first; p < first+100; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free port below 1024")
	return 0
}

// procStatus is the lines of /proc/PID[/task/TID]/status, by name.
func procStatus(t *testing.T, path string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(readFile(t, path), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// keptCaps is CAP_NET_BIND_SERVICE and CAP_BPF as /proc shows a capability set.
var keptCaps = fmt.Sprintf("%016x", uint64(1)<<unix.CAP_NET_BIND_SERVICE|uint64(1)<<unix.CAP_BPF)

// checkSwitched checks that process pid runs as uid:gid with only keptCaps; with
// mainOnly, only its main thread (the one handling signals and reloads) holds them.
func checkSwitched(t *testing.T, pid, uid, gid int, mainOnly bool) {
	t.Helper()
	st := procStatus(t, fmt.Sprintf("/proc/%d/status", pid))
	ids := func(n int) string { return strings.TrimSpace(strings.Repeat(strconv.Itoa(n)+" ", 4)) } // real, effective, saved, fs
	if st["Uid"] != ids(uid) || st["Gid"] != ids(gid) || st["Groups"] != strconv.Itoa(gid) {
		t.Errorf("process %d: Uid %q Gid %q Groups %q, want %d and %d", pid, st["Uid"], st["Gid"], st["Groups"], uid, gid)
	}
	for _, set := range []string{"CapPrm", "CapEff", "CapAmb"} {
		if st[set] != keptCaps {
			t.Errorf("process %d: %s %s, want %s (CAP_NET_BIND_SERVICE, CAP_BPF)", pid, set, st[set], keptCaps)
		}
	}
	if !mainOnly {
		return
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		if task.Name() == strconv.Itoa(pid) {
			continue
		}
		ts := procStatus(t, fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if ts["CapEff"] != "0000000000000000" || ts["CapPrm"] != "0000000000000000" {
			t.Errorf("thread %s of %d: CapPrm %s CapEff %s, want none", task.Name(), pid, ts["CapPrm"], ts["CapEff"])
		}
	}
}

// userConfig is "user nobody nogroup;" with main-context lines extra and a server
// answering body on listens.
func userConfig(extra string, body string, listens ...string) string {
	var l string
	for _, a := range listens {
		l += " listen " + a + ";"
	}
	return "user nobody nogroup;\nerror_log logs/error.log info;\n" + extra +
		"events { }\nhttp {\n  server {" + l + " location / { return 200 \"" + body + "\"; } }\n}\n"
}

// TestUserSwitch: started as root with "user nobody nogroup;", the process serves
// as nobody with only CAP_NET_BIND_SERVICE and CAP_BPF, on its main thread only;
// a reload binds a port below 1024 and steers it with BPF; a binary upgrade's new
// process, executed as nobody, starts with the same two capabilities (ambient) and
// opens the error log the root process created; USR1 reopens the logs as nobody.
func TestUserSwitch(t *testing.T) {
	needRoot(t)
	uid, gid := nobody(t)
	addr := addrFor(t)
	low := "127.0.0.1:" + strconv.Itoa(privilegedPort(t))
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": userConfig("worker_processes 2;\n", "old", addr)})
	openToAll(t, dir)
	// The layout a binary upgrade needs: the pid file's folder writable by the user.
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "logs"), uid, gid); err != nil {
		t.Fatal(err)
	}
	in := start(t, dir)
	in.waitLog(`switched to user "nobody" (` + strconv.Itoa(uid) + `), group "nogroup" (` + strconv.Itoa(gid) + `); capabilities kept: CAP_NET_BIND_SERVICE, CAP_BPF`)
	old := in.cmd.Process.Pid
	checkSwitched(t, old, uid, gid, true)
	var st syscall.Stat_t
	if err := syscall.Stat(in.path("logs/error.log"), &st); err != nil || int(st.Uid) != uid {
		t.Errorf("error.log owner %d (%v), want %d: nginx gives log files to the user", st.Uid, err, uid)
	}
	if body, err := rawGetClose(addr); err != nil || body != "old" {
		t.Fatalf("%q %v", body, err)
	}

	// Reload: a new address below 1024, with its own BPF program.
	conf := in.path("conf/numaproxy.conf")
	if err := os.WriteFile(conf, []byte(userConfig("worker_processes 2;\n", "old", addr, low)), 0o644); err != nil {
		t.Fatal(err)
	}
	in.signal("reload")
	in.waitLog("configuration reloaded")
	for _, a := range []string{addr, low} {
		if body, err := rawGetClose(a); err != nil || body != "old" {
			t.Fatalf("%s after reload: %q %v", a, body, err)
		}
	}
	logClean(t, in) // no bind() failure
	for _, line := range strings.Split(readFile(t, in.path("logs/error.log")), "\n") {
		if strings.Contains(line, "BPF is not available") || strings.Contains(line, "BPF steering") { // warnings only
			t.Fatalf("the new address is not steered by BPF: %s", line)
		}
	}

	// Reload: other loops; their sockets join the reuseport groups of the ones made
	// at start, which the kernel allows only for sockets of the same owner.
	if err := os.WriteFile(conf, []byte(userConfig("worker_processes 1;\n", "old", addr, low)), 0o644); err != nil {
		t.Fatal(err)
	}
	in.signal("reload")
	in.waitLog("loops rolled over")
	for _, a := range []string{addr, low} {
		if body, err := rawGetClose(a); err != nil || body != "old" {
			t.Fatalf("%s after the loops rolled over: %q %v", a, body, err)
		}
	}
	logClean(t, in)

	// Binary upgrade: the new process runs as nobody from the start.
	if err := os.WriteFile(conf, []byte(userConfig("worker_processes 2;\n", "new", addr, low)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(old, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	pid := in.newBinary()
	in.waitLog(fmt.Sprintf("started, pid=%d", pid))
	checkSwitched(t, pid, uid, gid, false)
	syscall.Kill(old, syscall.SIGWINCH)
	in.waitLog("no new connections, the new binary process")
	for _, a := range []string{addr, low} {
		waitFor(t, "the new binary answering on "+a, 10*time.Second, func() bool { b, _ := rawGetClose(a); return b == "new" })
	}
	syscall.Kill(old, syscall.SIGQUIT)
	if code := in.waitExit(); code != 0 {
		t.Fatalf("old binary exit code %d", code)
	}

	// USR1 as nobody: the rotated file keeps what came before, a new one is created.
	if err := os.Rename(in.path("logs/error.log"), in.path("logs/error.log.1")); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGUSR1)
	in.waitLog("logs reopened")
	if !fileContains(in.path("logs/error.log.1"), "signal 10 (SIGUSR1) received, reopening logs") {
		t.Fatal("the rotated file lacks the reopen notice")
	}
	logClean(t, in)
	quitNew(t, in, pid)
}

// TestUserAddedByReload: a user directive a reload adds is not applied (nginx's new
// workers would take it): the listening sockets the process keeps are root's, and
// as the user it could not add sockets to their reuseport groups. It says so.
func TestUserAddedByReload(t *testing.T) {
	needRoot(t)
	addr := addrFor(t)
	cfg := strings.TrimPrefix(userConfig("", "ok", addr), "user nobody nogroup;\n")
	in := start(t, writeTree(t, map[string]string{"conf/numaproxy.conf": cfg}))
	if err := os.WriteFile(in.path("conf/numaproxy.conf"), []byte("user nobody nogroup;\n"+cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in.signal("reload")
	in.waitLog(`[warn] `)
	in.waitLog(`the "user" directive takes effect at start: restart numaproxy to run as "nobody" in ` + in.path("conf/numaproxy.conf") + ":1")
	in.waitLog("configuration reloaded")
	if st := procStatus(t, fmt.Sprintf("/proc/%d/status", in.cmd.Process.Pid)); !strings.HasPrefix(st["Uid"], "0 ") {
		t.Fatalf("Uid %q after the reload", st["Uid"])
	}
	if body, err := rawGetClose(addr); err != nil || body != "ok" {
		t.Fatalf("%q %v", body, err)
	}
}

// TestUserDirectiveChecks: as nginx, root resolves the user and group when it reads
// the configuration (an unknown one is an error with file:line); anyone else gets a
// warning and the directive is ignored. nginx -t says the same on the same lines.
func TestUserDirectiveChecks(t *testing.T) {
	needRoot(t)
	uid, gid := nobody(t)
	bin := nginxBinary(t)
	const ignored = `the "user" directive makes sense only if `
	for _, c := range []struct {
		line, level, want string
		asNobody          bool
	}{
		{"user nosuchuser-np;", "[emerg] ", `getpwnam("nosuchuser-np") failed`, false},
		{"user nobody nosuchgroup-np;", "[emerg] ", `getgrnam("nosuchgroup-np") failed`, false},
		{"user nobody;", "[emerg] ", `getgrnam("nobody") failed`, false}, // the group is named as the user
		{"user root;", "[warn] ", ignored, true},
	} {
		dir := writeTree(t, map[string]string{"conf/numaproxy.conf": c.line + "\nevents { }\n", "conf/nginx.conf": c.line + "\nevents { }\n", "logs/.keep": ""})
		openToAll(t, dir)
		os.Chmod(filepath.Join(dir, "logs"), 0o777)
		cmd := exec.Command(binary, "-t", "-p", dir)
		ng := exec.Command(bin, "-t", "-p", dir+"/", "-c", filepath.Join(dir, "conf/nginx.conf"), "-e", "stderr", "-g", "pid "+filepath.Join(dir, "logs/nginx.pid")+";")
		if c.asNobody {
			for _, cmd := range []*exec.Cmd{cmd, ng} {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
			}
		}
		out, err := cmd.CombinedOutput()
		ngOut, ngErr := ng.CombinedOutput()
		want, ngWant := c.want, c.want
		if c.asNobody {
			want += "numaproxy runs with super-user privileges, ignored"
			ngWant += "the master process runs with super-user privileges, ignored"
		}
		want += " in " + filepath.Join(dir, "conf/numaproxy.conf") + ":1"
		ngWant += " in " + filepath.Join(dir, "conf/nginx.conf") + ":1"
		if !strings.Contains(string(out), "numaproxy: "+c.level+want) {
			t.Errorf("%s: numaproxy -t said %q, want %q", c.line, out, c.level+want)
		}
		// nginx puts pid#tid between the level and the message.
		if !strings.Contains(string(ngOut), c.level) || !strings.Contains(string(ngOut), ngWant) {
			t.Errorf("%s: nginx -t said %q, want %q", c.line, ngOut, c.level+ngWant)
		}
		if (err == nil) != c.asNobody || (ngErr == nil) != c.asNobody {
			t.Errorf("%s: numaproxy -t %v, nginx -t %v; want both to succeed only with the warning", c.line, err, ngErr)
		}
	}
}

// TestDaemon: with "daemon on;" the command returns 0 once the daemon serves and its
// pid file is written, as nginx's does; the daemon leads its own session with stdin
// and stdout on /dev/null and stderr on its error log; -s finds it through the pid
// file; a binary upgrade's new process stays beside it. A daemon that cannot start
// makes the command fail with the error, as nginx's.
func TestDaemon(t *testing.T) {
	addr := addrFor(t)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "daemon on;\nerror_log logs/error.log info;\nevents { }\nhttp { server { listen " + addr + "; location / { return 200 daemon; } } }\n"})
	pidFile := filepath.Join(dir, "logs/numaproxy.pid")
	r := run(t, "-p", dir)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("daemon on: %+v", r)
	}
	pid := readPid(pidFile)
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("pid file holds %d, not a running process", pid)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	// It serves as soon as the command has returned.
	if body, err := rawGetClose(addr); err != nil || body != "daemon" {
		t.Fatalf("%q %v", body, err)
	}
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("session %d (%v), want its own (%d)", sid, err, pid)
	}
	for fd, want := range []string{"/dev/null", "/dev/null", filepath.Join(dir, "logs/error.log")} {
		if got, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); got != want {
			t.Errorf("fd %d is %q, want %q", fd, got, want)
		}
	}

	// USR2: the new process does not daemonize again; it is the daemon's child.
	if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new binary's pid file", 10*time.Second, func() bool { p := readPid(pidFile); return p != 0 && p != pid })
	newPid := readPid(pidFile)
	t.Cleanup(func() { syscall.Kill(newPid, syscall.SIGKILL) })
	if st := procStatus(t, fmt.Sprintf("/proc/%d/status", newPid)); st["PPid"] != strconv.Itoa(pid) {
		t.Errorf("the new binary's parent is %s, want the daemon %d", st["PPid"], pid)
	}
	// -s quit reaches the new one through the pid file; the old one follows.
	if r := run(t, "-p", dir, "-s", "quit"); r.code != 0 {
		t.Fatalf("-s quit: %+v", r)
	}
	waitFor(t, "the new binary to exit", 10*time.Second, func() bool { return syscall.Kill(newPid, 0) != nil })
	waitFor(t, "the daemon to take its pid file back", 10*time.Second, func() bool { return readPid(pidFile) == pid })
	if r := run(t, "-p", dir, "-s", "quit"); r.code != 0 {
		t.Fatalf("-s quit: %+v", r)
	}
	waitFor(t, "the daemon to exit", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid file left behind: %v", err)
	}

	// A daemon that cannot bind: the command fails and says why.
	bad := writeTree(t, map[string]string{"conf/numaproxy.conf": "daemon on;\nerror_log logs/error.log info;\nevents { }\nhttp { server { listen 10.255.255.1:8080; } }\n"})
	r = run(t, "-p", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "[emerg] bind() to 10.255.255.1:8080 failed (99: Cannot assign requested address)") {
		t.Fatalf("daemon that cannot bind: %+v", r)
	}

	// nginx: the same daemon on returns 0 with the master running and its pid file
	// written, or 1 with the bind error.
	ng := nginxBinary(t)
	ngAddr := addrFor(t)
	for _, c := range []struct {
		listen string
		code   int
	}{{ngAddr, 0}, {"10.255.255.1:8080", 1}} {
		ngDir := writeTree(t, map[string]string{"conf/nginx.conf": "daemon on;\nuser root;\npid logs/nginx.pid;\nerror_log logs/error.log info;\nevents { }\nhttp { access_log off; server { listen " + c.listen + "; location / { return 200 nginx; } } }\n", "logs/.keep": ""})
		cmd := exec.Command(ng, "-p", ngDir+"/", "-c", filepath.Join(ngDir, "conf/nginx.conf"), "-e", filepath.Join(ngDir, "logs/error.log"))
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != c.code {
			t.Errorf("nginx daemon on %s: exit %d, want %d: %s", c.listen, code, c.code, out)
		}
		if c.code != 0 {
			if !strings.Contains(string(out), "bind() to 10.255.255.1:8080 failed (99: Cannot assign requested address)") {
				t.Errorf("nginx said %q", out)
			}
			continue
		}
		// nginx writes its pid file after it has forked: the command may return first.
		waitFor(t, "nginx's pid file", 10*time.Second, func() bool { return readPid(filepath.Join(ngDir, "logs/nginx.pid")) != 0 })
		master := readPid(filepath.Join(ngDir, "logs/nginx.pid"))
		if syscall.Kill(master, 0) != nil {
			t.Errorf("nginx returned without a running master in its pid file (%d)", master)
			continue
		}
		if body, err := rawGetClose(ngAddr); err != nil || body != "nginx" {
			t.Errorf("nginx right after it returned: %q %v", body, err)
		}
		syscall.Kill(master, syscall.SIGTERM)
		waitFor(t, "nginx to exit", 10*time.Second, func() bool { return syscall.Kill(master, 0) != nil })
	}
}

// notifyListener is systemd's end of NOTIFY_SOCKET: each datagram with the pid of
// the process that sent it.
type notifyListener struct {
	t    *testing.T
	conn *net.UnixConn
	path string
}

type notification struct {
	pid   int
	state string
}

func newNotifyListener(t *testing.T) *notifyListener {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
	if err != nil {
		t.Fatal(err)
	}
	return &notifyListener{t: t, conn: conn, path: path}
}

// next is the next notification, failing the test after timeout.
func (n *notifyListener) next(timeout time.Duration) notification {
	n.t.Helper()
	buf, oob := make([]byte, 4096), make([]byte, 1024)
	n.conn.SetReadDeadline(time.Now().Add(timeout))
	k, oobn, _, _, err := n.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		n.t.Fatalf("no notification: %v", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) == 0 {
		n.t.Fatalf("no sender credentials: %v", err)
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	if err != nil {
		n.t.Fatal(err)
	}
	return notification{pid: int(cred.Pid), state: string(buf[:k])}
}

// expect reads the next notification and checks who sent it and what it says.
func (n *notifyListener) expect(from int, state string) notification {
	n.t.Helper()
	got := n.next(10 * time.Second)
	if got.pid != from || got.state != state {
		n.t.Fatalf("notification %q from %d, want %q from %d", got.state, got.pid, state, from)
	}
	return got
}

// none checks that nothing arrives within d.
func (n *notifyListener) none(d time.Duration) {
	n.t.Helper()
	buf := make([]byte, 4096)
	n.conn.SetReadDeadline(time.Now().Add(d))
	if k, err := n.conn.Read(buf); err == nil {
		n.t.Fatalf("unexpected notification %q", buf[:k])
	}
}

// TestSystemdNotify: with NOTIFY_SOCKET (systemd's Type=notify) the instance sends
// READY=1 once it accepts, RELOADING=1 with MONOTONIC_USEC= and READY=1 around a
// reload, STOPPING=1 when it stops. A binary upgrade's new process, which gets
// NOTIFY_SOCKET though env directives filter the environment, declares itself the
// main process once it serves; quitting it before the old one hands the service
// back; the old one, retired after WINCH, leaves without STOPPING=1.
func TestSystemdNotify(t *testing.T) {
	n := newNotifyListener(t)
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": baseConfig(port, "env KEEP;\n")})
	in := start(t, dir, "NOTIFY_SOCKET="+n.path)
	old := in.cmd.Process.Pid
	n.expect(old, fmt.Sprintf("READY=1\nMAINPID=%d", old))
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("READY=1 before the port accepts: %v", err)
	}
	c.Close()

	syscall.Kill(old, syscall.SIGHUP)
	got := n.next(10 * time.Second)
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	usec, ok := strings.CutPrefix(got.state, "RELOADING=1\nMONOTONIC_USEC=")
	sent, _ := strconv.ParseInt(usec, 10, 64)
	if got.pid != old || !ok || sent <= 0 || sent > ts.Nano()/1000 || ts.Nano()/1000-sent > 10e6 {
		t.Fatalf("notification %q from %d, want RELOADING=1 and MONOTONIC_USEC= (now %d) from %d", got.state, got.pid, ts.Nano()/1000, old)
	}
	n.expect(old, fmt.Sprintf("READY=1\nMAINPID=%d", old))
	in.waitLog("configuration reloaded")

	// An upgrade rolled back: the new binary takes the service, then gives it back.
	syscall.Kill(old, syscall.SIGUSR2)
	first := in.newBinary()
	n.expect(first, fmt.Sprintf("READY=1\nMAINPID=%d", first))
	syscall.Kill(first, syscall.SIGQUIT)
	n.expect(first, fmt.Sprintf("MAINPID=%d", old))
	n.expect(old, fmt.Sprintf("READY=1\nMAINPID=%d", old))
	in.waitLog("binary upgrade undone")

	// An upgrade completed: the old binary leaves quietly, the new one stops the service.
	syscall.Kill(old, syscall.SIGUSR2)
	second := in.nextBinary(old)
	n.expect(second, fmt.Sprintf("READY=1\nMAINPID=%d", second))
	syscall.Kill(old, syscall.SIGWINCH)
	in.waitLog("no new connections, the new binary process")
	syscall.Kill(old, syscall.SIGQUIT)
	if code := in.waitExit(); code != 0 {
		t.Fatalf("old binary exit code %d", code)
	}
	n.none(200 * time.Millisecond)
	syscall.Kill(second, syscall.SIGQUIT)
	n.expect(second, "STOPPING=1")
}
