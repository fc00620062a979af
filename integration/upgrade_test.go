package integration

import (
	"fmt"
	"github.com/numaproxy/numaproxy/numa"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// upgradeConfig answers body on port with two loops; extra goes in the main context.
func upgradeConfig(port int, extra, body string) string {
	return fmt.Sprintf(`error_log logs/error.log info;
%s
worker_processes 2;
events { }
http {
  server { listen 127.0.0.1:%d; location / { return 200 "%s"; } }
}
`, extra, port, body)
}

// countSuffix is how many answers of the load ended with s.
func (l *load) countSuffix(s string) int64 {
	var n int64
	l.seen.Range(func(k, v any) bool {
		if strings.HasSuffix(k.(string), s) {
			n += v.(*atomic.Int64).Load()
		}
		return true
	})
	return n
}

// readPid is the pid a pid file holds, 0 if none.
func readPid(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// newBinary waits for the process a SIGUSR2 started to write its pid file and
// returns its pid; the test's end kills it if it still runs.
func (in *instance) newBinary() int {
	in.t.Helper()
	return in.nextBinary(in.cmd.Process.Pid)
}

// nextBinary is newBinary for a SIGUSR2 sent to process old.
func (in *instance) nextBinary(old int) int {
	in.t.Helper()
	waitFor(in.t, "the new binary's pid file", 10*time.Second, func() bool {
		pid := readPid(in.path("logs/numaproxy.pid"))
		return pid != 0 && pid != old
	})
	pid := readPid(in.path("logs/numaproxy.pid"))
	in.t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// quitNew ends the new binary with SIGQUIT and waits until it has removed its pid
// file (once its parent is gone nobody here can wait for it).
func quitNew(t *testing.T, in *instance, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new binary to exit", 10*time.Second, func() bool { return readPid(in.path("logs/numaproxy.pid")) != pid })
}

// logClean fails the test if the shared error log has an error or worse (a lost
// BPF steering, say).
func logClean(t *testing.T, in *instance) {
	t.Helper()
	data, _ := os.ReadFile(in.path("logs/error.log"))
	for _, line := range strings.Split(string(data), "\n") {
		for _, level := range []string{"[error]", "[crit]", "[alert]", "[emerg]"} {
			if strings.Contains(line, level) {
				t.Errorf("error log: %s", line)
			}
		}
	}
}

// twoCPUs returns two CPUs this process may run on, to simulate two domains.
func twoCPUs(t *testing.T) (int, int) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		t.Skip("needs two CPUs to simulate two domains")
	}
	return cpus[0], cpus[1]
}

// askFromCPU does n requests, each on a new connection, from a thread pinned to
// cpu: on loopback the SYN is processed there, so the BPF program steers the
// connection to that CPU's domain.
func askFromCPU(t *testing.T, cpu int, addr string, n int) []string {
	t.Helper()
	var bodies []string
	err := numa.OnCPU(cpu, func() error {
		for i := 0; i < n; i++ {
			body, err := rawGetClose(addr)
			if err != nil {
				return err
			}
			bodies = append(bodies, body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bodies
}

// TestBinaryUpgradeUnderLoad is nginx's binary upgrade under keep-alive and
// connection-per-request load: SIGUSR2 starts the binary again on the same
// sockets, SIGWINCH stops the old one's accepting, SIGQUIT ends it; no request
// fails. With two simulated NUMA domains the new process steers the connections.
func TestBinaryUpgradeUnderLoad(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testBinaryUpgrade(t, false) })
	t.Run("numa_domains", func(t *testing.T) { testBinaryUpgrade(t, true) })
}

// domainsSetup is the configuration and answer of an upgrade test: with domains,
// two simulated NUMA domains and answers that name the domain.
type domainsSetup struct {
	on         bool
	cpu0, cpu1 int
	extra      string
}

func newDomainsSetup(t *testing.T, on bool) domainsSetup {
	if !on {
		return domainsSetup{}
	}
	cpu0, cpu1 := twoCPUs(t)
	return domainsSetup{on: true, cpu0: cpu0, cpu1: cpu1, extra: fmt.Sprintf("numa_domains %d %d;", cpu0, cpu1)}
}

// startOldUnderLoad starts the instance an upgrade test replaces, answering "old",
// with keep-alive and connection-per-request load already answered by it.
func startOldUnderLoad(t *testing.T, d domainsSetup) (port int, addr string, old *instance, l *load) {
	t.Helper()
	port = freePort(t)
	addr = "127.0.0.1:" + strconv.Itoa(port)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": upgradeConfig(port, d.extra, d.body("old"))})
	old = start(t, dir)
	waitFor(t, "the server answering", 10*time.Second, func() bool { _, err := rawGetClose(addr); return err == nil })
	l = startLoad(t, addr, 4, 4)
	t.Cleanup(l.cancel)
	waitFor(t, "answers from the old binary", 10*time.Second, func() bool { return l.countSuffix("old") > 100 })
	return port, addr, old, l
}

func (d domainsSetup) body(name string) string {
	if d.on {
		return "$numa_node " + name
	}
	return name
}

// checkSteered asks from each domain's CPU: every connection is answered by name's
// loop of that domain, which shows that name's process steers the sockets.
func (d domainsSetup) checkSteered(t *testing.T, addr, name string) {
	t.Helper()
	if !d.on {
		return
	}
	for want, cpu := range []int{d.cpu0, d.cpu1} {
		for _, b := range askFromCPU(t, cpu, addr, 100) {
			if b != strconv.Itoa(want)+" "+name {
				t.Fatalf("a client on CPU %d was answered %q, want %q", cpu, b, strconv.Itoa(want)+" "+name)
			}
		}
	}
}

func testBinaryUpgrade(t *testing.T, domains bool) {
	d := newDomainsSetup(t, domains)
	extra, body := d.extra, d.body
	port, addr, old, l := startOldUnderLoad(t, d)

	// The new process reads the configuration file as it is now.
	if err := os.WriteFile(old.path("conf/numaproxy.conf"), []byte(upgradeConfig(port, extra, body("new"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := old.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	newPid := old.newBinary()
	if pid := readPid(old.path("logs/numaproxy.pid.oldbin")); pid != old.cmd.Process.Pid {
		t.Fatalf(".oldbin holds %d, want the old pid %d", pid, old.cmd.Process.Pid)
	}
	old.waitLog(fmt.Sprintf("start new binary process %d", newPid))
	waitFor(t, "answers from the new binary", 10*time.Second, func() bool { return l.countSuffix("new") > 100 })

	// One upgrade at a time: neither process starts another now.
	old.cmd.Process.Signal(syscall.SIGUSR2)
	old.waitLog(fmt.Sprintf("the changing binary signal is ignored: the new binary process %d is running", newPid))
	syscall.Kill(newPid, syscall.SIGUSR2)
	old.waitLog(fmt.Sprintf("the changing binary signal is ignored: the old binary process %d is still running", old.cmd.Process.Pid))

	// WINCH: the old one stops accepting and finishes its connections.
	if err := old.cmd.Process.Signal(syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	old.waitLog("old binary's connections finished")
	// Answers the old one sent before it finished may still be on their way to
	// the counters: count from a little later.
	newAnswers := l.countSuffix("new")
	waitFor(t, "more answers after WINCH", 10*time.Second, func() bool { return l.countSuffix("new") > newAnswers+100 })
	oldAnswers, newAnswers := l.countSuffix("old"), l.countSuffix("new")
	waitFor(t, "more answers after WINCH", 10*time.Second, func() bool { return l.countSuffix("new") > newAnswers+300 })
	if n := l.countSuffix("old"); n != oldAnswers {
		t.Fatalf("the old binary answered %d requests after its connections finished", n-oldAnswers)
	}
	if !old.alive() {
		t.Fatal("the old binary exited on SIGWINCH; it stays until SIGQUIT")
	}
	// The sockets moved with their steering: each domain of the new process
	// serves the connections that arrive on its CPU.
	d.checkSteered(t, addr, "new")

	if err := old.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	if code := old.waitExit(); code != 0 {
		t.Fatalf("the old binary exited with %d", code)
	}
	if _, err := os.Stat(old.path("logs/numaproxy.pid.oldbin")); !os.IsNotExist(err) {
		t.Fatalf(".oldbin left behind: %v", err)
	}
	if pid := readPid(old.path("logs/numaproxy.pid")); pid != newPid {
		t.Fatalf("the pid file holds %d after the old binary exited, want %d", pid, newPid)
	}
	newAnswers = l.countSuffix("new")
	waitFor(t, "answers after the old binary exited", 10*time.Second, func() bool { return l.countSuffix("new") > newAnswers+100 })

	// The next release: the process the upgrade started upgrades in turn (its
	// sockets were inherited), and QUIT alone retires it.
	if err := os.WriteFile(old.path("conf/numaproxy.conf"), []byte(upgradeConfig(port, extra, body("newer"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(newPid, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	newerPid := old.nextBinary(newPid)
	waitFor(t, "answers from the third binary", 10*time.Second, func() bool { return l.countSuffix("newer") > 100 })
	syscall.Kill(newPid, syscall.SIGQUIT)
	waitFor(t, "the second binary to exit", 10*time.Second, func() bool {
		_, err := os.Stat(old.path("logs/numaproxy.pid.oldbin"))
		return os.IsNotExist(err)
	})
	newerAnswers := l.countSuffix("newer")
	waitFor(t, "answers after the second binary exited", 10*time.Second, func() bool { return l.countSuffix("newer") > newerAnswers+100 })
	d.checkSteered(t, addr, "newer")

	l.stop(t)
	t.Logf("%d requests answered (%d old, %d new, %d newer), %d failed", l.ok.Load(), l.countSuffix("old"), l.countSuffix("new"), l.countSuffix("newer"), l.failed.Load())
	if l.failed.Load() != 0 {
		t.Fatalf("%d requests failed", l.failed.Load())
	}
	quitNew(t, old, newerPid)
	logClean(t, old)
}

// TestBinaryUpgradeFails: a new binary that cannot start (the configuration is now
// invalid) exits, and the old one carries on as if nothing happened: its pid file,
// its answers, no failed request; a later good upgrade works.
func TestBinaryUpgradeFails(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testBinaryUpgradeFails(t, false) })
	t.Run("numa_domains", func(t *testing.T) { testBinaryUpgradeFails(t, true) })
}

func testBinaryUpgradeFails(t *testing.T, domains bool) {
	d := newDomainsSetup(t, domains)
	port, addr, old, l := startOldUnderLoad(t, d)

	conf := old.path("conf/numaproxy.conf")
	bad := strings.Replace(upgradeConfig(port, d.extra, d.body("new")), "location /", "locaton /", 1)
	if err := os.WriteFile(conf, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := old.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	old.waitLog("exited with code 1")
	old.waitLog("binary upgrade undone: this process carries on")
	if pid := readPid(old.path("logs/numaproxy.pid")); pid != old.cmd.Process.Pid {
		t.Fatalf("the pid file holds %d, want the old pid %d back", pid, old.cmd.Process.Pid)
	}
	if _, err := os.Stat(old.path("logs/numaproxy.pid.oldbin")); !os.IsNotExist(err) {
		t.Fatalf(".oldbin left behind: %v", err)
	}
	// WINCH without a running new binary would leave nothing serving: refused.
	old.cmd.Process.Signal(syscall.SIGWINCH)
	old.waitLog("the shutting down signal is ignored: no new binary process is running")
	n := l.countSuffix("old")
	waitFor(t, "answers after the failed upgrade", 10*time.Second, func() bool { return l.countSuffix("old") > n+100 })
	d.checkSteered(t, addr, "old") // steering restored

	// A good configuration: the upgrade goes through, QUIT alone retires the old one.
	if err := os.WriteFile(conf, []byte(upgradeConfig(port, d.extra, d.body("new"))), 0o644); err != nil {
		t.Fatal(err)
	}
	old.cmd.Process.Signal(syscall.SIGUSR2)
	newPid := old.newBinary()
	waitFor(t, "answers from the new binary", 10*time.Second, func() bool { return l.countSuffix("new") > 100 })
	old.cmd.Process.Signal(syscall.SIGQUIT)
	if code := old.waitExit(); code != 0 {
		t.Fatalf("the old binary exited with %d", code)
	}
	n = l.countSuffix("new")
	waitFor(t, "answers after the old binary exited", 10*time.Second, func() bool { return l.countSuffix("new") > n+100 })
	l.stop(t)
	t.Logf("%d requests answered (%d old, %d new), %d failed", l.ok.Load(), l.countSuffix("old"), l.countSuffix("new"), l.failed.Load())
	if l.failed.Load() != 0 {
		t.Fatalf("%d requests failed", l.failed.Load())
	}
	if _, err := os.Stat(old.path("logs/numaproxy.pid.oldbin")); !os.IsNotExist(err) {
		t.Fatalf(".oldbin left behind: %v", err)
	}
	quitNew(t, old, newPid)
	logClean(t, old)
}

// TestBinaryUpgradeRollback is nginx's way back: after SIGWINCH, SIGQUIT to the new
// binary makes the old one accept again on the same sockets and take its pid file
// back, with no failed request.
func TestBinaryUpgradeRollback(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testBinaryUpgradeRollback(t, false) })
	t.Run("numa_domains", func(t *testing.T) { testBinaryUpgradeRollback(t, true) })
}

func testBinaryUpgradeRollback(t *testing.T, domains bool) {
	d := newDomainsSetup(t, domains)
	port, addr, old, l := startOldUnderLoad(t, d)
	if err := os.WriteFile(old.path("conf/numaproxy.conf"), []byte(upgradeConfig(port, d.extra, d.body("new"))), 0o644); err != nil {
		t.Fatal(err)
	}
	old.cmd.Process.Signal(syscall.SIGUSR2)
	newPid := old.newBinary()
	waitFor(t, "answers from the new binary", 10*time.Second, func() bool { return l.countSuffix("new") > 100 })
	old.cmd.Process.Signal(syscall.SIGWINCH)
	old.waitLog("old binary's connections finished")
	// A reload of the retired process would change nothing it serves: refused.
	old.cmd.Process.Signal(syscall.SIGHUP)
	old.waitLog("ignored: this process no longer accepts connections")

	quitNew(t, old, newPid)
	old.waitLog(fmt.Sprintf("new binary process %d exited with code 0", newPid))
	old.waitLog("binary upgrade undone: this process accepts connections again")
	if pid := readPid(old.path("logs/numaproxy.pid")); pid != old.cmd.Process.Pid {
		t.Fatalf("the pid file holds %d, want the old pid %d back", pid, old.cmd.Process.Pid)
	}
	n := l.countSuffix("old")
	waitFor(t, "the old binary answering again", 10*time.Second, func() bool { return l.countSuffix("old") > n+300 })
	d.checkSteered(t, addr, "old") // the new binary let go of the sockets' steering at exit
	l.stop(t)
	t.Logf("%d requests answered (%d old, %d new), %d failed", l.ok.Load(), l.countSuffix("old"), l.countSuffix("new"), l.failed.Load())
	if l.failed.Load() != 0 {
		t.Fatalf("%d requests failed", l.failed.Load())
	}
	old.cmd.Process.Signal(syscall.SIGQUIT)
	if code := old.waitExit(); code != 0 {
		t.Fatalf("the old binary exited with %d", code)
	}
	logClean(t, old)
}

// TestBinaryUpgradeRunsTheFileOnDisk: SIGUSR2 runs whatever is at the binary's path
// now (a package upgrade renames a new file over it), with the sockets named in
// NUMAPROXY_LISTENERS; a file that cannot be executed changes nothing.
func TestBinaryUpgradeRunsTheFileOnDisk(t *testing.T) {
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": upgradeConfig(port, "", "old")})
	exe, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	path := dir + "/sbin/numaproxy"
	if err := os.MkdirAll(dir+"/sbin", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	saved := binary
	binary = path
	defer func() { binary = saved }()
	old := start(t, dir)
	waitFor(t, "the server answering", 10*time.Second, func() bool { _, err := rawGetClose(addr); return err == nil })

	// The "new release" reports what it was handed and exits.
	script := "#!/bin/sh\necho \"$NUMAPROXY_LISTENERS $*\" > " + dir + "/handed\nexit 3\n"
	if err := os.WriteFile(path+".new", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	old.cmd.Process.Signal(syscall.SIGUSR2)
	old.waitLog("exited with code 3")
	old.waitLog("binary upgrade undone: this process carries on")
	data, _ := os.ReadFile(dir + "/handed")
	if got, want := strings.TrimSpace(string(data)), addr+"=3,4 -p "+dir; got != want {
		t.Fatalf("the new binary was handed %q, want %q", got, want)
	}

	// Not executable: execve fails, nothing else happens.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	old.cmd.Process.Signal(syscall.SIGUSR2)
	old.waitLog(`[alert] ` + strconv.Itoa(old.cmd.Process.Pid))
	old.waitLog(`execve() "` + path + `" failed (13: Permission denied)`)
	waitFor(t, "the undone upgrade", 10*time.Second, func() bool {
		data, _ := os.ReadFile(old.path("logs/error.log"))
		return strings.Count(string(data), "binary upgrade undone") == 2
	})
	if pid := readPid(old.path("logs/numaproxy.pid")); pid != old.cmd.Process.Pid {
		t.Fatalf("the pid file holds %d, want the old pid %d back", pid, old.cmd.Process.Pid)
	}
	if b, err := rawGetClose(addr); err != nil || b != "old" {
		t.Fatalf("after failed upgrades: %q, %v", b, err)
	}
}
