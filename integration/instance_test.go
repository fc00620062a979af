package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/internal/testport"
)

// instance is a numaproxy process started by a test in its own prefix folder.
type instance struct {
	t      *testing.T
	dir    string
	cmd    *exec.Cmd
	exited chan error
}

// freePort finds a TCP port on 127.0.0.1 that nothing listens on right now.
func freePort(t *testing.T) int { return testport.Free(t) }

// start runs numaproxy in the foreground on dir/conf/numaproxy.conf, with env added
// to the test's environment, and waits until it has written its pid file.
func start(t *testing.T, dir string, env ...string) *instance {
	t.Helper()
	in := &instance{t: t, dir: dir, exited: make(chan error, 1)}
	// Registered first so it runs last, after the process is gone and its logs are
	// final: a panic recovered on a loop is a defect even when the client saw nothing.
	t.Cleanup(in.checkNoPanic)
	in.cmd = exec.Command(binary, "-p", dir)
	if len(env) > 0 {
		in.cmd.Env = append(os.Environ(), env...)
	}
	out, err := os.Create(filepath.Join(dir, "stderr.txt"))
	if err != nil {
		t.Fatal(err)
	}
	in.cmd.Stdout, in.cmd.Stderr = out, out
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { in.exited <- in.cmd.Wait(); out.Close() }()
	t.Cleanup(func() {
		in.cmd.Process.Kill()
		<-in.exited
	})
	waitFor(t, "the pid file", 10*time.Second, func() bool {
		data, err := os.ReadFile(in.path("logs/numaproxy.pid"))
		return err == nil && strings.TrimSpace(string(data)) == strconv.Itoa(in.cmd.Process.Pid)
	})
	return in
}

// checkNoPanic fails the test if the instance logged a recovered panic in any log
// file under its prefix or on its standard error.
func (in *instance) checkNoPanic() {
	files, _ := filepath.Glob(in.path("logs/*"))
	for _, f := range append(files, in.path("stderr.txt")) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "panic") {
				if len(line) > 300 {
					line = line[:300] + "..."
				}
				in.t.Errorf("%s: %s", filepath.Base(f), line)
				break
			}
		}
	}
}

func (in *instance) path(name string) string { return filepath.Join(in.dir, name) }

// signal runs "numaproxy -p dir -s name" and expects it to succeed.
func (in *instance) signal(name string) {
	in.t.Helper()
	if r := run(in.t, "-p", in.dir, "-s", name); r.code != 0 {
		in.t.Fatalf("-s %s: %+v", name, r)
	}
}

// waitLog waits until the error log contains s.
func (in *instance) waitLog(s string) {
	in.t.Helper()
	waitFor(in.t, "error log line "+s, 10*time.Second, func() bool { return fileContains(in.path("logs/error.log"), s) })
}

// waitExit waits for the process to end and returns its exit code.
func (in *instance) waitExit() int {
	in.t.Helper()
	select {
	case err := <-in.exited:
		in.exited <- err // for Cleanup
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode()
			}
			in.t.Fatal(err)
		}
		return 0
	case <-time.After(10 * time.Second):
		in.t.Fatal("numaproxy did not exit")
	}
	return -1
}

func (in *instance) alive() bool { return in.cmd.Process.Signal(syscall.Signal(0)) == nil }

func baseConfig(port int, extra string) string {
	return "error_log logs/error.log info;\n" + extra + "events { }\nhttp {\n  server { listen 127.0.0.1:" + strconv.Itoa(port) + "; }\n}\n"
}

func TestSignalsReloadReopenQuit(t *testing.T) {
	port := freePort(t)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": baseConfig(port, "")})
	in := start(t, dir)
	in.waitLog("started")

	// Reopen: after a rotation the log is written to a new file.
	if err := os.Rename(in.path("logs/error.log"), in.path("logs/error.log.1")); err != nil {
		t.Fatal(err)
	}
	in.signal("reopen")
	in.waitLog("logs reopened")
	if !fileContains(in.path("logs/error.log.1"), "signal 10 (SIGUSR1) received, reopening logs") {
		t.Fatal("the rotated file lacks the reopen notice")
	}

	// A bad configuration on reload is reported with file:line and changes nothing.
	conf := in.path("conf/numaproxy.conf")
	if err := os.WriteFile(conf, []byte("error_log logs/error.log info;\n\nbogus on;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// -s reload reads the configuration first, as nginx does, and refuses a bad one...
	if r := run(t, "-p", dir, "-s", "reload"); r.code != 1 || !strings.Contains(r.stderr, `unknown directive "bogus" in `+conf+`:3`) {
		t.Fatalf("-s reload with a bad config: %+v", r)
	}
	// ...and SIGHUP sent directly (systemd's ExecReload) is refused by the instance.
	if err := in.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	in.waitLog(`[emerg] `)
	in.waitLog(`unknown directive "bogus" in ` + conf + `:3`)
	in.waitLog("configuration not changed")
	if !in.alive() {
		t.Fatal("a bad reload stopped the instance")
	}

	// A good one is taken.
	if err := os.WriteFile(conf, []byte(baseConfig(port, "worker_processes 1;\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	in.signal("reload")
	in.waitLog("configuration reloaded")

	in.signal("quit")
	if code := in.waitExit(); code != 0 {
		t.Fatalf("exit code %d after quit", code)
	}
	if _, err := os.Stat(in.path("logs/numaproxy.pid")); !os.IsNotExist(err) {
		t.Fatalf("pid file left behind: %v", err)
	}
}

func TestSignalStop(t *testing.T) {
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": baseConfig(freePort(t), "")})
	in := start(t, dir)
	in.signal("stop")
	if code := in.waitExit(); code != 0 {
		t.Fatalf("exit code %d after stop", code)
	}
	if !fileContains(in.path("logs/error.log"), "signal 15 (SIGTERM) received, exiting") {
		t.Fatal("stop not logged")
	}
}

func TestSignalWithoutInstance(t *testing.T) {
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": baseConfig(freePort(t), "")})
	r := run(t, "-p", dir, "-s", "reload")
	want := `numaproxy: [error] open() "` + dir + `/logs/numaproxy.pid" failed (2: No such file or directory)`
	if r.code != 1 || !strings.HasPrefix(r.stderr, want) {
		t.Fatalf("code %d stderr %q", r.code, r.stderr)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "logs/numaproxy.pid"), []byte("garbage\n"), 0o644)
	r = run(t, "-p", dir, "-s", "quit")
	if r.code != 1 || !strings.Contains(r.stderr, `[error] invalid PID number "garbage"`) {
		t.Fatalf("code %d stderr %q", r.code, r.stderr)
	}
}

func TestPidOffRefusesSignal(t *testing.T) {
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "pid off;\n"})
	r := run(t, "-p", dir, "-s", "reload")
	if r.code != 1 || !strings.Contains(r.stderr, `"pid" is off`) {
		t.Fatalf("code %d stderr %q", r.code, r.stderr)
	}
}
