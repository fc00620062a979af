package conf

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkLocationConf is the lookup every phase handler makes per request: a
// module's config of the request's location, in a registry of as many modules
// as the binary's (about 40).
func BenchmarkLocationConf(b *testing.B) {
	mods := []*Module{testModule}
	for i := range 40 {
		mods = append(mods, &Module{Name: "bench" + strconv.Itoa(i), NewHTTP: func() any { return new(int) }})
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.conf"), []byte("http { server { location / { test_value x; } } }\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := Load(Options{Registry: MustRegistry(mods...), Prefix: dir, File: "main.conf"})
	if err != nil {
		b.Fatal(err)
	}
	loc := cfg.HTTP.Servers[0].Locations[0]
	b.ReportAllocs()
	for b.Loop() {
		if loc.Conf(testModule).(*levelConf).value != "x" || loc.Conf(mods[20]) == nil {
			b.Fatal("wrong config")
		}
	}
}

func TestConfOfModuleNotRegistered(t *testing.T) {
	cfg, err := loadWith(t, "http { server { location / { test_value x; } } }\n")
	if err != nil {
		t.Fatal(err)
	}
	other := &Module{Name: "other", NewHTTP: func() any { return new(int) }}
	if c := cfg.HTTP.Servers[0].Locations[0].Conf(other); c != nil {
		t.Fatalf("a module no registry listed has config %v", c)
	}
}
