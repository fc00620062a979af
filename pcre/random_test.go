package pcre

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// randomPattern writes a pattern from the PCRE constructs the translator supports,
// small enough to run on short subjects.
func randomPattern(rng *rand.Rand, depth int) string {
	var b strings.Builder
	n := 1 + rng.IntN(4)
	for i := 0; i < n; i++ {
		if i > 0 && rng.IntN(6) == 0 {
			b.WriteByte('|')
		}
		b.WriteString(randomAtom(rng, depth))
		if rng.IntN(3) == 0 {
			q := pick(rng, []string{"*", "+", "?", "{2}", "{1,2}", "{0,}", "*?", "+?", "??", "{1,3}?"})
			b.WriteString(q)
		}
	}
	return b.String()
}

func randomAtom(rng *rand.Rand, depth int) string {
	switch k := rng.IntN(16); {
	case k < 4:
		return string(pickByte(rng, "abcAB _\n-."))
	case k == 4:
		return "."
	case k == 5:
		return pick(rng, []string{`\d`, `\w`, `\s`, `\D`, `\W`, `\S`, `\n`, `\t`, `\x41`, `\.`, `\N`, `\x0b`})
	case k == 6:
		return randomClass(rng)
	case k == 7 && depth < 3:
		return "(" + randomPattern(rng, depth+1) + ")"
	case k == 8 && depth < 3:
		return "(?:" + randomPattern(rng, depth+1) + ")"
	case k == 9 && depth < 3:
		return "(?<g" + string(rune('a'+depth)) + string(rune('a'+rng.IntN(26))) + ">" + randomPattern(rng, depth+1) + ")"
	case k == 10 && depth < 3:
		flags := pick(rng, []string{"i", "s", "m", "-i", "U", "x", "xx", "n", "is", "i-s"})
		if rng.IntN(2) == 0 {
			return "(?" + flags + ")"
		}
		return "(?" + flags + ":" + randomPattern(rng, depth+1) + ")"
	case k == 11:
		return pick(rng, []string{"^", "$", `\A`, `\z`, `\Z`, `\b`, `\B`})
	case k == 12:
		return `\Q` + string(pickByte(rng, "a.b*")) + `\E`
	}
	return string(pickByte(rng, "abc"))
}

func randomClass(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('[')
	if rng.IntN(3) == 0 {
		b.WriteByte('^')
	}
	for n := 1 + rng.IntN(3); n > 0; n-- {
		b.WriteString(pick(rng, []string{"a", "b-d", "A-C", `\d`, `\s`, `\W`, "[:alpha:]", "[:^lower:]", "[:upper:]", "_", `\n`, " ", "-", `\]`, `\x41-\x43`}))
	}
	b.WriteByte(']')
	return b.String()
}

// TestTranslateRandomPatterns compares generated patterns with PCRE2 on generated
// ASCII subjects: matches, and captures but where the package documents otherwise.
func TestTranslateRandomPatterns(t *testing.T) {
	if _, _, ok := oracle(t, "a", false); !ok {
		t.Skip("libpcre2-8 not available")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	n := 1500
	if s := os.Getenv("PCRE_RANDOM"); s != "" {
		n, _ = strconv.Atoi(s)
		rng = rand.New(rand.NewPCG(uint64(n), 9))
	}
	if testing.Short() {
		n = 200
	}
	compared, refusedBoth, refusedRE2 := 0, 0, 0
	for range n {
		pattern := randomPattern(rng, 0)
		caseless := rng.IntN(4) == 0
		re, err := Compile(pattern, caseless)
		oc, oerr, _ := oracle(t, pattern, caseless)
		if oerr != nil {
			refusedBoth++
			if err == nil {
				t.Errorf("%q: PCRE2 refuses it (%v), the translation does not", pattern, oerr)
			}
			continue
		}
		if err != nil {
			refusedRE2++
			if !strings.Contains(err.Error(), "not supported") && !strings.Contains(err.Error(), "RE2") {
				t.Errorf("%q: %v, PCRE2 compiles it", pattern, err)
			}
			oc.Free()
			continue
		}
		for range 8 {
			s := make([]byte, rng.IntN(8))
			for i := range s {
				s[i] = pickByte(rng, "abcABC _\n\t\v-.1")
			}
			if err := compareWithPCRE(re, oc, s); err != nil {
				t.Error(err)
			}
			compared++
		}
		oc.Free()
	}
	t.Logf("%d patterns: %d refused by PCRE2, %d by the translation only; %d subjects compared", n, refusedBoth, refusedRE2, compared)
}

func pick(rng *rand.Rand, s []string) string { return s[rng.IntN(len(s))] }
func pickByte(rng *rand.Rand, s string) byte { return s[rng.IntN(len(s))] }
