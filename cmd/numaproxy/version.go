package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// revision is set at build time by the Makefile (-ldflags -X); the version is
// httpcore.Version, the one the Server header shows.
var revision = ""

func printVersion(w io.Writer, reg *conf.Registry, buildInfo bool) {
	fmt.Fprintf(w, "numaproxy version: numaproxy/%s\n", httpcore.Version)
	if !buildInfo {
		return
	}
	fmt.Fprintf(w, "built by %s (%s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if revision != "" {
		fmt.Fprintf(w, "revision: %s\n", revision)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var settings []string
		for _, s := range bi.Settings {
			switch s.Key {
			case "-tags", "-race", "CGO_ENABLED", "GOAMD64", "-trimpath":
				settings = append(settings, s.Key+"="+s.Value)
			}
		}
		if len(settings) > 0 {
			fmt.Fprintf(w, "build settings: %s\n", strings.Join(settings, " "))
		}
	}
	var names []string
	for _, m := range reg.Modules() {
		names = append(names, m.Name)
	}
	fmt.Fprintf(w, "modules: %s\n", strings.Join(names, " "))
}
