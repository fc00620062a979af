package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Differential tests run Debian's nginx, the specification, on the same http block
// as numaproxy and compare what clients and upstreams see.

// nginxInstance is an nginx master process started by a test in its own prefix.
type nginxInstance struct {
	dir string
	cmd *exec.Cmd
}

// nginxBinary returns nginx's path; without it the test is skipped, except in CI
// (CI=true), which installs nginx and so must not skip a comparison silently.
func nginxBinary(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/sbin/nginx"} {
			if _, serr := os.Stat(p); serr == nil {
				return p
			}
		}
		if os.Getenv("CI") != "" {
			t.Fatal("nginx is not installed; .ci/run installs it")
		}
		t.Skip("nginx is not installed: no comparison with it")
	}
	return path
}

// startNginx runs nginx (one worker, in the foreground, as root so it reads the
// test's files) with the given http block body and waits until every address in
// listen accepts. Its temp files and logs stay in its own prefix folder.
func startNginx(t *testing.T, httpBody string, listen ...string) *nginxInstance {
	t.Helper()
	return startNginxMain(t, "", httpBody, listen...)
}

// startNginxMain is startNginx with main-context directives of the caller's own,
// which may hold an events block.
func startNginxMain(t *testing.T, mainExtra, httpBody string, listen ...string) *nginxInstance {
	t.Helper()
	bin := nginxBinary(t)
	cfg := "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\npid logs/nginx.pid;\n" +
		"error_log logs/error.log info;\n" + withEvents(mainExtra) + "http {\n" +
		"  access_log off;\n  client_body_temp_path temp/body;\n  proxy_temp_path temp/proxy;\n" +
		"  fastcgi_temp_path temp/fastcgi;\n  uwsgi_temp_path temp/uwsgi;\n  scgi_temp_path temp/scgi;\n" +
		httpBody + "\n}\n"
	dir := writeTree(t, map[string]string{"conf/nginx.conf": cfg, "logs/.keep": "", "temp/.keep": ""})
	ng := &nginxInstance{dir: dir}
	ng.cmd = exec.Command(bin, "-p", dir+"/", "-c", filepath.Join(dir, "conf/nginx.conf"), "-e", filepath.Join(dir, "logs/error.log"))
	out, err := os.Create(filepath.Join(dir, "stderr.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ng.cmd.Stdout, ng.cmd.Stderr = out, out
	if err := ng.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { ng.cmd.Wait(); out.Close(); close(exited) }()
	t.Cleanup(func() {
		ng.cmd.Process.Signal(os.Interrupt) // TERM/INT: fast shutdown of master and worker
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			ng.cmd.Process.Kill()
			<-exited
		}
	})
	for _, a := range listen {
		waitFor(t, "nginx listening on "+a, 10*time.Second, func() bool {
			select {
			case <-exited:
				data, _ := os.ReadFile(filepath.Join(dir, "stderr.txt"))
				log, _ := os.ReadFile(filepath.Join(dir, "logs/error.log"))
				t.Fatalf("nginx exited: %s%s", data, log)
			default:
			}
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	return ng
}

// worker is the pid of the nginx master's single worker.
func (ng *nginxInstance) worker(t *testing.T) int {
	t.Helper()
	var pid int
	waitFor(t, "nginx's worker", 5*time.Second, func() bool {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", ng.cmd.Process.Pid, ng.cmd.Process.Pid))
		f := strings.Fields(string(data))
		if len(f) != 1 {
			return false
		}
		pid, _ = strconv.Atoi(f[0])
		return pid > 0
	})
	return pid
}

// errorLog returns nginx's error log so far.
func (ng *nginxInstance) errorLog() string {
	data, _ := os.ReadFile(filepath.Join(ng.dir, "logs/error.log"))
	return string(data)
}

// TestNginxHarness checks the harness itself: nginx starts on a test's http block
// and answers from it.
func TestNginxHarness(t *testing.T) {
	addr := addrFor(t)
	startNginx(t, "server { listen "+addr+"; location / { return 200 nginx-here; } }", addr)
	raw, err := roundTripRaw(t, addr, "GET / HTTP/1.0\r\n\r\n")
	if err != nil || !strings.HasSuffix(raw, "nginx-here") || !strings.Contains(raw, "Server: nginx") {
		t.Fatalf("%q %v", raw, err)
	}
}
