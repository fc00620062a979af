package accesslog

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/conftest"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/upstream"
)

func loadConf(t *testing.T, src string) (*conf.Config, error) {
	t.Helper()
	return conftest.Load(t, conf.MustRegistry(httpcore.Module, Module), src)
}

// The escapings, byte for byte as nginx 1.22 writes them (the differential test
// in integration/ checks them against nginx itself).
func TestEscaping(t *testing.T) {
	in := []byte("a\"b\\c\x01\x1f\t\n\r\b\f\x7f\xc3\xa9\xff/")
	if got, want := string(appendEscaped(nil, in)), `a\x22b\x5Cc\x01\x1F\x09\x0A\x0D\x08\x0C\x7F\xC3\xA9\xFF/`; got != want {
		t.Errorf("default: %s, want %s", got, want)
	}
	if got, want := string(appendJSON(nil, in)), "a\\\"b\\\\c\\u0001\\u001F\\t\\n\\r\\b\\f\x7f\xc3\xa9\xff/"; got != want {
		t.Errorf("json: %q, want %q", got, want)
	}
}

func TestSyslogHeader(t *testing.T) {
	p, err := parseSyslog("server=127.0.0.1:5514,facility=local0,severity=warn,tag=web_1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 5, 7, 8, 9, 0, time.Local)
	if got, want := string(p.appendHeader(nil, now)), "<132>Mar  5 07:08:09 "+syslogHostname+" web_1: "; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	p.nohostname = true
	if got, want := string(p.appendHeader(nil, now)), "<132>Mar  5 07:08:09 web_1: "; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if p.network != "udp" || p.addr != "127.0.0.1:5514" {
		t.Errorf("%s %s", p.network, p.addr)
	}
	for _, bad := range []string{"", "facility=local0", "server=unix:", "server=h:0", "server=127.0.0.1,tag=a-b", "server=127.0.0.1,severity=loud", "server=127.0.0.1,x=1"} {
		if _, err := parseSyslog(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A level with access_log replaces what it would inherit; off stops logging; a level
// without any takes its parent's, and with none above, nginx's default log.
func TestAccessLogInheritance(t *testing.T) {
	cfg, err := loadConf(t, `http {
	log_format short '$status';
	server {
		access_log logs/a.log;
		access_log logs/b.log short;
		location /inherit { }
		location /own { access_log logs/c.log short buffer=16k flush=2s; }
		location /off { access_log off; }
	}
	server { listen 8081; location / { } }
}`)
	if err != nil {
		t.Fatal(err)
	}
	paths := func(lc *LocConf) string {
		if lc.Off {
			return "off"
		}
		var out []string
		for _, lg := range lc.Logs {
			f := "combined"
			if lg.Format != nil {
				f = lg.Format.Name
			}
			out = append(out, filepath.Base(lg.Path)+":"+f)
		}
		return strings.Join(out, ",")
	}
	srv := cfg.HTTP.Servers[0]
	want := map[string]string{"/inherit": "a.log:combined,b.log:short", "/own": "c.log:short", "/off": "off"}
	for _, loc := range srv.Locations {
		if got := paths(loc.Conf(Module).(*LocConf)); got != want[loc.Path] {
			t.Errorf("%s: %s, want %s", loc.Path, got, want[loc.Path])
		}
	}
	if got := paths(cfg.HTTP.Servers[1].Locations[0].Conf(Module).(*LocConf)); got != "access.log:combined" {
		t.Errorf("default: %s", got)
	}
}

// The errors nginx gives for these, with the directive's position.
func TestAccessLogErrors(t *testing.T) {
	for _, c := range []struct{ conf, want string }{
		{`access_log logs/a.log nosuch;`, `unknown log format "nosuch"`},
		{`access_log logs/$host.log combined buffer=4k;`, `buffered logs cannot have variables in name`},
		{`access_log syslog:server=127.0.0.1 combined buffer=4k;`, `logs to syslog cannot be buffered`},
		{`access_log logs/a.log combined flush=1s;`, `no buffer is defined`},
		{`access_log logs/a.log combined gzip=10;`, `invalid value "gzip=10"`},
		{`access_log off logs/a.log;`, `invalid value "logs/a.log"`},
		{`log_format combined '$status';`, `duplicate "log_format" name "combined"`},
		{`log_format x escape=xml '$status';`, `unknown log format escaping "xml"`},
		{`log_format x '$nosuch';`, `unknown "nosuch" variable`},
		{`log_format x 'a$';`, `invalid parameter`},
		{`open_log_file_cache inactive=1s;`, `"max" parameter is required`},
		{`server { location / { log_format x '$status'; } }`, `"log_format" directive is not allowed here`},
	} {
		_, err := loadConf(t, "http {\n"+c.conf+"\n}\n")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "t.conf:") {
			t.Errorf("%s: %v, want %q", c.conf, err, c.want)
		}
	}
}

// A file named by two access_logs with different buffers is refused, as by nginx,
// when the configuration's files are opened.
func TestConflictingBuffers(t *testing.T) {
	cfg, err := loadConf(t, `http {
	server { listen 18082; access_log logs/same.log combined buffer=8k; location / { access_log logs/same.log combined buffer=16k; } }
}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = httpcore.NewSnapshot(cfg)
	if err == nil || !strings.Contains(err.Error(), "conflicting parameters") {
		t.Fatalf("%v", err)
	}
}

// TestLogSubrequestOnRefused: log_subrequest on would change what nginx logs
// (auth_request's subrequests), which numaproxy cannot do: it is refused; off is
// accepted.
func TestLogSubrequestOnRefused(t *testing.T) {
	if _, err := loadConf(t, "http {\nlog_subrequest on;\n}"); err == nil || !strings.Contains(err.Error(), "t.conf:2") {
		t.Errorf("log_subrequest on: %v", err)
	}
	if _, err := loadConf(t, "http {\nlog_subrequest off;\n}"); err != nil {
		t.Errorf("log_subrequest off: %v", err)
	}
}

// indexEscaped and indexJSON look at eight bytes at once: each byte value at
// each position of a value, among bytes that need nothing and bytes from 0x80 on
// (which the eight-byte test must not take for bytes below 0x20).
func TestIndexEscaped(t *testing.T) {
	naive := func(v []byte, esc func(byte) bool) int {
		for i, c := range v {
			if esc(c) {
				return i
			}
		}
		return -1
	}
	def := func(c byte) bool { return mustEscape[c] }
	json := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }
	for _, fill := range []byte{'a', 0xe9, 0x20, 0x21, 0x7e} {
		for n := range 41 { // up to two turns of 16, a word and a tail
			for at := range n {
				for c := range 256 {
					v := bytes.Repeat([]byte{fill}, n)
					v[at] = byte(c)
					if got, want := indexEscaped(v), naive(v, def); got != want {
						t.Fatalf("indexEscaped(%q) = %d, want %d", v, got, want)
					}
					if got, want := indexJSON(v), naive(v, json); got != want {
						t.Fatalf("indexJSON(%q) = %d, want %d", v, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkAppendEscaped: a User-Agent, a request line and a value to escape, as
// the combined format writes them.
func BenchmarkAppendEscaped(b *testing.B) {
	vals := [][]byte{
		[]byte("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"),
		[]byte("GET /static/css/site.min.css?v=20240101 HTTP/1.1"),
		[]byte("http://example.com/a \"quoted\" r\xc3\xa9f\xc3\xa9rer"),
	}
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	for range b.N {
		dst = dst[:0]
		for _, v := range vals {
			dst = appendEscaped(dst, v)
		}
	}
}

// BenchmarkIndexEscaped: values with nothing to escape, the common case (a
// User-Agent, a request line, a referer).
func BenchmarkIndexEscaped(b *testing.B) {
	vals := [][]byte{
		[]byte("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"),
		[]byte("GET /static/css/site.min.css?v=20240101 HTTP/1.1"),
		[]byte("https://example.com/start?q=1"),
	}
	n := 0
	for range b.N {
		for _, v := range vals {
			n += indexEscaped(v) + indexJSON(v)
		}
	}
	if n != -6*b.N {
		b.Fatal(n)
	}
}

// Every variable plainVars names exists under that name (a renamed one would lose
// nothing but its speed, silently).
func TestPlainVarsExist(t *testing.T) {
	vars, err := httpcore.VariablesOf(conf.MustRegistry(upstream.Module, httpcore.Module, proxy.Module, Module))
	if err != nil {
		t.Fatal(err)
	}
	for name := range plainVars {
		ref, err := vars.Ref(name, conf.Pos{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := ref.Variable(); v == nil || v.Name != name || v.Prefix {
			t.Errorf("%s: %+v", name, v)
		}
	}
}
