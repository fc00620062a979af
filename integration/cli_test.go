package integration

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestVersion(t *testing.T) {
	r := run(t, "-v")
	if r.code != 0 || !regexp.MustCompile(`^numaproxy version: numaproxy/\d+\.\d+\.\d+\n$`).MatchString(r.stderr) {
		t.Fatalf("-v: code %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, "-V")
	if r.code != 0 || !strings.Contains(r.stderr, "built by go1.") || !strings.Contains(r.stderr, "modules: core") {
		t.Fatalf("-V: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestHelpAndBadOption(t *testing.T) {
	if r := run(t, "-h"); r.code != 0 || !strings.Contains(r.stderr, "Usage: numaproxy") {
		t.Fatalf("-h: %+v", r)
	}
	r := run(t, "-k")
	if r.code != 1 || !strings.HasPrefix(r.stderr, `numaproxy: invalid option: "k"`) {
		t.Fatalf("-k: %+v", r)
	}
}

func TestConfigTestOK(t *testing.T) {
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "worker_processes 2;\nevents { }\n"})
	r := run(t, "-p", dir, "-t")
	file := filepath.Join(dir, "conf/numaproxy.conf")
	want := "numaproxy: the configuration file " + file + " syntax is ok\n" +
		"numaproxy: configuration file " + file + " test is successful\n"
	if r.code != 0 || r.stderr != want || r.stdout != "" {
		t.Fatalf("-t: code %d\nstderr %q\nwant   %q", r.code, r.stderr, want)
	}
	if r := run(t, "-p", dir, "-tq"); r.code != 0 || r.stderr != "" {
		t.Fatalf("-tq: %+v", r)
	}
}

// TestConfigTestErrors runs -t on a file with each class of error and checks the
// message names the right file and line.
func TestConfigTestErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		args  []string
		want  string // {{DIR}} stands for the prefix
	}{
		{"unknown directive", map[string]string{"site.conf": "events {}\n\nhttp {\n  server {\n    locaton / {}\n  }\n}\n"},
			nil, `unknown directive "locaton" in {{DIR}}/site.conf:5`},
		{"not allowed here", map[string]string{"site.conf": "http {\n  server_name x;\n}\n"},
			nil, `"server_name" directive is not allowed here in {{DIR}}/site.conf:2`},
		{"invalid number of arguments", map[string]string{"site.conf": "worker_processes;\n"},
			nil, `invalid number of arguments in "worker_processes" directive in {{DIR}}/site.conf:1`},
		{"duplicate", map[string]string{"site.conf": "pid a.pid;\n# comment\npid b.pid;\n"},
			nil, `"pid" directive is duplicate in {{DIR}}/site.conf:3`},
		{"missing semicolon", map[string]string{"site.conf": "http {\n  server {\n    listen 80\n  }\n}\n"},
			nil, `unexpected "}" in {{DIR}}/site.conf:4`},
		{"unexpected end of file", map[string]string{"site.conf": "http {\n  server {\n"},
			nil, `unexpected end of file, expecting "}" in {{DIR}}/site.conf:3`},
		{"unexpected brace", map[string]string{"site.conf": "events {}\n}\n"},
			nil, `unexpected "}" in {{DIR}}/site.conf:2`},
		{"invalid value", map[string]string{"site.conf": "worker_shutdown_timeout soon;\n"},
			nil, `invalid value "soon" in "worker_shutdown_timeout" directive in {{DIR}}/site.conf:1`},
		{"invalid flag-like value", map[string]string{"site.conf": "events {\n worker_connections lots;\n}\n"},
			nil, `invalid value "lots" in "worker_connections" directive in {{DIR}}/site.conf:2`},
		{"error in an included file", map[string]string{"site.conf": "http {\n include conf.d/*.conf;\n}\n", "conf.d/a.conf": "server {\n\n  listen 80 nonsense;\n}\n"},
			nil, `invalid parameter "nonsense" in {{DIR}}/conf.d/a.conf:3`},
		{"missing include", map[string]string{"site.conf": "\ninclude missing.conf;\n"},
			nil, `open() "{{DIR}}/missing.conf" failed (2: No such file or directory) in {{DIR}}/site.conf:2`},
		{"unterminated quote", map[string]string{"site.conf": "pid \"logs/x.pid;\n"},
			nil, `unexpected end of file, expecting ";" or "}" in {{DIR}}/site.conf:2`},
		{"error in -g", map[string]string{"site.conf": ""},
			[]string{"-g", "worker_processes none;"}, `invalid value "none" in "worker_processes" directive in command line`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeTree(t, tt.files)
			r := run(t, append([]string{"-p", dir, "-c", "site.conf", "-t"}, tt.args...)...)
			want := "numaproxy: [emerg] " + strings.ReplaceAll(tt.want, "{{DIR}}", dir) + "\n" +
				"numaproxy: configuration file " + dir + "/site.conf test failed\n"
			if r.code != 1 || r.stderr != want {
				t.Fatalf("code %d\nstderr %q\nwant   %q", r.code, r.stderr, want)
			}
		})
	}
}

func TestMissingConfigFile(t *testing.T) {
	dir := t.TempDir()
	r := run(t, "-p", dir, "-t")
	want := `numaproxy: [emerg] open() "` + dir + `/conf/numaproxy.conf" failed (2: No such file or directory)`
	if r.code != 1 || !strings.HasPrefix(r.stderr, want) {
		t.Fatalf("code %d stderr %q", r.code, r.stderr)
	}
}

// TestDumpGolden checks -T against a golden file: every file read, in order, each
// after nginx's header line.
func TestDumpGolden(t *testing.T) {
	dir, err := filepath.Abs("testdata/dump")
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, "-p", dir, "-c", "main.conf", "-T")
	if r.code != 0 {
		t.Fatalf("-T failed: %s", r.stderr)
	}
	got := strings.ReplaceAll(r.stdout, dir, "{{DIR}}")
	const golden = "testdata/dump.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("-T output differs from %s (run go test ./integration -run TestDumpGolden -update after checking):\n%s", golden, got)
	}
}

// TestNginxUsersFile parses an nginx user's file that uses only the core directives,
// unchanged. Where nginx is installed, nginx -t must accept the same file, which shows
// the file really is nginx's.
func TestNginxUsersFile(t *testing.T) {
	dir, err := filepath.Abs("testdata/nginx-user")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	r := run(t, "-p", work, "-c", filepath.Join(dir, "nginx.conf"), "-t")
	if r.code != 0 {
		t.Fatalf("numaproxy -t refused an nginx file:\n%s", r.stderr)
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Logf("nginx not installed: the file was not cross-checked with nginx -t")
		return
	}
	out, err := exec.Command(nginx, "-t", "-p", work, "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr").CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t refuses the test file, so it is not an nginx file:\n%s", out)
	}
}
