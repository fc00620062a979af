package authbasic

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Lookup in the table built once must find what nginx's scan of the file finds,
// for files of short lines over a small alphabet, where every quirk comes up.
func TestTableMatchesNginxScan(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const alphabet = "ab:\n\n\r#x"
	users := []string{"a", "b", "ab", "ba", "aa", "abx", "a\rb", "a\nb", "#a", "\ra", "x", "aab", "ab\n"}
	for range 20000 {
		file := []byte(randomString(r, alphabet, r.IntN(40)))
		tbl, _ := ParseTable(file)
		for _, u := range users {
			got := tbl.Lookup([]byte(u))
			f, ok := scanFile(file, []byte(u))
			if (got != nil) != ok || (ok && got.field != ParseHash(f).field) {
				t.Fatalf("file %q user %q: table %v, nginx %v %q", file, u, got, ok, f)
			}
		}
	}
}

// nginx reads the file 2048 bytes at a time: a password field longer than that is
// cut, wherever it starts.
func TestScanCutsLongFields(t *testing.T) {
	for _, pad := range []int{0, 1, 1000, 2040, 2047, 2048, 5000} {
		for _, n := range []int{2046, 2047, 2048, 2049, 4100} {
			file := strings.Repeat("#\n", pad/2) + "u:" + strings.Repeat("y", n) + "\n"
			f, ok := scanFile([]byte(file), []byte("u"))
			tbl, _ := ParseTable([]byte(file))
			if !ok || len(f) != min(n, 2048) || tbl.Lookup([]byte("u")).field != string(f) {
				t.Fatalf("pad %d field %d: got %d", pad, n, len(f))
			}
		}
	}
}

func TestTableLines(t *testing.T) {
	file := "# comment\n" +
		"\n" +
		"alice:{PLAIN}one:comment\n" +
		"alice:{PLAIN}two\n" + // the first line counts
		"bob:{PLAIN}b\r\n" + // CRLF
		"\rcarol:{PLAIN}c\n" + // starts with CR: skipped
		" dave:{PLAIN}d\n" + // the space is part of the name
		"erin\n" + // no colon: for users starting with "erin", the next line is skipped
		"erin:{PLAIN}hidden\n" +
		"erin:{PLAIN}seen\n" +
		"Frank:{PLAIN}f\n" +
		":{PLAIN}nobody\n" +
		"gina:{PLAIN}g"
	tbl, warns := ParseTable([]byte(file))
	want := map[string]string{
		"alice": "{PLAIN}one", "bob": "{PLAIN}b", " dave": "{PLAIN}d", "erin": "{PLAIN}seen",
		"Frank": "{PLAIN}f", "gina": "{PLAIN}g",
		"carol": "", "dave": "", "frank": "", "erinx": "",
	}
	for u, f := range want {
		h := tbl.Lookup([]byte(u))
		if (h == nil) != (f == "") || (h != nil && h.field != f) {
			t.Errorf("user %q: got %+v, want %q", u, h, f)
		}
		g, ok := scanFile([]byte(file), []byte(u))
		if ok != (f != "") || string(g) != f {
			t.Errorf("nginx scan, user %q: %q %v", u, g, ok)
		}
	}
	if len(warns) != 4 {
		t.Errorf("warnings: %v", warns)
	}
}

func BenchmarkLookup(b *testing.B) {
	var file bytes.Buffer
	for i := range 10000 {
		fmt.Fprintf(&file, "user%d:{PLAIN}pw\n", i)
	}
	tbl, _ := ParseTable(file.Bytes())
	user := []byte("user4321")
	b.ReportAllocs()
	for b.Loop() {
		if tbl.Lookup(user) == nil {
			b.Fatal("not found")
		}
	}
}
