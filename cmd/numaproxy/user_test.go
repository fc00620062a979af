package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
)

func loadMain(t *testing.T, text string) (*conf.Config, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.conf"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf.Load(conf.Options{Registry: registry, Prefix: dir, File: "main.conf"})
}

// TestUserAndDaemonDirectives: nginx's arguments, defaults and messages.
func TestUserAndDaemonDirectives(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the user directive is resolved only by root")
	}
	cfg, err := loadMain(t, "user nobody nogroup;\ndaemon on;\n")
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Main.User
	if u == nil || u.Name != "nobody" || u.Group != "nogroup" || u.UID == 0 || u.GID == 0 || !slices.Contains(u.Groups, u.GID) || u.Pos.Line != 1 {
		t.Fatalf("user %+v", u)
	}
	if !cfg.Main.Daemon {
		t.Fatal("daemon on not set")
	}
	cfg, err = loadMain(t, "events { }\n")
	if err != nil || cfg.Main.User != nil || cfg.Main.Daemon {
		t.Fatalf("defaults: user %+v daemon %v %v", cfg.Main.User, cfg.Main.Daemon, err)
	}
	for text, want := range map[string]string{
		"user nobody nogroup;\nuser nobody nogroup;\n": `"user" directive is duplicate in `,
		"daemon maybe;\n":           `invalid value "maybe" in "daemon" directive, it must be "on" or "off" in `,
		"user a b c;\n":             `invalid number of arguments in "user" directive in `,
		"events { user nobody; }\n": `"user" directive is not allowed here in `,
	} {
		if _, err := loadMain(t, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}
