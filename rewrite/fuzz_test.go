package rewrite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// FuzzRewriteDirectives: any if condition or rewrite line either loads or is refused
// with an error naming the file and line; none panics. The seeds run in make test.
func FuzzRewriteDirectives(f *testing.F) {
	for _, s := range []string{
		"if ($uri) { }", "if ( $uri = \"/a\" ) { return 204; }", "if ($arg_a !~* ^(?<x>a)b$) { set $y $x; }",
		"if (!-x $uri) { break; }", "if ($uri ~ (a)\\1) { }", "if (", "if ()", "if ($uri = ) { }", "if ((a)) { }",
		"rewrite ^/(.*)$ /b/$1?x=$1? last;", "rewrite (?<n>a) $scheme://h/$n permanent;", "rewrite a \"\";",
		"rewrite ^ /a?$ break;", "set $v \"${v}x\";", "rewrite [ /x;",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	reg := conf.MustRegistry(httpcore.Module, Module)
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\x00") {
			return
		}
		file := filepath.Join(dir, "f.conf")
		src := "http { server { location / {\n" + line + "\n} } }\n"
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := conf.Load(conf.Options{Registry: reg, Prefix: dir, File: file})
		if err != nil && !strings.Contains(err.Error(), "f.conf:") {
			t.Errorf("%q: error without a position: %v", line, err)
		}
	})
}
