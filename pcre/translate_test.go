package pcre

import (
	"fmt"
	"strings"
	"testing"
)

// oracleCode is a pattern compiled by the system's PCRE2 (see oracle).
type oracleCode interface {
	NumCaptures() int
	Match([]byte) ([]int, error)
	Free()
}

// compareWithPCRE matches subject with the translation and with PCRE2 and reports
// any difference; the caller has checked both compiled.
func compareWithPCRE(re *Regexp, oc oracleCode, subject []byte) error {
	want, err := oc.Match(subject)
	if err != nil {
		return nil // PCRE2's own limits (match limit): nothing to compare
	}
	caps := make([]int, re.CapLen())
	n, ok := re.Exec(subject, caps)
	if ok && want == nil && caps[0] == len(subject) && len(subject) > 0 && subject[len(subject)-1] == '\n' && strings.Contains(re.RE2(), "(?m:^)") {
		return nil // the documented difference: (?m)^ after a final newline
	}
	if ok != (want != nil) && len(subject) > 0 && subject[len(subject)-1] == '\n' && strings.Contains(re.RE2(), `\n?\z`) {
		return nil // the documented difference: what follows "$" sees the final newline
	}
	if ok != (want != nil) {
		return fmt.Errorf("%q (RE2 %q) on %q: match %v, PCRE2 %v", re.String(), re.RE2(), subject, ok, want != nil)
	}
	if !ok {
		return nil
	}
	got := caps[:n]
	if len(got) != len(want) {
		return fmt.Errorf("%q on %q: %d offsets, PCRE2 %d", re.String(), subject, len(got), len(want))
	}
	for i := range got {
		if got[i] == want[i] {
			continue
		}
		// The documented difference: "$" before a final newline takes the newline
		// into the match, and into the groups that end there.
		if i%2 == 1 && got[i] == len(subject) && want[i] == len(subject)-1 && subject[len(subject)-1] == '\n' {
			continue
		}
		if len(subject) > 0 && subject[len(subject)-1] == '\n' && strings.Contains(re.RE2(), `\n?\z`) {
			continue // the documented difference: "$" took the final newline
		}
		return fmt.Errorf("%q (RE2 %q) on %q: offsets %v, PCRE2 %v", re.String(), re.RE2(), subject, got, want)
	}
	return nil
}

// patterns as nginx users write them, with subjects that exercise them; each is
// compared with PCRE2 when the library is there, and must translate either way.
var patternTable = []struct {
	pattern  string
	caseless bool
	subjects []string
}{
	{`\.php$`, false, []string{"/a.php", "/a.php\n", "/a.PHP", "/a.php/x", "/a.php\n\n", ".php"}},
	{`\.(gif|jpg|jpeg)$`, true, []string{"/x.GIF", "/x.jpeg", "/x.png", "/x.Jpg\n"}},
	{`^/users/(\d+)/posts/(?<post>\w+)$`, false, []string{"/users/12/posts/abc_1", "/users/x/posts/1", "/users/7/posts/\n"}},
	{`^/(?P<a>[^/]+)/(?'b'[^/]+)`, false, []string{"/one/two/three", "//x"}},
	{`^(?i)/Admin`, false, []string{"/admin", "/ADMIN/x", "/adm"}},
	{`^/a(?i)b|c`, false, []string{"/aB", "C", "/Ab"}},
	{`(a(?i)b)c`, false, []string{"aBc", "aBC", "Abc"}},
	{`^\s+\S\d\D\w\W$`, false, []string{" \t\vx1a_!", "\v\fx1a_!", "x1a_!"}},
	{`[\s]+`, false, []string{"a\vb", "ab"}},
	{`^[^\s/]+$`, false, []string{"a\vb", "ab"}},
	{`\Q.*+\E+x`, false, []string{".*++x", ".*+x", "ab"}},
	{`a{2,3}b{2}c{1,}`, false, []string{"aabbc", "abbc", "aaaabbccc"}},
	{`a{,3}`, false, []string{"a{,3}", "aaa"}},
	{`x{`, false, []string{"x{"}},
	{`(?x) a \# b # comment
	  c`, false, []string{"a#bc", "abc"}},
	{`(?s)a.b`, false, []string{"a\nb", "axb"}},
	{`a.b`, false, []string{"a\nb", "axb"}},
	{`(?m)^b$`, false, []string{"a\nb\nc", "b"}},
	{`(?m)^$`, false, []string{"a\n\nb", "a\n"}},
	{`\Aab\z`, false, []string{"ab", "ab\n"}},
	{`ab\Z`, false, []string{"ab", "ab\n", "ab\n\n"}},
	{`(?U)a+`, false, []string{"aaa"}},
	{`(?U)a+?`, false, []string{"aaa"}},
	{`a+?`, false, []string{"aaa"}},
	{`[[:alpha:]][[:^digit:]][[:space:]]`, false, []string{"ab ", "a1 ", "aa\v"}},
	{`[a-f]+`, true, []string{"ABCDEFG", "xyz"}},
	{`[^a-f]+`, true, []string{"ABCDEFG", "xyzA"}},
	{`[]a]+`, false, []string{"]a]", "b"}},
	{`[^]a]+`, false, []string{"]a]b", "b"}},
	{`[a-]+`, false, []string{"a-a", "b"}},
	{`[\x41-\x43\n]+`, false, []string{"ABC\n", "D"}},
	{`\x41\x{42}\103\cA\e\t`, false, []string{"ABC\x01\x1b\t"}},
	{`[\W]+`, false, []string{"!@\xc3\xa9", "ab"}},
	{`[\x80-\xff]+`, false, []string{"a\xc3\xa9b", "ab"}},
	{`é+`[:2] + `(?:é)+`, false, []string{"éé", "e"}},
	{`^/caf(é|e)$`, false, []string{"/café", "/cafe", "/cafè"}},
	{`(?n)(a)(?<b>b)`, false, []string{"ab"}},
	{`(?#comment)a`, false, []string{"a"}},
	{`\bfoo\b`, false, []string{"a foo b", "afoo"}},
	{`(a|ab)(c|bcd)(d*)`, false, []string{"abcd"}},
	{`(a+)+b`, false, []string{"aaab", "aaa"}},
	{`^(?:(a)|b)*$`, false, []string{"ab", "ba", "aab"}},
	{`(?i)straße|k`, false, []string{"STRASSE", "K", "\u212a"}},
	{`k`, true, []string{"\u212a", "K"}},
	{`^/(.*)$`, false, []string{"/x\n", "/x"}},
	{`(?s)^/(.*)$`, false, []string{"/x\n", "/x"}},
	{`^/(.*?)$`, false, []string{"/x\n", "/x"}},
	{`$`, false, []string{"", "\n", "a"}},
	{`\N+`, false, []string{"ab\nc"}},
	{`\N{2}x`, false, []string{"abx", "a\nx"}},
	{`[\d-]+`, false, []string{"1-2"}},
	{`(?-i)a`, true, []string{"A", "a"}},
	{`(?i:a)b`, false, []string{"Ab", "AB"}},
	{`(?^i)a`, false, []string{"A"}},
	{`\/\-\_`, false, []string{"/-_"}},
	{`()`, false, []string{"", "x"}},
	{`\12\101\1234\0\x`, false, []string{"\nAS4\x00\x00"}},
	{`(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)\11`, false, []string{"abcdefghij\t"}},
	{`(?x)a+ ?`, false, []string{"aaa"}},
	{`(?i)[[:^lower:]]+|[[:upper:]]`, false, []string{"abcABC", "1"}},
	{`[%--]+`, false, []string{"%-"}},
	{`[\E]a]+|[\E^a]+|[^\Q\E]b]+`, false, []string{"]a", "^b", "c"}},
	{`(?xx)[ ]a]+`, false, []string{"]a", " "}},
	{`(a*b)*(c?d)+(e|f)*`, false, []string{"abbcdde", "ddfe"}},
	{`(a|b?){2}(c?){1,3}`, false, []string{"bc", "ccc"}},
}

func TestTranslateAgainstPCRE2(t *testing.T) {
	compared := 0
	for _, tc := range patternTable {
		re, err := Compile(tc.pattern, tc.caseless)
		if err != nil {
			t.Errorf("%q: %v", tc.pattern, err)
			continue
		}
		oc, oerr, ok := oracle(t, tc.pattern, tc.caseless)
		if !ok {
			continue
		}
		if oerr != nil {
			t.Errorf("%q: PCRE2 refuses it (%v), the translation does not", tc.pattern, oerr)
			continue
		}
		if oc.NumCaptures() != re.NumCaptures() {
			t.Errorf("%q: %d captures, PCRE2 %d", tc.pattern, re.NumCaptures(), oc.NumCaptures())
		}
		for _, s := range tc.subjects {
			if err := compareWithPCRE(re, oc, []byte(s)); err != nil {
				t.Error(err)
			}
			compared++
		}
		oc.Free()
	}
	if compared == 0 {
		t.Log("libpcre2-8 not loaded: translations not compared with PCRE2")
	}
}

// TestTranslateRefuses: what RE2 cannot run is an error naming the construct.
func TestTranslateRefuses(t *testing.T) {
	for _, tc := range []struct{ pattern, msg string }{
		{`^/(?=a)`, `lookahead assertion (?= is not supported by RE2 in "^/(?=a)" at "(?=a)"`},
		{`a(?!b)`, `negative lookahead`},
		{`(?<=a)b`, `lookbehind assertion (?<=`},
		{`(?<!a)b`, `negative lookbehind`},
		{`(?>a+)b`, `atomic group (?>`},
		{`a++b`, `possessive quantifier ++ is not supported`},
		{`^*`, `quantifier does not follow a repeatable item`},
		{`\b?`, `quantifier does not follow a repeatable item`},
		{`[:alpha:]`, `POSIX named classes are supported only within a class`},
		{`[\w-.]`, `invalid range in character class`},
		{`\400`, `octal value is greater than \377`},
		{`a{2}+`, `possessive quantifier {2}+`},
		{`(a)\1`, `backreference \1 is not supported by RE2 in "(a)\\1" at "\\1"`},
		{`(?<x>a)\k<x>`, `backreference \k`},
		{`(?<x>a)(?P=x)`, `named backreference`},
		{`(a)\g1`, `backreference \g`},
		{`(a(?R))`, `recursion`},
		{`(a)(?1)`, `recursion`},
		{`(?(1)a|b)`, `conditional group`},
		{`(?|a)`, `branch reset`},
		{`(*UTF)a`, `(*...) verbs`},
		{`\Ga`, `\G is not supported`},
		{`a\Kb`, `\K is not supported`},
		{`\p{L}`, `\p is not supported`},
		{`\R`, `\R is not supported`},
		{`\h`, `\h is not supported`},
		{`é+`, `quantifier after a non-ASCII character`},
		{`[é]`, `non-ASCII character in a class`},
		{`\xe9`, `character 0xe9 is a single byte`},
		{`[\xe0-\xff]`, `class with some of the bytes 0x80-0xFF`},
		{"a\xff", `byte 0xff is not UTF-8`},
		{`a{1001}`, `repeat count over RE2's limit of 1000`},
		{`(|a)+`, `a repeated item that can match empty`},
		{`(a*)*`, `a repeated item that can match empty`},
		{`(?:b?|c)+`, `a repeated item that can match empty`},
		{`(a|)*b`, `a repeated item that can match empty`},
		{`(?:$)*`, `a repeated item that can match empty`},
		{`(?:a?){2,}`, `a repeated item that can match empty`},
		{`(?<a>x)(?<a>y)`, `two named subpatterns have the same name "a"`},
		// PCRE2's own refusals keep PCRE2's wording.
		{`(abc`, `missing closing parenthesis in "(abc"`},
		{`abc)`, `unmatched closing parenthesis in "abc)" at ")"`},
		{`*a`, `quantifier does not follow a repeatable item`},
		{`a**`, `quantifier does not follow a repeatable item`},
		{`[a`, `missing terminating ] for character class`},
		{`[z-a]`, `range out of order in character class`},
		{`a{3,2}`, `numbers out of order in {} quantifier`},
		{`\i`, `unrecognized character follows \`},
		{`a\`, `\ at end of pattern`},
		{`(?<1a>x)`, `subpattern name must start with a non-digit`},
		{`[[:foo:]]`, `unknown POSIX class name`},
		{`(?z)`, `unrecognized character after (? or (?-`},
	} {
		_, err := Compile(tc.pattern, false)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: err = %v, want %q", tc.pattern, err, tc.msg)
		}
		if oc, oerr, ok := oracle(t, tc.pattern, false); ok && oerr == nil {
			oc.Free()
		}
	}
}

// TestTranslateCaptureNames: groups keep PCRE's numbers and names, in all three
// name syntaxes.
func TestTranslateCaptureNames(t *testing.T) {
	re := MustCompile(`^/(\w+)/(?<id>\d+)(?:/(?P<rest>.*))?(?'tail'x)?$`, false)
	want := []string{"", "", "id", "rest", "tail"}
	if fmt.Sprint(re.Names()) != fmt.Sprint(want) || re.NumCaptures() != 4 {
		t.Fatalf("names %q, %d captures", re.Names(), re.NumCaptures())
	}
	s := []byte("/users/42/a/b")
	caps := make([]int, re.CapLen())
	n, ok := re.Exec(s, caps)
	if !ok || n != 10 {
		t.Fatalf("Exec = %d %v", n, ok)
	}
	var got []string
	for i := 0; i <= 4; i++ {
		got = append(got, string(AppendCapture(nil, s, caps, i)))
	}
	if fmt.Sprint(got) != "[/users/42/a/b users 42 a/b ]" {
		t.Fatalf("captures %q", got)
	}
	// A buffer shorter than every group gets the first ones, as nginx's ovector.
	short := make([]int, 4)
	if n, ok := re.Exec(s, short); !ok || n != 4 || string(AppendCapture(nil, s, short, 1)) != "users" || string(AppendCapture(nil, s, short, 2)) != "" {
		t.Fatalf("short Exec = %d %v %v", n, ok, short)
	}
}
