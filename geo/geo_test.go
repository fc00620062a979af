package geo

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/nginxtest"
)

func load(t *testing.T, http string, files map[string]string) (*conf.Config, error) {
	t.Helper()
	dir := t.TempDir()
	files["main.conf"] = "http {\n" + http + "\n}\n"
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return conf.Load(conf.Options{Registry: conf.MustRegistry(httpcore.Module, Module), Prefix: dir, File: "main.conf"})
}

func geos(t *testing.T, http string) map[string]*Geo {
	t.Helper()
	cfg, err := load(t, http, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]*Geo{}
	for _, g := range cfg.MainConf(Module).(*Conf).Geos {
		res[g.Var] = g
	}
	return res
}

const testGeos = `
geo $arg_ip $cidr {
	default def;
	10.0.0.0/8 ten;
	10.1.0.0/16 ten-one;
	10.1.2.3 host;
	10.1.2.0/24 ten-one-two;
	delete 10.1.0.0/16;
	10.3.0.0/16 deleted-later;
	delete 10.3.0.0/16;
	192.168.0.0/24 lan;
	192.168.0.0/24 lan2;
	::1 v6-lo;
	2001:db8::/32 doc;
	2001:db8:1::/48 doc1;
	2001:db8:1::1/128 doc1-host;
	::ffff:1.2.3.0/120 mapped;
	0.0.0.0/1 low-half;
	255.255.255.255 bcast;
	127.0.0.1/8 meaningless;
	172.16.0.0/12 private;
	172.16.5.0/24 private-5;
	172.31.255.255/32 private-last;
	ffff::/16 v6-top;
	::/1 v6-low-half;
}
geo $arg_ip $nodefault {
	1.2.3.0/24 only;
	2001:db8::/32 only6;
}
geo $arg_ip $v4default {
	0.0.0.0/0 all4;
	1.2.3.4 one;
}
geo $arg_ip $ranges {
	ranges;
	default rdef;
	10.0.0.0-10.0.255.255 a;
	10.0.1.0-10.0.1.255 b;
	10.0.0.0-10.0.0.10 c;
	10.0.255.0-10.0.255.255 c2;
	10.1.255.0-10.2.0.255 d;
	11.0.0.0-11.255.255.255 e;
	11.1.0.0-11.1.255.255 f;
	delete 11.1.0.0-11.1.255.255;
	11.2.3.4-11.2.3.4 g;
	0.0.0.0-0.0.0.0 zero;
	255.255.0.0-255.255.255.254 top;
	20.0.0.5-20.3.0.7 span;
	20.1.0.0-20.1.255.255 span-inner;
	010.0.0.1-10.0.0.1 decimal;
}
geo $arg_ip $ranges_nodefault {
	ranges;
	1.0.0.0-1.0.0.255 one;
}
geo $trusted {
	proxy 127.0.0.1;
	default d;
	1.2.3.4 xff-a;
	5.6.7.8 xff-b;
	127.0.0.1 self;
	2001:db8::1 xff-v6;
}
geo $recursive {
	proxy 127.0.0.0/8;
	proxy 1.2.3.4;
	proxy_recursive;
	default d;
	1.2.3.4 xff-a;
	5.6.7.8 xff-b;
	127.0.0.1 self;
	9.9.9.9 nine;
}
geo $arg_ip $argproxy {
	proxy 10.0.0.0/8;
	default d;
	10.0.0.1 ten;
	1.2.3.4 xff-a;
}
`

// addrInputs are what both nginx and the package look up ($arg_ip as sent).
var addrInputs = []string{
	"", "10.1.2.3", "10.1.2.4", "10.1.0.1", "10.1.3.1", "10.2.0.0", "10.3.0.1", "192.168.0.5", "::1", "2001:db8::5",
	"2001:db8:1::5", "2001:db8:1::1", "2001:DB8:1::1", "::ffff:1.2.3.4", "1.2.3.4", "::ffff:10.1.2.3", "255.255.255.255",
	"junk", "010.001.002.003", "1..2.3", "1.2.3.", ".1.2.3", "[::1]", "1.2.3.4:80", "fe80::1", "::", "0.0.0.0",
	"127.0.0.1", "127.255.255.255", "128.0.0.1", "10.0.0.5", "10.0.0.10", "10.0.0.11", "10.0.1.7", "10.0.255.3",
	"10.1.255.3", "10.2.0.200", "10.2.1.0", "11.1.2.3", "11.2.3.4", "11.2.3.5", "255.255.255.254", "255.255.0.0",
	"1:2:3:4:5:6:7::", "::1.2.3.4", "::ffff:255.255.255.255", "1::2::3", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4",
	"::ffff:1.2.3", "12345::", "ffff::1", "8000::", "7fff:ffff::", "172.16.5.9", "172.31.255.255", "172.32.0.0",
	"172.15.255.255", "20.0.0.4", "20.0.0.5", "20.0.255.255", "20.1.7.7", "20.2.0.0", "20.3.0.7", "20.3.0.8",
	"1.0.0.0", "1.0.0.255", "1.0.1.0", "256.1.1.1", "1.2.3.4.5", "0:0:0:0:0:0:0:1", ":1", "::1:", "1:::2", "a.b.c.d",
}

func TestGeoAgainstNginx(t *testing.T) {
	g := geos(t, testGeos)
	ng := nginxtest.Start(t, testGeos+`
server {
	LISTEN;
	location / { return 200 "$cidr|$nodefault|$v4default|$ranges|$ranges_nodefault|$argproxy"; }
}`, nil)
	inputs := append([]string{}, addrInputs...)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		// Near the networks and range ends, where an off-by-one would show.
		bases := []uint32{0x0a000000, 0x0a010200, 0x0a01ff00, 0x0b010000, 0xac100000, 0xac1f0000, 0x14000000, 0x14010000, 0x14030000, 0xffff0000, 0x7f000000}
		v := bases[rng.IntN(len(bases))] + uint32(rng.IntN(0x20000)) - 0x10000
		inputs = append(inputs, fmt.Sprintf("%d.%d.%d.%d", v>>24, v>>16&0xff, v>>8&0xff, v&0xff))
		inputs = append(inputs, fmt.Sprintf("2001:db8:%x::%x", rng.IntN(3), rng.IntN(3)))
	}
	for _, in := range inputs {
		_, want := ng.Get(t, "/?ip="+in)
		addr := ParseAddr([]byte(in))
		var got []string
		for _, v := range []string{"cidr", "nodefault", "v4default", "ranges", "ranges_nodefault", "argproxy"} {
			got = append(got, g[v].Value(g[v].Addr(addr, nil)))
		}
		if strings.Join(got, "|") != want {
			t.Errorf("ip=%s: %s, nginx %s", in, strings.Join(got, "|"), want)
		}
	}
}

// TestGeoForwardedFor: with "proxy", X-Forwarded-For replaces a trusted address,
// its last element, or with proxy_recursive the last untrusted one, across several
// headers, as nginx 1.22 reads them.
func TestGeoForwardedFor(t *testing.T) {
	g := geos(t, testGeos)
	ng := nginxtest.Start(t, testGeos+`
server {
	LISTEN;
	location / { return 200 "$trusted|$recursive|$argproxy"; }
}`, nil)
	client := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		arg string
		xff []string
	}{
		{"", nil},
		{"", []string{"1.2.3.4"}},
		{"", []string{"5.6.7.8, 1.2.3.4"}},
		{"", []string{"1.2.3.4, 5.6.7.8"}},
		{"", []string{"junk"}},
		{"", []string{"1.2.3.4:8080"}},
		{"", []string{"[2001:db8::1]:80"}},
		{"", []string{"2001:db8::1"}},
		{"", []string{"1.2.3.4 , ,"}},
		{"", []string{",1.2.3.4"}},
		{"", []string{","}},
		{"", []string{"1.2.3.4", "5.6.7.8"}},
		{"", []string{"9.9.9.9, 1.2.3.4"}},
		{"", []string{"9.9.9.9, 5.6.7.8, 1.2.3.4"}},
		{"", []string{"9.9.9.9", "1.2.3.4"}},
		{"", []string{"9.9.9.9", "5.6.7.8, 1.2.3.4"}},
		{"", []string{"junk", "1.2.3.4"}},
		{"", []string{"1.2.3.4", "junk"}},
		{"", []string{"127.0.0.2, 127.0.0.3"}},
		{"", []string{"1.2.3.4,127.0.0.9"}},
		{"", []string{"5.6.7.8 1.2.3.4"}},
		{"10.0.0.1", []string{"1.2.3.4"}},
		{"10.0.0.2", []string{"1.2.3.4"}},
		{"11.0.0.1", []string{"1.2.3.4"}},
		{"junk", []string{"1.2.3.4"}},
	} {
		var hdrs []string
		var xff [][]byte
		for _, h := range tc.xff {
			hdrs = append(hdrs, "X-Forwarded-For: "+h)
			xff = append(xff, []byte(h))
		}
		_, want := ng.Get(t, "/?ip="+tc.arg, hdrs...)
		arg := ParseAddr([]byte(tc.arg))
		got := g["trusted"].Value(g["trusted"].Addr(client, xff)) + "|" +
			g["recursive"].Value(g["recursive"].Addr(client, xff)) + "|" +
			g["argproxy"].Value(g["argproxy"].Addr(arg, xff))
		if got != want {
			t.Errorf("ip=%s xff=%q: %s, nginx %s", tc.arg, tc.xff, got, want)
		}
	}
}

// TestGeoConfigErrors: what nginx refuses in a geo block is refused at its line.
func TestGeoConfigErrors(t *testing.T) {
	for _, tc := range []struct{ http, want string }{
		{"geo a { }", `invalid variable name "a" in `},
		{"geo $a b { }", `invalid variable name "b" in `},
		{"geo $ { }", `invalid variable name "$" in `},
		{"geo $a {\n 1.2.3.4/33 x;\n}", `invalid network "1.2.3.4/33" in `},
		{"geo $a {\n 1.2.3.4/ x;\n}", `invalid network "1.2.3.4/" in `},
		{"geo $a {\n 255.255.255.255/32 x;\n}", `invalid network "255.255.255.255/32" in `},
		{"geo $a {\n proxy 1.2.3;\n}", `invalid network "1.2.3" in `},
		{"geo $a {\n 1.2.3.4 x y;\n}", `invalid number of the geo parameters in `},
		{"geo $a {\n default x;\n ranges;\n}", `the "ranges" directive must be the first directive inside "geo" block in `},
		{"geo $a {\n ranges;\n 1.2.3.4 x;\n}", `invalid range "1.2.3.4" in `},
		{"geo $a {\n ranges;\n 1.2.3.5-1.2.3.4 x;\n}", `invalid range "1.2.3.5-1.2.3.4" in `},
		{"geo $a {\n ranges;\n 1.2.3.4-255.255.255.255 x;\n}", `invalid range "1.2.3.4-255.255.255.255" in `},
		{"geo $a {\n ranges;\n 1.2.3.0-1.2.3.10 x;\n 1.2.3.5-1.2.3.20 y;\n}", `range "1.2.3.5-1.2.3.20" overlaps "1.2.3.0-1.2.3.10" in `},
		{"geo $a {\n ranges;\n 1.2.3.5-1.2.3.6 x;\n 1.2.3.0-1.2.3.20 y;\n}", `range "1.2.3.0-1.2.3.20" overlaps "1.2.3.5-1.2.3.6" in `},
		{"geo $a {\n 1.2.3.4 x;\n a { }\n}", `unexpected "{" in `},
	} {
		_, err := load(t, tc.http, map[string]string{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.http, err, tc.want)
			continue
		}
		if out, ok := nginxtest.StartError(t, tc.http, nil); ok {
			t.Errorf("%q: nginx accepts it: %s", tc.http, out)
		} else if !strings.Contains(out, strings.TrimSuffix(strings.TrimSuffix(tc.want, " in "), " in")) {
			t.Logf("%q: nginx says %s", tc.http, out)
		}
	}
}

// TestGeoWarnings: duplicates and meaningless bits load with nginx's warnings.
func TestGeoWarnings(t *testing.T) {
	cfg, err := load(t, "geo $a {\n 10.0.0.1/8 x;\n 10.0.0.0/8 y;\n delete 11.0.0.0/8;\n proxy 1.2.3.4/24;\n}\ngeo $b {\n ranges;\n default x;\n default y;\n 1.0.0.0-1.0.0.9 a;\n 1.0.0.0-1.0.0.9 b;\n delete 2.0.0.0-2.0.0.1;\n}", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range cfg.Warnings {
		got = append(got, w.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		`low address bits of 10.0.0.1/8 are meaningless in `, `duplicate network "10.0.0.0/8", value: "y", old value: "x" in `,
		`no network "11.0.0.0/8" to delete in `, `low address bits of 1.2.3.4/24 are meaningless in `,
		`duplicate default geo range value: "y", old value: "x" in `, `duplicate range "1.0.0.0-1.0.0.9", value: "b", old value: "a" in `,
		`no address range "2.0.0.0-2.0.0.1" to delete in `,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning %q in:\n%s", want, all)
		}
	}
}

// TestGeoInclude: include reads network lines from files, globs too.
func TestGeoInclude(t *testing.T) {
	cfg, err := load(t, "geo $a {\n default d;\n include nets.conf;\n include more*.conf;\n}", map[string]string{
		"nets.conf": "10.0.0.0/8 ten;\n", "more1.conf": "11.0.0.0/8 eleven;\n", "more2.conf": "12.0.0.0/8 twelve;\n"})
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.MainConf(Module).(*Conf).Geos[0]
	for in, want := range map[string]string{"10.1.1.1": "ten", "11.1.1.1": "eleven", "12.1.1.1": "twelve", "13.1.1.1": "d"} {
		if got := g.Value(netip.MustParseAddr(in)); got != want {
			t.Errorf("%s = %q, want %q", in, got, want)
		}
	}
	if g.Source != "" || g.Var != "a" {
		t.Errorf("source %q var %q", g.Source, g.Var)
	}
}

// TestParseAddr: nginx's address syntax, not Go's.
func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{
		"1.2.3.4": "1.2.3.4", "010.0.0.1": "10.0.0.1", "1..2.3": "1.0.2.3", "1.2.3.": "1.2.3.0",
		"255.255.255.255": "invalid IP", "::1": "::1", "::ffff:1.2.3.4": "::ffff:1.2.3.4", "1::": "1::",
		"1:2:3:4:5:6:7::": "invalid IP", "::1.2.3.4": "::102:304", "fe80::1%eth0": "invalid IP", "[::1]": "invalid IP",
		"": "invalid IP", "1.2.3": "invalid IP", "1:2:3:4:5:6:7:8": "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9": "invalid IP",
		"12345::": "invalid IP", ":1": "invalid IP", "1:2:3:4:5:6:1.2.3.4": "1:2:3:4:5:6:102:304",
	} {
		if got := ParseAddr([]byte(in)).String(); got != want {
			t.Errorf("ParseAddr(%q) = %s, want %s", in, got, want)
		}
	}
}
