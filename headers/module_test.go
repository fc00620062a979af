package headers

import (
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/conftest"
)

func loadConf(t *testing.T, src string) (*conf.Config, error) {
	t.Helper()
	return conftest.Load(t, conf.MustRegistry(httpcore.Module, Module), src)
}

// TestAddHeaderInheritance: a level with add_header of its own replaces every field
// it would inherit, as nginx.
func TestAddHeaderInheritance(t *testing.T) {
	cfg, err := loadConf(t, `http {
	add_header X-Top top;
	server {
		location /inherit { }
		location /own { add_header X-Own $uri always; }
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	names := func(l *conf.Location) string {
		var out []string
		for _, h := range l.Conf(Module).(*LocConf).AddHeaders {
			out = append(out, h.Name+"="+h.Value.String())
			if h.Always {
				out = append(out, "always")
			}
		}
		return strings.Join(out, " ")
	}
	locs := cfg.HTTP.Servers[0].Locations
	if got := names(locs[0]); got != "X-Top=top" {
		t.Errorf("inherited: %s", got)
	}
	if got := names(locs[1]); got != "X-Own=$uri always" {
		t.Errorf("own: %s", got)
	}
	for src, want := range map[string]string{
		"http { server { location / {\nadd_header X y sometimes;\n} } }": `invalid value "sometimes" in "add_header" directive`,
		"http { server { location / {\nadd_header \"X Y\" y;\n} } }":     `not a header field name`,
	} {
		if _, err := loadConf(t, src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
}
