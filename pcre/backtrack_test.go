package pcre

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// execSubjects are subjects for the differential tests: URIs, case, newlines,
// word boundaries, multi-byte UTF-8 and invalid UTF-8.
var execSubjects = []string{
	"", "a", "/", "\n", "/static/images/2024/photo_big.JPG", "/old/abc", "/old/abc\n",
	"/api/v1/users/42?x=1", "ab\nAB\n", "a b-c_d", "é", "/caf\u00e9/\u212a", "k\u212aK",
	"\xff", "a\xffb", "\xe2\x82", "/\xc3\x28/x", "\xed\xa0\x80", "\xf4\x90\x80\x80z", "aaaaaaaaaaaaaaaaaaab",
}

// diffExec matches subject with the backtracker (through Exec and ExecString, with
// every length of captures buffer) and with Go's regexp, and reports a difference.
func diffExec(re *Regexp, subject []byte) error {
	want := re.re.FindSubmatchIndex(subject)
	if m := re.Match(subject); m != (want != nil) {
		return fmt.Errorf("%q (RE2 %q) on %q: Match %v, regexp %v", re.String(), re.RE2(), subject, m, want != nil)
	}
	for _, n := range []int{re.CapLen(), 2, 1, re.CapLen() + 3} {
		caps := make([]int, n)
		for i := range caps {
			caps[i] = -7
		}
		got, ok := re.Exec(subject, caps)
		if ok != (want != nil) {
			return fmt.Errorf("%q (RE2 %q) on %q: match %v, regexp %v", re.String(), re.RE2(), subject, ok, want != nil)
		}
		if !ok {
			continue
		}
		if got != min(n, len(want)) || !slices.Equal(caps[:got], want[:got]) {
			return fmt.Errorf("%q (RE2 %q) on %q, %d caps: %v (%d set), regexp %v", re.String(), re.RE2(), subject, n, caps, got, want)
		}
		caps2 := make([]int, n)
		if got2, _ := re.ExecString(string(subject), caps2); got2 != got || !slices.Equal(caps2[:got2], caps[:got]) {
			return fmt.Errorf("%q on %q: ExecString %v, Exec %v", re.String(), subject, caps2[:got2], caps[:got])
		}
	}
	return nil
}

// goRegexp wraps a pattern in Go's syntax, not nginx's, so the backtracker also
// meets what the translation never writes (Unicode classes and case folding, (?U)).
func goRegexp(expr string) (*Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	names := re.SubexpNames()
	return newRegexp(re, expr, false, names)
}

// TestExecTable: the translation table's patterns on its subjects and on the
// UTF-8 and invalid UTF-8 ones, as nginx patterns and as Go patterns.
func TestExecTable(t *testing.T) {
	for _, tc := range patternTable {
		re, err := Compile(tc.pattern, tc.caseless)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(slices.Clone(tc.subjects), execSubjects...) {
			if err := diffExec(re, []byte(s)); err != nil {
				t.Error(err)
			}
		}
	}
	for _, p := range []string{`(?i)k`, `(?i)[a-z]+`, `\pL+`, `(?U)(a+)(a*)`, `(a*)+`, `(a|ab)(c|bcd)(d*)`,
		`(?s).(.)`, `.(.)`, `\b(\w+)\b`, `\B(.)`, `(?m)^(.*)$`, `^$`, `(a?){0}b`, `x*`, `(?:(a)|b)*`,
		`[^a]`, `[\x{80}-\x{10FFFF}]`, `\x{FFFD}`, `(é|e)+`, `(?i)(é)`, `(a+)+b`, `(?:a*)*c`, `(|a)*`, `(?:a{0,3}){0,3}b`} {
		re, err := goRegexp(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range execSubjects {
			if err := diffExec(re, []byte(s)); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestExecRandomPatterns compares the backtracker with Go's regexp on generated
// nginx patterns and subjects (bytes of every kind), and on subjects too long for
// the backtracker (Go's regexp then runs: the results must still be one).
func TestExecRandomPatterns(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	n := 3000
	if s := os.Getenv("PCRE_RANDOM"); s != "" {
		n, _ = strconv.Atoi(s)
		rng = rand.New(rand.NewPCG(uint64(n), 13))
	}
	if testing.Short() {
		n = 500
	}
	const alphabet = "abcABC _\n\t-./1\xc3\xa9\xe2\x84\xaa\xff\x80"
	compared := 0
	for range n {
		re, err := Compile(randomPattern(rng, 0), rng.IntN(4) == 0)
		if err != nil {
			continue
		}
		for range 12 {
			s := make([]byte, rng.IntN(12))
			for i := range s {
				s[i] = pickByte(rng, alphabet)
			}
			if err := diffExec(re, s); err != nil {
				t.Fatal(err)
			}
			compared++
		}
	}
	for tried := 0; tried < 10; {
		re, err := Compile(randomPattern(rng, 0), false)
		if err != nil {
			continue
		}
		tried++
		long := []byte(strings.Repeat("ab/\xff", re.bt.maxLen/4+1))
		if err := diffExec(re, long); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d subjects compared", compared)
}

// FuzzExec: Exec's offsets are Go's regexp's, on nginx patterns (translated) and,
// with goSyntax, on Go's own.
func FuzzExec(f *testing.F) {
	for _, tc := range patternTable {
		for _, s := range append(slices.Clone(tc.subjects), execSubjects[:6]...) {
			f.Add(tc.pattern, tc.caseless, false, []byte(s))
		}
	}
	for _, s := range execSubjects {
		f.Add(`(?i)\b(k)(\w*)`, false, true, []byte(s))
		f.Add(`^(.)(?s:(.))?`, false, true, []byte(s))
	}
	f.Fuzz(func(t *testing.T, pattern string, caseless, goSyntax bool, subject []byte) {
		var re *Regexp
		var err error
		if goSyntax {
			re, err = goRegexp(pattern)
		} else {
			re, err = Compile(pattern, caseless)
		}
		if err != nil {
			return
		}
		if len(subject) > re.bt.maxLen {
			subject = subject[:max(re.bt.maxLen, 0)]
		}
		if err := diffExec(re, subject); err != nil {
			t.Fatal(err)
		}
	})
}

// TestExecLinear: patterns that backtrack exponentially in a naive engine, on a
// subject of 2000 bytes, finish (each instruction runs at each position once: a
// naive engine would not finish before the test's timeout) with regexp's answer.
func TestExecLinear(t *testing.T) {
	s := []byte(strings.Repeat("a", 2000) + "!")
	for _, p := range []string{`^(a+)+(b|c|d)+$`, `(a|aa)*(a|aa)*b`, `^(\w+\s?)*$`} {
		re := MustCompile(p, false)
		if len(s) > re.bt.maxLen {
			t.Fatalf("%q: the subject is past the backtracker's %d bytes", p, re.bt.maxLen)
		}
		if err := diffExec(re, s); err != nil {
			t.Fatal(err)
		}
	}
}
