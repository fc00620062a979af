package authrequest

import (
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/conftest"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/upstream"
)

func load(t *testing.T, src string) (*conf.Config, error) {
	t.Helper()
	return conftest.Load(t, conf.MustRegistry(upstream.Module, httpcore.Module, Module, proxy.Module), src)
}

func TestDirectiveErrors(t *testing.T) {
	for src, want := range map[string]string{
		"http { auth_request auth; }":                       `the URI must start with "/"`,
		"http { auth_request_set $host $upstream_status; }": `the duplicate "host" variable`,
		"http { auth_request_set user $upstream_status; }":  `invalid value "user"`,
		"http { auth_request_set $u $nosuch; }":             `unknown "nosuch" variable`,
	} {
		_, err := load(t, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

// auth_request inherits (off turns it off), auth_request_set lists are replaced by
// a level's own, and a declared variable is one variable wherever it is set.
func TestInheritance(t *testing.T) {
	cfg, err := load(t, `http {
    auth_request /auth; auth_request_set $user $upstream_http_x_user;
    server {
        location /a { }
        location /b { auth_request off; auth_request_set $group $upstream_http_x_group; auth_request_set $user 1; }
    }
}`)
	if err != nil {
		t.Fatal(err)
	}
	locs := cfg.HTTP.Servers[0].Locations
	a, b := locs[0].Conf(Module).(*LocConf), locs[1].Conf(Module).(*LocConf)
	if string(a.URI) != "/auth" || len(a.Vars) != 1 || a.Vars[0].Var.Name != "user" {
		t.Errorf("/a: %+v", a)
	}
	if b.URI != nil || len(b.Vars) != 2 || b.Vars[0].Var.Name != "group" || b.Vars[1].Var != a.Vars[0].Var {
		t.Errorf("/b: %+v", b)
	}
}
