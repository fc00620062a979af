package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeFiles lays out files (name → content) under a new folder and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func load(t *testing.T, dir string, extra string) (*Config, error) {
	t.Helper()
	return Load(Options{Registry: MustRegistry(), Prefix: dir, File: "main.conf", Directives: extra})
}

func mustLoad(t *testing.T, files map[string]string) *Config {
	t.Helper()
	cfg, err := load(t, writeFiles(t, files), "")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return cfg
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		extra string // -g
		want  string // error text with the file relative to the folder
	}{
		{"unknown directive", map[string]string{"main.conf": "worker_processes 1;\nlocaton / {}\n"},
			"", `unknown directive "locaton" in main.conf:2`},
		{"not allowed here", map[string]string{"main.conf": "http {\n  listen 80;\n}\n"},
			"", `"listen" directive is not allowed here in main.conf:2`},
		{"arity", map[string]string{"main.conf": "\n\nworker_processes 1 2;\n"},
			"", `invalid number of arguments in "worker_processes" directive in main.conf:3`},
		{"dual-stack listen", map[string]string{"main.conf": "http {\n server {\n  listen [::]:80 ipv6only=off;\n }\n}\n"},
			"", `"ipv6only=off" (one socket for IPv4 and IPv6) is not supported: listen on the IPv4 address as well in main.conf:3`},
		{"arity zero", map[string]string{"main.conf": "pid;\n"},
			"", `invalid number of arguments in "pid" directive in main.conf:1`},
		{"duplicate", map[string]string{"main.conf": "pid a;\npid b;\n"},
			"", `"pid" directive is duplicate in main.conf:2`},
		{"duplicate across include", map[string]string{"main.conf": "pid a;\ninclude more.conf;\n", "more.conf": "\npid b;\n"},
			"", `"pid" directive is duplicate in more.conf:2`},
		{"duplicate of -g", map[string]string{"main.conf": "\npid b;\n"},
			"pid a;", `"pid" directive is duplicate in main.conf:2`},
		{"error in -g", map[string]string{"main.conf": ""},
			"nonsense 1;", `unknown directive "nonsense" in command line`},
		{"block without brace", map[string]string{"main.conf": "events;\n"},
			"", `directive "events" has no opening "{" in main.conf:1`},
		{"missing semicolon", map[string]string{"main.conf": "pid a {\n}\n"},
			"", `directive "pid" is not terminated by ";" in main.conf:1`},
		{"missing semicolon before brace", map[string]string{"main.conf": "http {\n  server {\n    listen 80\n  }\n}\n"},
			"", `unexpected "}" in main.conf:4`},
		{"unexpected close", map[string]string{"main.conf": "pid a;\n}\n"},
			"", `unexpected "}" in main.conf:2`},
		{"unexpected eof in block", map[string]string{"main.conf": "http {\n  server {\n}\n"},
			"", `unexpected end of file, expecting "}" in main.conf:4`},
		{"unexpected eof in directive", map[string]string{"main.conf": "pid a"},
			"", `unexpected end of file, expecting ";" or "}" in main.conf:1`},
		{"block must close in its file", map[string]string{"main.conf": "http {\ninclude s.conf;\n}\n", "s.conf": "server {\n"},
			"", `unexpected end of file, expecting "}" in s.conf:2`},
		{"invalid number", map[string]string{"main.conf": "worker_processes many;\n"},
			"", `invalid value "many" in "worker_processes" directive in main.conf:1`},
		{"invalid time", map[string]string{"main.conf": "worker_shutdown_timeout 10x;\n"},
			"", `invalid value "10x" in "worker_shutdown_timeout" directive in main.conf:1`},
		{"invalid size-like number", map[string]string{"main.conf": "events { worker_connections 1k; }\n"},
			"", `invalid value "1k" in "worker_connections" directive in main.conf:1`},
		{"invalid level", map[string]string{"main.conf": "error_log stderr loud;\n"},
			"", `invalid value "loud" in "error_log" directive, it must be one of`},
		{"use other than epoll", map[string]string{"main.conf": "events { use kqueue; }\n"},
			"", `invalid value "kqueue" in "use" directive`},
		{"missing include", map[string]string{"main.conf": "\ninclude nothere.conf;\n"},
			"", `open() "nothere.conf" failed (2: No such file or directory) in main.conf:2`},
		{"include cycle", map[string]string{"main.conf": "include a.conf;\n", "a.conf": "include b.conf;\n", "b.conf": "\ninclude a.conf;\n"},
			"", `include cycle: "a.conf" includes itself in b.conf:2`},
		{"listen bad port", map[string]string{"main.conf": "http { server { listen 127.0.0.1:99999; } }\n"},
			"", `invalid value "127.0.0.1:99999" in "listen" directive, invalid port in main.conf:1`},
		{"listen bad parameter", map[string]string{"main.conf": "http { server {\nlisten 80 fast; } }\n"},
			"", `invalid parameter "fast" in main.conf:2`},
		{"listen http2 not yet", map[string]string{"main.conf": "http { server {\nlisten 443 http2; } }\n"},
			"", `the "http2" parameter of "listen" is not supported yet in main.conf:2`},
		{"duplicate default server", map[string]string{"main.conf": "http {\nserver { listen 80 default_server; }\nserver { listen 80 default_server; }\n}\n"},
			"", `a duplicate default server for 0.0.0.0:80 in main.conf:3`},
		{"duplicate listen options", map[string]string{"main.conf": "http {\nserver { listen 80 backlog=10; }\nserver { listen 80 reuseport; }\n}\n"},
			"", `duplicate listen options for 0.0.0.0:80 in main.conf:3`},
		{"bad wildcard", map[string]string{"main.conf": "http { server {\nserver_name www.*.com; } }\n"},
			"", `invalid value "www.*.com" in "server_name" directive, invalid server name or wildcard in main.conf:2`},
		{"bad server regex", map[string]string{"main.conf": "http { server {\nserver_name ~^(www; } }\n"},
			"", `pcre2_compile() failed: missing closing parenthesis in "^(www" in main.conf:2`},
		{"bad location modifier", map[string]string{"main.conf": "http { server {\nlocation ! /a {} } }\n"},
			"", `invalid location modifier "!" in main.conf:2`},
		{"bad location regex", map[string]string{"main.conf": "http { server {\nlocation ~ ^/(a {} } }\n"},
			"", `pcre2_compile() failed: missing closing parenthesis in "^/(a" in main.conf:2`},
		{"location regex RE2 cannot run", map[string]string{"main.conf": "http { server {\nlocation ~ ^/(a)\\1$ {} } }\n"},
			"", `in main.conf:2`},
		{"duplicate location", map[string]string{"main.conf": "http { server {\nlocation /a {}\nlocation ^~ /a {} } }\n"},
			"", `duplicate location "/a" in main.conf:3`},
		{"location outside parent", map[string]string{"main.conf": "http { server {\nlocation /a {\n location /b {} } } }\n"},
			"", `location "/b" is outside location "/a" in main.conf:3`},
		{"location inside exact", map[string]string{"main.conf": "http { server {\nlocation = /a {\n location /a/b {} } } }\n"},
			"", `location "/a/b" cannot be inside the exact location "/a" in main.conf:3`},
		{"nested named", map[string]string{"main.conf": "http { server {\nlocation /a {\n location @x {} } } }\n"},
			"", `named location "@x" can be on the server level only in main.conf:3`},
		{"second http", map[string]string{"main.conf": "http {}\nhttp {}\n"},
			"", `"http" directive is duplicate in main.conf:2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			_, err := load(t, dir, tt.extra)
			if err == nil {
				t.Fatalf("loaded; want error %q", tt.want)
			}
			got := strings.ReplaceAll(err.Error(), dir+"/", "")
			got = strings.ReplaceAll(got, dir, "main")
			if !strings.Contains(got, tt.want) {
				t.Fatalf("error\n  %s\nwant it to contain\n  %s", got, tt.want)
			}
		})
	}
}

func TestLoadMain(t *testing.T) {
	cfg := mustLoad(t, map[string]string{"main.conf": `
worker_processes auto;
worker_rlimit_nofile 8192;
worker_shutdown_timeout 1m30s;
pid /run/numaproxy.pid;
error_log logs/error.log warn;
error_log stderr;
events { worker_connections 1024; use epoll; }
`})
	m := cfg.Main
	if m.WorkerProcesses != 0 || m.WorkerRlimitNofile != 8192 || m.WorkerShutdownTimeout != 90*time.Second {
		t.Fatalf("main = %+v", m)
	}
	if m.PidFile != "/run/numaproxy.pid" {
		t.Fatalf("pid = %q", m.PidFile)
	}
	if len(m.ErrorLogs) != 2 || m.ErrorLogs[0].Path != filepath.Join(cfg.Prefix, "logs/error.log") ||
		m.ErrorLogs[0].Level != "warn" || m.ErrorLogs[1].Path != "stderr" || m.ErrorLogs[1].Level != "error" {
		t.Fatalf("error logs = %+v", m.ErrorLogs)
	}
	if cfg.Events.WorkerConnections != 1024 {
		t.Fatalf("worker_connections = %d", cfg.Events.WorkerConnections)
	}
}

func TestLoadDefaults(t *testing.T) {
	cfg := mustLoad(t, map[string]string{"main.conf": "http { server { } }\n"})
	if cfg.Main.WorkerProcesses != 1 || cfg.Events.WorkerConnections != 512 {
		t.Fatalf("defaults: %+v %+v", cfg.Main, cfg.Events)
	}
	if cfg.Main.PidFile != filepath.Join(cfg.Prefix, "logs/numaproxy.pid") {
		t.Fatalf("pid default = %q", cfg.Main.PidFile)
	}
	l := cfg.HTTP.Servers[0].Listens
	if len(l) != 1 || l[0].Addr.String() != "0.0.0.0:80" {
		t.Fatalf("default listen = %+v", l)
	}
}

func TestListenForms(t *testing.T) {
	tests := map[string]string{
		"80":               "0.0.0.0:80",
		"*:8080":           "0.0.0.0:8080",
		"127.0.0.1:8080":   "127.0.0.1:8080",
		"127.0.0.1":        "127.0.0.1:80",
		"[::]:80":          "[::]:80",
		"[::1]":            "[::1]:80",
		"localhost:8081":   "127.0.0.1:8081",
		"[::ffff:1.2.3.4]": "1.2.3.4:80",
	}
	for in, want := range tests {
		l, err := parseListen(in)
		if err != nil || l.Addr.String() != want {
			t.Errorf("parseListen(%q) = %v, %v; want %s", in, l.Addr, err, want)
		}
	}
	for _, bad := range []string{"", ":80", "1.2.3.4:", "[::1", "[::1]80", "unix:/tmp/s", "host.invalid:80", "80x"} {
		if _, err := parseListen(bad); err == nil {
			t.Errorf("parseListen(%q) accepted", bad)
		}
	}
}

func TestListenParameters(t *testing.T) {
	cfg := mustLoad(t, map[string]string{"main.conf": `http { server {
	listen 8080 default_server reuseport backlog=4096;
	listen [::]:8080 ipv6only=on;
} }`})
	ls := cfg.HTTP.Servers[0].Listens
	if !ls[0].DefaultServer || !ls[0].ReusePort || ls[0].Socket.Backlog != 4096 || ls[0].Pos.Line != 2 {
		t.Fatalf("listen 0 = %+v", ls[0])
	}
	if !ls[1].Addr.Addr().Is6() {
		t.Fatalf("listen 1 = %+v", ls[1])
	}
}

func TestServerNames(t *testing.T) {
	cfg := mustLoad(t, map[string]string{"main.conf": `http { server {
	server_name Example.COM *.example.org www.example.* .example.net ~^w(?<n>\d+)\.x$ "";
} }`})
	var got []string
	for _, n := range cfg.HTTP.Servers[0].Names {
		got = append(got, []string{"exact", "*.", ".*", "~"}[n.Kind]+":"+n.Name)
	}
	want := `exact:example.com *.:example.org .*:www.example exact:example.net *.:example.net ~:^w(?<n>\d+)\.x$ exact:`
	if strings.Join(got, " ") != want {
		t.Fatalf("names\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestLocations(t *testing.T) {
	cfg := mustLoad(t, map[string]string{"main.conf": `http { server {
	location / {
		location /img/ { }
		location ~* \.png$ { }
	}
	location = /exact { }
	location =/joined { }
	location ^~ /static/ { }
	location ~ ^/api/(v\d+)/ { }
	location ~*\.JPG$ { }
	location @fallback { }
	location = / { }
} }`})
	locs := cfg.HTTP.Servers[0].Locations
	type summary struct {
		kind LocationKind
		path string
	}
	want := []summary{{LocPrefix, "/"}, {LocExact, "/exact"}, {LocExact, "/joined"}, {LocPrefixNoRegex, "/static/"},
		{LocRegex, `^/api/(v\d+)/`}, {LocRegexCaseless, `\.JPG$`}, {LocNamed, "@fallback"}, {LocExact, "/"}}
	if len(locs) != len(want) {
		t.Fatalf("%d locations, want %d", len(locs), len(want))
	}
	for i, w := range want {
		if locs[i].Kind != w.kind || locs[i].Path != w.path {
			t.Errorf("location %d = %v %q, want %v %q", i, locs[i].Kind, locs[i].Path, w.kind, w.path)
		}
	}
	if nested := locs[0].Locations; len(nested) != 2 || nested[0].Parent != locs[0] || nested[1].Regex == nil {
		t.Fatalf("nested = %+v", nested)
	}
	if !locs[5].Regex.MatchString("/a/B.jpg") {
		t.Fatalf("caseless regex does not ignore case")
	}
}

func TestIncludeGlobAndFallback(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.conf":              "http {\n include sites/*.conf;\n}\n",
		"sites/b.conf":           "server { listen 8002; include snippets/common.conf; }\n",
		"sites/a.conf":           "server { listen 8001; }\n",
		"sites/skip.txt":         "this is not included",
		"snippets/common.conf":   "server_name from-main-folder;\n",
		"sites/empty/.gitignore": "",
	})
	cfg, err := load(t, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	srvs := cfg.HTTP.Servers
	if len(srvs) != 2 || srvs[0].Listens[0].Addr.Port() != 8001 || srvs[1].Listens[0].Addr.Port() != 8002 {
		t.Fatalf("servers not read in sorted order: %+v", srvs)
	}
	if srvs[1].Names[0].Name != "from-main-folder" {
		t.Fatalf("fallback include not read: %+v", srvs[1].Names)
	}
	var names []string
	for _, s := range cfg.Sources {
		names = append(names, strings.TrimPrefix(s.Name, dir+"/"))
	}
	if strings.Join(names, " ") != "main.conf sites/a.conf sites/b.conf snippets/common.conf" {
		t.Fatalf("sources = %v", names)
	}
}

func TestIncludeGlobNoMatchIsFine(t *testing.T) {
	mustLoad(t, map[string]string{"main.conf": "include conf.d/*.conf;\n"})
}

func TestIncludeRelativeToIncludingFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.conf":            "include sub/a.conf;\n",
		"sub/a.conf":           "include b.conf;\n",
		"sub/b.conf":           "worker_processes 3;\n",
		"b.conf":               "worker_processes 9;\n",
		"unused/.keep":         "",
		"sub/nested/x.conf":    "",
		"sub/nested/.ignore":   "",
		"another/ignored.conf": "",
	})
	cfg, err := load(t, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Main.WorkerProcesses != 3 {
		t.Fatalf("include resolved against the wrong folder: worker_processes %d", cfg.Main.WorkerProcesses)
	}
}

func TestCommandLineDirectives(t *testing.T) {
	dir := writeFiles(t, map[string]string{"main.conf": "worker_processes 2;\n"})
	cfg, err := load(t, dir, "pid /tmp/x.pid; worker_rlimit_nofile 100;")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Main.PidFile != "/tmp/x.pid" || cfg.Main.WorkerRlimitNofile != 100 || cfg.Main.WorkerProcesses != 2 {
		t.Fatalf("main = %+v", cfg.Main)
	}
}

func TestMissingMainFile(t *testing.T) {
	_, err := Load(Options{Registry: MustRegistry(), Prefix: t.TempDir(), File: "none.conf"})
	if err == nil || !strings.Contains(err.Error(), `none.conf" failed (2: No such file or directory)`) {
		t.Fatalf("err = %v", err)
	}
}
