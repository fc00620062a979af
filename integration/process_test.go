package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// processLines are main- and events-context lines of stock nginx configurations:
// the ones that act on the process and the ones accepted without effect.
const processLines = `worker_priority 5;
worker_rlimit_core 1m;
pcre_jit on;
timer_resolution 100ms;
thread_pool default threads=32 max_queue=65536;
env KEEP_ME;
env SET_ME=from-config;
`

const processEvents = "events { accept_mutex off; accept_mutex_delay 500ms; multi_accept on; worker_connections 512; }\n"

const processHTTP = `server_names_hash_bucket_size 64;
server_names_hash_max_size 512;
types_hash_max_size 2048;
types_hash_bucket_size 64;
variables_hash_max_size 1024;
variables_hash_bucket_size 64;
map_hash_max_size 2048;
map_hash_bucket_size 64;
proxy_headers_hash_max_size 512;
proxy_headers_hash_bucket_size 64;
`

// TestProcessDirectives: worker_priority, worker_rlimit_core and working_directory
// act on the running process as in nginx's workers, and the tuning directives of
// nginx internals load. nginx -t accepts the same lines.
func TestProcessDirectives(t *testing.T) {
	addr := addrFor(t)
	wd := filepath.Join(t.TempDir(), "cores")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	body := processHTTP + "server { listen " + addr + "; location / { return 200 ok; } }"
	in := startMain(t, "worker_processes 1;\n"+processLines+"working_directory "+wd+";\n"+processEvents, body, addr)
	pid := in.cmd.Process.Pid

	limits := readFile(t, fmt.Sprintf("/proc/%d/limits", pid))
	if !strings.Contains(limits, "Max core file size        1048576              1048576") {
		t.Errorf("RLIMIT_CORE not 1m:\n%s", limits)
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != wd {
		t.Errorf("working directory %q %v, want %q", cwd, err, wd)
	}
	// Every thread, the loop's included, runs at nice 5 (field 19 of its stat).
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		stat := readFile(t, fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
		if fields[16] != "5" {
			t.Errorf("thread %s has nice %s, want 5", task.Name(), fields[16])
		}
	}
	if raw, err := roundTripRaw(t, addr, "GET / HTTP/1.0\r\n\r\n"); err != nil || !strings.HasSuffix(raw, "ok") {
		t.Fatalf("%q %v", raw, err)
	}

	// The same lines are nginx's.
	bin := nginxBinary(t)
	ngDir := writeTree(t, map[string]string{"conf/nginx.conf": "pid logs/nginx.pid;\nerror_log logs/error.log;\n" + processLines +
		"working_directory " + wd + ";\n" + processEvents + "http {\n" + processHTTP + "}\n", "logs/.keep": ""})
	out, err := exec.Command(bin, "-t", "-p", ngDir+"/", "-c", filepath.Join(ngDir, "conf/nginx.conf"), "-e", "stderr").CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t refuses the lines, so they are not nginx's:\n%s", out)
	}
}

// TestLoadModuleRefused: load_module is an error naming file:line and the modules
// compiled in, never ignored.
func TestLoadModuleRefused(t *testing.T) {
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "load_module modules/ngx_http_geoip_module.so;\nevents { }\n"})
	r := run(t, "-p", dir, "-t")
	if r.code != 1 || !strings.Contains(r.stderr, `load_module "modules/ngx_http_geoip_module.so": numaproxy has no dynamic modules; the modules compiled in are core, `) ||
		!strings.Contains(r.stderr, filepath.Join(dir, "conf/numaproxy.conf")+":1") {
		t.Fatalf("code %d stderr %q", r.code, r.stderr)
	}
}
