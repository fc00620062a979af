package varmap

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/pcre"
)

// load reads an http block holding maps, with extra files beside it.
func load(t *testing.T, http string, files map[string]string) (*Conf, error) {
	t.Helper()
	dir := t.TempDir()
	files = mergeFiles(files, map[string]string{"main.conf": "http {\n" + http + "\n}\n"})
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := conf.Load(conf.Options{Registry: conf.MustRegistry(httpcore.Module, Module), Prefix: dir, File: "main.conf"})
	if err != nil {
		return nil, err
	}
	return cfg.MainConf(Module).(*Conf), nil
}

func mergeFiles(a, b map[string]string) map[string]string {
	res := map[string]string{}
	for k, v := range a {
		res[k] = v
	}
	for k, v := range b {
		res[k] = v
	}
	return res
}

// eval evaluates a value the way the core will for this test: "$N" and "$name"
// are the regex key's groups, other text is literal.
func eval(m *Map, key []byte) string {
	caps := make([]int, m.MaxCaptures())
	r := m.Find(key, nil, caps)
	text := m.Values[r.Value].Text
	var out []byte
	for i := 0; i < len(text); i++ {
		if text[i] != '$' || i+1 == len(text) {
			out = append(out, text[i])
			continue
		}
		j := i + 1
		brace := text[j] == '{'
		if brace {
			j++
		}
		k := j
		for k < len(text) && (text[k] == '_' || 'a' <= text[k] && text[k] <= 'z' || '0' <= text[k] && text[k] <= '9') {
			k++
		}
		name := text[j:k]
		if brace {
			k++
		}
		i = k - 1
		if r.Regex == nil {
			continue
		}
		if n, err := strconv.Atoi(name); err == nil {
			out = pcre.AppendCapture(out, key, caps[:r.NCaps], n)
			continue
		}
		for n, gname := range r.Regex.Names() {
			if gname == name && gname != "" {
				out = pcre.AppendCapture(out, key, caps[:r.NCaps], n)
			}
		}
	}
	return string(out)
}

const testMaps = `
map $http_x_key $exact {
	default dflt;
	Example.COM exact-upper-key;
	"" empty-key;
	\default literal-default;
	\~tilde literal-tilde;
	*.notwild starlit;
	~^/a/(\d+)$ "re1:$1";
	~*^/B/(?<word>\w+) "re2:$word:$1";
	~^/c/(?:x|(y))(z)? "re3:$1:$2:$9";
	~\.php$ php;
	~ anything;
}
map $http_x_key $hosts {
	hostnames;
	default none;
	example.com exact;
	.example.org dot-org;
	*.example.com star-com;
	*.a.example.com star-a;
	www.example.* tail-www;
	www.* tail-w;
	~^(?<sub>[a-z]+)\.regex\.test$ "re:$sub";
	.com dot-com;
	mail.* tail-mail;
	*.Upper.Example.NET upper;
	.deep.x.y.z deep;
	*.z star-z;
}
map $http_x_key $novalue {
	~x yes;
}
map $http_x_key $late {
	exact.example.com before-hostnames;
	*.early literal-star;
	hostnames;
	*.late.example wild;
}
`

// mapInputs are the keys both nginx and the package are asked about.
var mapInputs = []string{
	"", "x", "X", "dflt", "example.com", "Example.Com", "EXAMPLE.COM", "default", "~tilde",
	"*.notwild", "a.notwild", "/a/12", "/a/12/", "/A/12", "/b/hello/there", "/B/World",
	"/c/x", "/c/yz", "/c/y", "/index.php", "/INDEX.PHP", "/x.php/y",
	"example.com.", "www.example.com", "a.example.com", "b.a.example.com", "a.b.example.com",
	"a.example.com.", "example.org", "x.example.org", "x.y.example.org", "www.example.net",
	"www.example", "www.foo", "www", "foo.regex.test", "FOO.regex.test", "com", "x.com",
	"mail.example.com", "mail.foo.bar", "mail", "mail.", ".", "..", "example.com..",
	"a..example.com", "*.example.com", ".example.com", "x.upper.example.net", "upper.example.net",
	"X.UPPER.EXAMPLE.NET", "deep.x.y.z", "a.deep.x.y.z", "x.y.z", "y.z", "z", ".z",
	"exact.example.com", "a.early", "*.early", "b.late.example", "late.example", "www.example.*",
	"a b", "é.example.com", "www.é", "ÉXAMPLE.COM",
}

func TestMapAgainstNginx(t *testing.T) {
	mc, err := load(t, testMaps, nil)
	if err != nil {
		t.Fatal(err)
	}
	byVar := map[string]*Map{}
	for _, m := range mc.Maps {
		byVar[m.Var] = m
	}
	ng := startNginx(t, testMaps+`
server {
	LISTEN;
	location /exact { return 200 "$exact"; }
	location /hosts { return 200 "$hosts"; }
	location /novalue { return 200 "$novalue"; }
	location /late { return 200 "$late"; }
}`, nil)
	inputs := append([]string{}, mapInputs...)
	// And names made of the keys' labels, to walk the wildcard tries' corners.
	rng := rand.New(rand.NewPCG(1, 2))
	labels := []string{"", "a", "www", "mail", "example", "com", "org", "net", "upper", "deep", "x", "y", "z", "late", "*", "A", "Example"}
	for range 400 {
		n := 1 + rng.IntN(5)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = labels[rng.IntN(len(labels))]
		}
		inputs = append(inputs, strings.Join(parts, "."))
	}
	for _, v := range []string{"exact", "hosts", "novalue", "late"} {
		for _, in := range inputs {
			_, want := ng.Get(t, "/"+v, "X-Key: "+in)
			if got := eval(byVar[v], []byte(in)); got != want {
				t.Errorf("$%s for %q = %q, nginx %q", v, in, got, want)
			}
		}
	}
}

// TestMapURINewline: a regex "$" matches before a final newline of a decoded URI, as
// nginx's PCRE does ("/x.php%0A" is PHP to both).
func TestMapURINewline(t *testing.T) {
	const maps = `map $uri $u { ~\.php$ "php"; ~^/(.*)$ "all:[$1]"; }`
	mc, err := load(t, maps, nil)
	if err != nil {
		t.Fatal(err)
	}
	ng := startNginx(t, maps+`server { LISTEN; location / { return 200 "$u"; } }`, nil)
	for _, tc := range []struct{ target, uri string }{
		{"/x.php%0A", "/x.php\n"}, {"/x.php", "/x.php"}, {"/y%0A", "/y\n"}, {"/y%0A%0A", "/y\n\n"}, {"/y", "/y"},
	} {
		_, want := ng.Get(t, tc.target)
		if got := eval(mc.Maps[0], []byte(tc.uri)); got != want {
			t.Errorf("%s: %q, nginx %q", tc.target, got, want)
		}
	}
}

// TestMapConfigErrors: what nginx refuses in a map block is refused, at its line.
func TestMapConfigErrors(t *testing.T) {
	for _, tc := range []struct{ http, want string }{
		{"map $a b { }", `invalid variable name "b" in `},
		{"map $a $ { }", `invalid variable name "$" in `},
		{"map $a $b {\n default x;\n default y;\n}", "duplicate default map parameter in /"},
		{"map $a $b {\n a x;\n A y;\n}", `conflicting parameter "a" in `},
		{"map $a $b {\n a x y;\n}", "invalid number of the map parameters in "},
		{"map $a $b {\n hostnames;\n *.a.*.b x;\n}", `invalid hostname or wildcard "*.a.*.b" in `},
		{"map $a $b {\n hostnames;\n a..b x;\n}", `invalid hostname or wildcard "a..b" in `},
		{"map $a $b {\n hostnames;\n a.*.b x;\n}", `invalid hostname or wildcard "a.*.b" in `},
		{"map $a $b {\n hostnames;\n example.com x;\n .example.com y;\n}", `conflicting parameter ".example.com" in `},
		{"map $a $b {\n hostnames;\n .example.com y;\n example.com x;\n}", `conflicting parameter "example.com" in `},
		{"map $a $b {\n hostnames;\n *.example.com y;\n .example.com x;\n}", `conflicting parameter ".example.com" in `},
		{"map $a $b {\n ~(?=x) y;\n}", `lookahead assertion (?= is not supported by RE2 in "(?=x)" at "(?=x)" in `},
		{"map $a $b {\n ~(x y;\n}", `missing closing parenthesis in "(x" in `},
		{"map $a $b {\n a x;\n b { }\n}", `unexpected "{" in `},
	} {
		_, err := load(t, tc.http, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.http, err, tc.want)
			continue
		}
		// nginx refuses it too.
		if out, ok := checkNginx(t, tc.http); ok {
			t.Errorf("%q: nginx accepts it: %s", tc.http, out)
		}
	}
	// Line numbers: the statement's own line.
	_, err := load(t, "map $a $b {\n a x;\n\n a y;\n}", nil)
	if err == nil || !strings.HasSuffix(err.Error(), "main.conf:5") {
		t.Errorf("err = %v, want line 5", err)
	}
}

// TestMapInclude: "include" inside a map reads key lines from a file, as in nginx.
func TestMapInclude(t *testing.T) {
	files := map[string]string{"keys.map": "a from-file;\n~^b(\\d) \"b$1\";\n"}
	mc, err := load(t, "map $arg_x $y {\n default d;\n include keys.map;\n c inline;\n}", files)
	if err != nil {
		t.Fatal(err)
	}
	m := mc.Maps[0]
	for in, want := range map[string]string{"a": "from-file", "b7": "b7", "c": "inline", "z": "d"} {
		if got := eval(m, []byte(in)); got != want {
			t.Errorf("%q = %q, want %q", in, got, want)
		}
	}
	if m.Source != "$arg_x" || m.Var != "y" || m.Volatile || m.Hostnames || len(m.Regexes()) != 1 {
		t.Errorf("map = %+v", m)
	}
	if mc, err := load(t, "map $host $y { volatile; hostnames; }", nil); err != nil || !mc.Maps[0].Volatile || !mc.Maps[0].Hostnames {
		t.Errorf("volatile/hostnames: %v", err)
	}
}

// TestMapValuesShared: equal values are one entry, which the core compiles once.
func TestMapValuesShared(t *testing.T) {
	m, err := Build("$a", "b", [][2]string{{"x", "same"}, {"y", "same"}, {"~z", "same"}, {"default", "$host"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Values) != 2 || m.Values[m.Default].Text != "$host" {
		t.Fatalf("values %+v default %d", m.Values, m.Default)
	}
}
