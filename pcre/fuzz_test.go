package pcre

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"slices"
	"testing"
)

// FuzzTranslate: the translator never panics; what it accepts, Go's regexp compiles
// (short of RE2's size limits) with the same groups; and where the system's PCRE2 is
// there, it compiles it too and agrees on every ASCII subject.
func FuzzTranslate(f *testing.F) {
	for _, tc := range patternTable {
		for _, s := range tc.subjects {
			f.Add(tc.pattern, tc.caseless, []byte(s))
		}
	}
	for _, p := range []string{`^/(?=a)`, `(a)\1`, `a++`, `[\w-.]`, `(?x) a # c`, `\Q(\E+`, `[[:alpha:]-]`, `(?i)[^[:upper:]]`} {
		f.Add(p, false, []byte("a(b"))
	}
	f.Fuzz(func(t *testing.T, pattern string, caseless bool, subject []byte) {
		tr, err := Translate(pattern, caseless)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(pattern) {
				t.Fatalf("%q: error %v has no offset in the pattern", pattern, err)
			}
			return
		}
		re, err := regexp.Compile(tr.RE2)
		if err != nil {
			var se *syntax.Error
			if errors.As(err, &se) && (se.Code == syntax.ErrLarge || se.Code == syntax.ErrNestingDepth) {
				return
			}
			t.Fatalf("%q translates to %q, which Go refuses: %v", pattern, tr.RE2, err)
		}
		if re.NumSubexp() != tr.NumCaptures() || !slices.Equal(re.SubexpNames(), tr.Names) {
			t.Fatalf("%q: groups %q, translation says %q", pattern, re.SubexpNames(), tr.Names)
		}
		oc, oerr, ok := oracle(t, pattern, caseless)
		if !ok {
			return
		}
		if oerr != nil {
			t.Fatalf("%q: PCRE2 refuses it (%v), the translation gives %q", pattern, oerr, tr.RE2)
		}
		defer oc.Free()
		if oc.NumCaptures() != tr.NumCaptures() {
			t.Fatalf("%q: %d captures, PCRE2 %d", pattern, tr.NumCaptures(), oc.NumCaptures())
		}
		for _, c := range subject {
			if c >= 0x80 {
				return // bytes against characters: the documented difference
			}
		}
		pre, err := newRegexp(re, pattern, caseless, tr.Names)
		if err != nil {
			t.Fatal(err)
		}
		if err := compareWithPCRE(pre, oc, subject); err != nil {
			t.Fatal(err)
		}
	})
}
