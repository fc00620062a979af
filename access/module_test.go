package access

import (
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/conftest"
)

func load(t *testing.T, src string) (*conf.Config, error) {
	t.Helper()
	return conftest.Load(t, conf.MustRegistry(httpcore.Module, Module), src)
}

func TestDirectiveErrors(t *testing.T) {
	for src, want := range map[string]string{
		"http {\n allow 10.0.0.0/33;\n}": `invalid parameter "10.0.0.0/33" in ` + "",
		"http { deny example.com; }":     `invalid parameter "example.com"`,
		"http { allow; }":                `invalid number of arguments in "allow" directive`,
		"allow all;":                     `"allow" directive is not allowed here`,
	} {
		_, err := load(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

// One list per family in the order written, "all" in each; a level with rules
// replaces the inherited ones.
func TestRulesAndInheritance(t *testing.T) {
	cfg, err := load(t, `http {
    deny 10.0.0.1; allow 2001:db8::/32; deny all;
    server {
        location /a { }
        location /b { allow unix:; }
    }
}`)
	if err != nil {
		t.Fatal(err)
	}
	locs := cfg.HTTP.Servers[0].Locations
	a, b := locs[0].Conf(Module).(*LocConf), locs[1].Conf(Module).(*LocConf)
	if len(a.v4) != 2 || !a.v4[0].deny || !a.v4[1].all || len(a.v6) != 2 || a.v6[0].deny || len(a.unix) != 1 {
		t.Errorf("/a: %+v", a)
	}
	if len(b.v4) != 0 || len(b.v6) != 0 || len(b.unix) != 1 || b.unix[0].deny {
		t.Errorf("/b: %+v", b)
	}
}
