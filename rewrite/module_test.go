package rewrite

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

func ops(c any) []op { return c.(*LocConf).ops }

func TestDirectives(t *testing.T) {
	cfg, err := loadConf(t, `http { server {
	return 301 https://$host$request_uri;
	location /a { return 200 "hello $remote_addr"; location /a/b { } }
	location /b { return https://example.com/; }
	location /c { set $x "v$uri"; set $y 1; if ($x ~ ^v(?<rest>.*)$) { rewrite ^ /d/$rest? last; } rewrite ^/c/(.*) /e?a=$1 break; }
	location /d { if ( $uri = "/d" ) { return 204; } if (-f /etc/passwd) { break; } uninitialized_variable_warn off; rewrite_log on; }
} }`)
	if err != nil {
		t.Fatal(err)
	}
	srv := cfg.HTTP.Servers[0]
	ret := func(c any) *Return { return ops(c)[0].ret }
	if r := ret(srv.Conf(Module)); r.Code != 301 || r.Text.String() != "https://$host$request_uri" {
		t.Errorf("server return %+v", r)
	}
	if r := ret(srv.Locations[0].Conf(Module)); r.Code != 200 || !r.Text.Uses("remote_addr") {
		t.Errorf("a return %+v", r)
	}
	if o := ops(srv.Locations[0].Locations[0].Conf(Module)); len(o) != 0 {
		t.Errorf("a nested location inherited %d directives", len(o))
	}
	if r := ret(srv.Locations[1].Conf(Module)); r.Code != 302 {
		t.Errorf("URL-only return %+v", r)
	}
	c := srv.Locations[2]
	o := ops(c.Conf(Module))
	if len(o) != 4 || o[0].kind != opSet || o[1].kind != opSet || !o[1].set.isStatic || o[2].kind != opIf || o[3].kind != opRewrite {
		t.Fatalf("c's directives %+v", o)
	}
	iff := o[2].cond
	if iff.op != condRegex || iff.loc == nil || iff.loc.Kind != conf.LocIf || iff.loc.Parent != c || len(iff.body) != 1 || iff.body[0].rw.flag != flagLast || iff.body[0].rw.addArgs {
		t.Errorf("c's if %+v", iff)
	}
	if len(c.Locations) != 1 || len(ops(iff.loc.Conf(Module))) != 0 {
		t.Errorf("the if's location keeps its directives")
	}
	if rw := o[3].rw; rw.flag != flagBreak || rw.args == nil || rw.args.String() != "a=$1" || rw.path.String() != "/e" || !rw.addArgs {
		t.Errorf("c's rewrite %+v", rw)
	}
	d := srv.Locations[3].Conf(Module).(*LocConf)
	if len(d.ops) != 2 || d.ops[0].cond.op != condEqual || d.ops[1].cond.op != condFile || d.UninitWarn || !d.Log {
		t.Errorf("d %+v", d)
	}
	if !srv.Conf(Module).(*LocConf).UninitWarn {
		t.Errorf("uninitialized_variable_warn is on by default")
	}
}

func TestErrors(t *testing.T) {
	for src, want := range map[string]string{
		"http { server { location / {\nreturn 2000;\n} } }":                                  `invalid value "2000" in "return" directive`,
		"http {\nreturn 200;\n}":                                                             `"return" directive is not allowed here`,
		"http { server { location / {\nreturn 200 $x;\n} } }":                                `unknown "x" variable in `,
		"http { server { location / {\nrewrite ^/(a)\\1 /b;\n} } }":                          `pcre2_compile() failed: `,
		"http { server { location / {\nrewrite ^/ /b foo;\n} } }":                            `invalid parameter "foo"`,
		"http { server { location / {\nif ($a) { }\n} } }":                                   `unknown "a" variable`,
		"http { server { location / {\nif ($uri =) { }\n} } }":                               `invalid condition "$uri"`,
		"http { server { location / {\nif ($uri ~ (?<=a)) { }\n} } }":                        `pcre2_compile() failed`,
		"http { server { location / {\nif ($uri @ a) { }\n} } }":                             `unexpected "@" in condition`,
		"http { server { location / {\nif (-q /a) { }\n} } }":                                `invalid condition "-q"`,
		"http { server { location / {\nif $uri { }\n} } }":                                   `invalid condition "$uri"`,
		"http { server { location / {\nset $host a;\n} } }":                                  `the duplicate "host" variable`,
		"http { server { location / {\nset x a;\n} } }":                                      `invalid value "x" in "set" directive`,
		"http { server { if ($uri) {\nlocation /a { }\n} } }":                                `"location" directive is not allowed here`,
		"http { server { location / { if ($uri) {\nlocation /a { }\n} } } }":                 `"location" directive is not allowed here`,
		"http { server { location / { if ($uri) {\nrewrite_log on; rewrite_log on;\n} } } }": `"rewrite_log" directive is duplicate`,
	} {
		if _, err := loadConf(t, src); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "/t.conf:2") {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
	// A variable may be used before the set that declares it, as in nginx.
	if _, err := loadConf(t, "http { server { location / { return 200 $later; } location /b { set $later 1; } } }"); err != nil {
		t.Error(err)
	}
}

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string][3]string{
		"/a?b=1":        {"/a", "b=1", "y"},
		"/a":            {"/a", "", ""},
		"/$1?x=$arg_a?": {"/$1", "x=$arg_a?", "y"},
		"/${uri}?":      {"/${uri}", "", "y"},
	} {
		p, a, ok := splitArgs(in)
		if p != want[0] || a != want[1] || ok != (want[2] == "y") {
			t.Errorf("%q: %q %q %v", in, p, a, ok)
		}
	}
}
