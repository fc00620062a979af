package splitclients

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/nginxtest"
)

func load(t *testing.T, http string) (*Conf, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.conf"), []byte("http {\n"+http+"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: conf.MustRegistry(httpcore.Module, Module), Prefix: dir, File: "main.conf"})
	if err != nil {
		return nil, err
	}
	return cfg.MainConf(Module).(*Conf), nil
}

const testSplits = `
split_clients "${http_x_key}" $star {
	0.5% a;
	2% b;
	10% c;
	33.33% d;
	* e;
}
split_clients "${http_x_key}salt" $partial {
	25% first;
	.5% second;
	5.% third;
}
split_clients "${http_x_key}" $full {
	50% one;
	50% two;
}
split_clients "$http_x_key" $tiny {
	0.01% rare;
	* common;
}
`

// TestSplitAgainstNginx: 1,000 keys land in the bucket nginx 1.22 puts them in.
func TestSplitAgainstNginx(t *testing.T) {
	sc, err := load(t, testSplits)
	if err != nil {
		t.Fatal(err)
	}
	ng := nginxtest.Start(t, testSplits+`server { LISTEN; location / { return 200 "$star|$partial|$full|$tiny"; } }`, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/"
	counts := map[string]int{}
	for i := range 1000 {
		var key string
		switch {
		case i < 25:
			key = strings.Repeat("k", i) // every length, every tail of the hash
		case i < 50:
			key = fmt.Sprintf("192.168.%d.%d", i, 255-i) // addresses, as $remote_addr
		default:
			b := make([]byte, rng.IntN(40))
			for j := range b {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			}
			key = string(b)
		}
		_, want := ng.Get(t, "/", "X-Key: "+key)
		var got []string
		for _, sp := range sc.Splits {
			k := key
			if sp.Var == "partial" {
				k += "salt"
			}
			got = append(got, sp.Value([]byte(k)))
		}
		if g := strings.Join(got, "|"); g != want {
			t.Errorf("key %q: %s, nginx %s (hash %08x)", key, g, want, Hash([]byte(key)))
		}
		counts[got[0]]++
	}
	t.Logf("$star buckets for 1000 keys: %v", counts)
}

// TestSplitPercentages: nginx's fixed-point percentages and their errors.
func TestSplitPercentages(t *testing.T) {
	for in, want := range map[string]uint32{"0.5%": 50, "2%": 200, "33.33%": 3333, ".5%": 50, "5.%": 500, "100%": 10000, "*": 0, "0.01%": 1} {
		if got, err := ParsePercent(in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "%", "5", "0%", "0.00%", "1.234%", "1..2%", "-1%", "+1%", "1e2%", "a%", "50 %"} {
		if _, err := ParsePercent(in); err == nil {
			t.Errorf("ParsePercent(%q) accepted", in)
		}
	}
	// The part that reaches 100% takes every hash left (nginx 1.29: 1.22 left the
	// rounding remainder, hashes from 0xfffffffe here, with an empty value).
	limits, err := Limits([]uint32{5000, 5000})
	if err != nil || limits[0] != 0x7fffffff || limits[1] != 0 {
		t.Errorf("limits %x %v", limits, err)
	}
	if _, err := Limits([]uint32{5000, 5001}); err == nil || err.Error() != "percent total is greater than 100%" {
		t.Errorf("err = %v", err)
	}
}

func TestSplitConfigErrors(t *testing.T) {
	for _, tc := range []struct{ http, want string }{
		{"split_clients $a b { }", `invalid variable name "b" in `},
		{"split_clients $a $ { }", `invalid variable name "$" in `},
		{"split_clients $a $b {\n 50% x;\n 1.234% y;\n}", `invalid percent value "1.234%" in `},
		{"split_clients $a $b {\n 50% x;\n 0% y;\n}", `invalid percent value "0%" in `},
		{"split_clients $a $b {\n 50 x;\n}", `invalid percent value "50" in `},
		{"split_clients $a $b {\n 60% x;\n 50% y;\n}", `percent total is greater than 100% in `},
		{"split_clients $a $b {\n 60% x;\n * y;\n 1% z;\n}", `percent total is greater than 100% in `},
	} {
		_, err := load(t, tc.http)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.http, err, tc.want)
			continue
		}
		if out, ok := nginxtest.StartError(t, tc.http, nil); ok {
			t.Errorf("%q: nginx accepts it: %s", tc.http, out)
		}
	}
}

// BenchmarkLookup: hashing a key and picking its part allocates nothing.
func BenchmarkLookup(b *testing.B) {
	limits, _ := Limits([]uint32{50, 200, 1000, 3333, 0})
	sp := &Split{Values: []string{"a", "b", "c", "d", "e"}, limits: limits}
	key := []byte("203.0.113.42Mozilla/5.0")
	b.ReportAllocs()
	for b.Loop() {
		if sp.Lookup(key) < 0 {
			b.Fatal()
		}
	}
}

func BenchmarkHash(b *testing.B) {
	key := []byte("203.0.113.42")
	b.ReportAllocs()
	b.SetBytes(int64(len(key)))
	for b.Loop() {
		Hash(key)
	}
}
