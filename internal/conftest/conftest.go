// Package conftest loads configurations in tests: the text is written to t.conf
// in a prefix of its own, which the test's end removes. For tests only.
package conftest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
)

// Load writes src to t.conf in a fresh prefix and loads it with reg.
func Load(tb testing.TB, reg *conf.Registry, src string) (*conf.Config, error) {
	tb.Helper()
	cfg, _, err := LoadDir(tb, reg, src)
	return cfg, err
}

// LoadDir is Load that returns the prefix too.
func LoadDir(tb testing.TB, reg *conf.Registry, src string) (*conf.Config, string, error) {
	tb.Helper()
	dir := tb.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: reg, Prefix: dir, File: file})
	return cfg, dir, err
}
