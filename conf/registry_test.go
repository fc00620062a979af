package conf

import (
	"strings"
	"testing"
)

// levelConf is a test module's http-level config: a value that inherits downward
// unless a level sets it, like nginx's NGX_CONF_UNSET.
type levelConf struct {
	value string
	set   bool
}

type mainConf struct {
	names []string
	raw   []string // statements of test_raw blocks, "name arg ..."
}

var testModule = &Module{
	Name: "test",
	Directives: []Directive{
		{Name: "test_value", Contexts: HTTPCtx | ServerCtx | LocationCtx, Args: Args1, Set: func(c *Cursor, s *Stmt) error {
			lc := c.HTTPConf().(*levelConf)
			lc.value, lc.set = s.Args[0].Value, true
			return nil
		}},
		{Name: "test_block", Contexts: HTTPCtx, Args: Args1, Block: true, Multi: true, Set: func(c *Cursor, s *Stmt) error {
			mc := c.MainConf().(*mainConf)
			mc.names = append(mc.names, s.Args[0].Value)
			return c.ParseBlock(UpstreamCtx, s.Args[0].Value)
		}},
		{Name: "test_inner", Contexts: UpstreamCtx, Args: Args0, Set: func(c *Cursor, s *Stmt) error {
			if c.Block.(string) == "bad" {
				return s.Errorf("inner refused")
			}
			return nil
		}},
		{Name: "test_flag", Contexts: HTTPCtx, Args: Flag, Set: func(c *Cursor, s *Stmt) error { return nil }},
		{Name: "test_raw", Contexts: HTTPCtx, Args: Args0, Block: true, Multi: true, Set: func(c *Cursor, s *Stmt) error {
			mc := c.MainConf().(*mainConf)
			return c.ParseRawBlock(func(c *Cursor, s *Stmt) error {
				if s.Name == "bad" {
					return s.Errorf("bad line")
				}
				line := s.Name
				for _, a := range s.Args {
					line += " " + a.Value
				}
				mc.raw = append(mc.raw, line)
				return nil
			})
		}},
	},
	NewMain: func() any { return &mainConf{} },
	NewHTTP: func() any { return &levelConf{} },
	MergeHTTP: func(parent, child any) error {
		p, c := parent.(*levelConf), child.(*levelConf)
		if !c.set {
			*c = *p
		}
		return nil
	},
	Check: func(cfg *Config, self *Module) error {
		for _, n := range cfg.MainConf(self).(*mainConf).names {
			if n == "forbidden" {
				return &Error{Msg: "forbidden block name"}
			}
		}
		return nil
	},
}

func loadWith(t *testing.T, src string) (*Config, error) {
	t.Helper()
	dir := writeFiles(t, map[string]string{"main.conf": src})
	return Load(Options{Registry: MustRegistry(testModule), Prefix: dir, File: "main.conf"})
}

func TestModuleConfsMergeDownward(t *testing.T) {
	cfg, err := loadWith(t, `http {
	test_value top;
	server {
		location /a { }
		location /b { test_value b; location /b/c { } }
	}
	server { test_value s2; location / { } }
}`)
	if err != nil {
		t.Fatal(err)
	}
	get := func(l *Location) string { return l.Conf(testModule).(*levelConf).value }
	s1, s2 := cfg.HTTP.Servers[0], cfg.HTTP.Servers[1]
	if v := s1.Conf(testModule).(*levelConf).value; v != "top" {
		t.Errorf("server 1 = %q", v)
	}
	if get(s1.Locations[0]) != "top" || get(s1.Locations[1]) != "b" || get(s1.Locations[1].Locations[0]) != "b" {
		t.Errorf("server 1 locations = %q %q %q", get(s1.Locations[0]), get(s1.Locations[1]), get(s1.Locations[1].Locations[0]))
	}
	if get(s2.Locations[0]) != "s2" {
		t.Errorf("server 2 location = %q", get(s2.Locations[0]))
	}
}

func TestModuleBlocksAndCheck(t *testing.T) {
	if _, err := loadWith(t, "http {\ntest_block one { test_inner; }\ntest_block two { }\n}"); err != nil {
		t.Fatal(err)
	}
	_, err := loadWith(t, "http {\ntest_block bad {\n test_inner;\n}\n}")
	if err == nil || !strings.HasPrefix(err.Error(), "inner refused in ") || !strings.HasSuffix(err.Error(), "/main.conf:3") {
		t.Fatalf("err = %v", err)
	}
	_, err = loadWith(t, "http { test_block forbidden { } }")
	if err == nil || err.Error() != "forbidden block name" {
		t.Fatalf("err = %v", err)
	}
	_, err = loadWith(t, "http {\n test_inner;\n}")
	if err == nil || !strings.Contains(err.Error(), `"test_inner" directive is not allowed here in `) {
		t.Fatalf("err = %v", err)
	}
}

func TestRawBlock(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.conf":  "http {\ntest_raw {\n text/html html htm;\n include more.types;\n listen x;\n}\ntest_raw { a; }\n}",
		"more.types": "image/png png;\n'quoted name' x;\n",
	})
	cfg, err := Load(Options{Registry: MustRegistry(testModule), Prefix: dir, File: "main.conf"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cfg.MainConf(testModule).(*mainConf).raw, "|")
	if want := "text/html html htm|image/png png|quoted name x|listen x|a"; got != want {
		t.Fatalf("raw statements = %q, want %q", got, want)
	}
	for src, want := range map[string]string{
		"http {\ntest_raw {\n bad;\n}\n}":         "bad line in ",
		"http {\ntest_raw {\n x {\n}\n}\n}":       `unexpected "{" in `,
		"http {\ntest_raw {\n include a b;\n}\n}": `invalid number of arguments in "include" directive in `,
		"http {\ntest_raw {\n x y;\n}":            `unexpected end of file, expecting "}"`,
	} {
		if _, err := loadWith(t, src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", src, err, want)
		}
	}
}

func TestFlagChecked(t *testing.T) {
	if _, err := loadWith(t, "http { test_flag ON; }"); err != nil {
		t.Fatal(err)
	}
	_, err := loadWith(t, "http {\ntest_flag yes;\n}")
	if err == nil || !strings.Contains(err.Error(), `invalid value "yes" in "test_flag" directive, it must be "on" or "off" in `) {
		t.Fatalf("err = %v", err)
	}
}

func TestRegistryRejectsClash(t *testing.T) {
	clash := &Module{Name: "clash", Directives: []Directive{{Name: "listen", Contexts: ServerCtx, Args: Args1}}}
	if _, err := NewRegistry(clash); err == nil {
		t.Fatal("two declarations of listen in server context accepted")
	}
	other := &Module{Name: "other", Directives: []Directive{{Name: "server", Contexts: UpstreamCtx, Args: Args1More, Set: func(*Cursor, *Stmt) error { return nil }}}}
	if _, err := NewRegistry(other); err != nil {
		t.Fatalf("same name in another context refused: %v", err)
	}
}

func TestArity(t *testing.T) {
	tests := []struct {
		a    Arity
		n    int
		want bool
	}{
		{Args0, 0, true}, {Args0, 1, false}, {Args1 | Args2, 2, true}, {Args1 | Args2, 3, false},
		{Args1More, 0, false}, {Args1More, 9, true}, {Args2More, 1, false}, {Args2More, 2, true},
		{Flag, 1, true}, {Flag, 2, false}, {Args7, 7, true}, {Args7, 8, false},
	}
	for _, tt := range tests {
		if got := tt.a.accepts(tt.n); got != tt.want {
			t.Errorf("Arity(%b).accepts(%d) = %v", tt.a, tt.n, got)
		}
	}
}
