package authbasic

import (
	"testing"
)

// One verification per scheme, with the fixture's hashes (bcrypt at cost 5, SHA-crypt
// at 5000 rounds, BSDi at 725 iterations).
func BenchmarkVerify(b *testing.B) {
	data, users := readFixture(b)
	tbl, _ := ParseTable(data)
	for _, name := range []string{"plain", "sha", "ssha", "des", "bigcrypt", "bsdi", "apr1", "md5", "sha256", "sha512", "bcrypt-2y"} {
		var pw string
		for _, u := range users {
			if u.name == name {
				pw = u.password
			}
		}
		h := tbl.Lookup([]byte(name))
		password := []byte(pw)
		b.Run(h.Scheme().String()+"/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !h.Verify(password) {
					b.Fatal("no match")
				}
			}
		})
	}
}

// The access phase for a fast scheme, as a loop runs it: decode the header, find
// the user, verify. It allocates nothing.
func BenchmarkCheckInline(b *testing.B) {
	lc := locConf("r", writeFile(b, b.TempDir(), "users", "# users\nann:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"))
	lc.File.Load(nil)
	c := NewChecker(nil, nil)
	var a Attempt
	auth := basic("ann", "secret")
	done := func(*Attempt) { b.Fatal("pending") }
	b.ReportAllocs()
	for b.Loop() {
		if c.Check(&a, lc, auth, done) != Allowed {
			b.Fatal(a.Outcome)
		}
	}
}

func BenchmarkParseBasic(b *testing.B) {
	auth := basic("someone", "a rather long password")
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, ok := ParseBasic(buf[:0], auth); !ok {
			b.Fatal("no")
		}
	}
}
