package conf

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary text to the lexer and parser as a main file. Whatever the
// input, Load must return a config or an *Error naming a position; it must not panic
// or hang.
func FuzzLoad(f *testing.F) {
	seeds := []string{
		"", "worker_processes auto;", "events { worker_connections 10; }",
		"http { server { listen 8080; server_name a *.b c.* ~^d$; location / { location /x { } } } }",
		`http { server { location ~* "\.(png|jpg)$" { } location = /a { } location @n { } } }`,
		"pid 'a b';", `error_log "x\"y" warn;`, "a ${b} {", "}", "{", ";", "#", "'", `"`, "\\",
		"worker_cpu_affinity auto 0101;", "include *.conf;", "http { server { listen [::1]:80 default_server; } }",
		"worker_shutdown_timeout 1h 30m;",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	dir := f.TempDir()
	// Stay off the network: a listen host name must not wait for a resolver.
	lookupIP = func(string) ([]net.IP, error) { return nil, errors.New("no resolver in fuzzing") }
	f.Fuzz(func(t *testing.T, src string) {
		if strings.Contains(src, "include") && strings.Contains(src, "/") {
			return // includes outside the test folder could read /proc files that block
		}
		file := filepath.Join(dir, "fuzz.conf")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(Options{Registry: MustRegistry(), Prefix: dir, File: file})
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if ce.Pos.File != "" && !strings.HasPrefix(ce.Pos.File, dir) {
				t.Fatalf("error names a file outside the config: %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("nil config without an error")
		}
	})
}
