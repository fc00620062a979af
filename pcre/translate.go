// Package pcre runs the regular expressions of nginx configurations (location ~,
// server_name ~, rewrite, if, map) on Go's RE2 engine: it translates PCRE2 syntax as
// nginx compiles it (8-bit, no UTF, ASCII case folding) into RE2 syntax with the same
// meaning, keeps capture numbers and names, and refuses with a clear message what RE2
// cannot do (backreferences, lookaround, atomic and possessive matching, recursion)
// or would do differently (a loop over something that can match empty: "(a|b?)+").
// Matches whose groups are asked for run on the package's own backtracker over the
// program Go's regexp compiles (backtrack.go): the same semantics, linear time, and
// the offsets written into the caller's buffer without allocating.
//
// Where the two engines differ and the translation cannot close the gap:
//   - PCRE without UTF matches bytes, RE2 matches UTF-8 characters: "." and "[^/]"
//     take a whole multi-byte character where PCRE takes one byte, so counted repeats
//     ("^/.{3}$") count characters. Matching with unbounded repeats is the same.
//     Patterns that would single out one byte of a multi-byte character (a quantifier
//     right after a non-ASCII character, \xHH at or above 0x80 outside a class, a
//     class holding some but not all of 0x80-0xFF) are refused.
//   - "$" (and \Z) also matches before a newline that ends the subject, as in PCRE;
//     RE2 has no lookahead, so the translation takes that newline into the match: a
//     group that encloses the "$" holds it, and what follows the "$" in the pattern
//     ("a$\n", "$\b") sees the subject after it. nginx has no $0, and "$" ends its
//     patterns, where both engines agree.
//   - In multiline mode (?m), "^" also matches after a newline that ends the subject.
package pcre

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error is a pattern nginx's PCRE would refuse, or one RE2 cannot run. Its text
// follows nginx's "pcre2_compile() failed: ... in "pattern" at "rest"" without the
// function name; the caller adds the file and line.
type Error struct {
	Pattern string
	Offset  int // byte offset of the offending construct
	Msg     string
}

func (e *Error) Error() string {
	if e.Offset >= len(e.Pattern) {
		return fmt.Sprintf("%s in %q", e.Msg, e.Pattern)
	}
	return fmt.Sprintf("%s in %q at %q", e.Msg, e.Pattern, e.Pattern[e.Offset:])
}

// Limits PCRE2 10.42 applies at compile time; RE2's own repeat limit is lower.
const (
	maxNesting  = 250   // PCRE2's default parens_nest_limit
	maxRepeat   = 1000  // RE2's limit on a {n,m} count
	pcreRepeat  = 65535 // PCRE2's limit on a {n,m} count
	maxNameLen  = 32    // PCRE2's MAX_NAME_SIZE
	unsetOffset = -1
)

// flags are the PCRE options in force at a point of the pattern.
type flags struct {
	caseless  bool // i
	multiline bool // m
	dotall    bool // s
	extended  bool // x
	extended2 bool // xx: also ignores space and tab inside classes
	ungreedy  bool // U
	noAuto    bool // n: plain groups do not capture
}

// Translation is a PCRE pattern in RE2 syntax with the captures it defines.
type Translation struct {
	RE2   string   // RE2 (Go regexp) syntax
	Names []string // Names[n] is the name of group n, "" when unnamed; Names[0] is ""
}

// NumCaptures is the number of capturing groups, as PCRE2_INFO_CAPTURECOUNT.
func (t *Translation) NumCaptures() int { return len(t.Names) - 1 }

type translator struct {
	src      string
	i        int
	out      strings.Builder
	names    []string
	lastKind atom // the atom just written, for the quantifier that may follow
	nullable bool // whether the atom (or group) just written can match empty
}

type atom int

const (
	atomNone     atom = iota // nothing to repeat (start, "|", "(", an option setting)
	atomOK                   // repeatable
	atomNonASCII             // a multi-byte character: PCRE would repeat its last byte
	atomAssert               // an anchor or word boundary
)

// Translate converts a PCRE pattern as nginx compiles it into RE2 syntax; caseless
// is nginx's "~*" (PCRE2_CASELESS).
func Translate(pattern string, caseless bool) (*Translation, error) {
	t := &translator{src: pattern, names: []string{""}}
	f := flags{caseless: caseless}
	if err := t.sequence(&f, 0); err != nil {
		return nil, err
	}
	if t.i < len(t.src) { // a ")" with no "(" before it
		return nil, t.errAt(t.i, "unmatched closing parenthesis")
	}
	return &Translation{RE2: t.out.String(), Names: t.names}, nil
}

func (t *translator) errAt(off int, format string, args ...any) error {
	return &Error{Pattern: t.src, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// sequence translates alternatives up to the ")" that closes the current group
// (left unread) or the end of the pattern. Option settings such as (?i) change f
// for the rest of the group, later alternatives included, as in PCRE2.
func (t *translator) sequence(f *flags, depth int) error {
	t.lastKind = atomNone
	// Whether the group can match empty: some alternative has only atoms that can.
	anyNullable, altNullable := false, true
	for {
		t.skipExtended(f)
		if t.i >= len(t.src) || t.src[t.i] == ')' {
			t.nullable = anyNullable || altNullable
			return nil
		}
		c := t.src[t.i]
		kind := atomOK
		t.nullable = false
		switch c {
		case '|':
			t.i++
			t.out.WriteByte('|')
			t.lastKind = atomNone
			anyNullable, altNullable = anyNullable || altNullable, true
			continue
		case '(':
			k, err := t.group(f, depth)
			if err != nil {
				return err
			}
			kind = k
		case '[':
			if err := t.class(f); err != nil {
				return err
			}
		case '.':
			t.i++
			if f.dotall {
				t.out.WriteString(`(?s:.)`)
			} else {
				t.out.WriteString(`[^\n]`)
			}
		case '^':
			t.i++
			if f.multiline {
				t.out.WriteString(`(?m:^)`)
			} else {
				t.out.WriteString(`\A`)
			}
			kind = atomAssert
		case '$':
			t.i++
			if f.multiline {
				t.out.WriteString(`(?m:$)`)
			} else {
				t.out.WriteString(`(?:\n?\z)`)
			}
			kind = atomAssert
		case '\\':
			k, err := t.escape(f)
			if err != nil {
				return err
			}
			kind = k
		case '*', '+', '?':
			return t.errAt(t.i, "quantifier does not follow a repeatable item")
		case '{':
			if _, _, n := t.parseCount(t.i); n > 0 {
				return t.errAt(t.i, "quantifier does not follow a repeatable item")
			}
			t.i++
			t.out.WriteString(`\{`)
		default:
			if c >= utf8.RuneSelf {
				r, size := utf8.DecodeRuneInString(t.src[t.i:])
				if r == utf8.RuneError && size <= 1 {
					return t.errAt(t.i, "byte 0x%02x is not UTF-8: RE2 cannot match a single byte of a character", c)
				}
				t.out.WriteString(t.src[t.i : t.i+size])
				t.i += size
				kind = atomNonASCII
				break
			}
			t.i++
			t.literal(f, c)
		}
		if kind == atomNone {
			t.lastKind = atomNone
			continue
		}
		if kind == atomAssert {
			t.nullable = true
		}
		t.lastKind = kind
		if err := t.quantifier(f); err != nil {
			return err
		}
		altNullable = altNullable && t.nullable
	}
}

// skipExtended skips white space and # comments in extended (x) mode.
func (t *translator) skipExtended(f *flags) {
	if !f.extended {
		return
	}
	for t.i < len(t.src) {
		switch c := t.src[t.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
			t.i++
		case c == '#':
			for t.i < len(t.src) && t.src[t.i] != '\n' {
				t.i++
			}
		default:
			return
		}
	}
}

// literal writes one ASCII character, folding case the way PCRE does without UTF:
// ASCII letters only (RE2's (?i) would also let "k" match the Kelvin sign).
func (t *translator) literal(f *flags, c byte) {
	if f.caseless && isLetter(c) {
		t.out.WriteByte('[')
		t.out.WriteByte(c | 0x20)
		t.out.WriteByte(c &^ 0x20)
		t.out.WriteByte(']')
		return
	}
	writeChar(&t.out, c)
}

func writeChar(b *strings.Builder, c byte) {
	switch {
	case c < 0x20 || c == 0x7f:
		fmt.Fprintf(b, `\x%02x`, c)
	case strings.IndexByte(`\.+*?()|[]{}^$`, c) >= 0:
		b.WriteByte('\\')
		b.WriteByte(c)
	default:
		b.WriteByte(c)
	}
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isWord(c byte) bool   { return isLetter(c) || isDigit(c) || c == '_' }

// parseCount reads a {n}, {n,} or {n,m} quantifier at off: its bounds (max -1 for
// none) and length, or length 0 when the brace is a literal, as PCRE2 10.42 reads it.
func (t *translator) parseCount(off int) (min, max, n int) {
	s := t.src[off:]
	j := 1
	num := func() (int, bool) {
		k := j
		v := 0
		for j < len(s) && isDigit(s[j]) {
			if v <= pcreRepeat {
				v = v*10 + int(s[j]-'0')
			}
			j++
		}
		return v, j > k
	}
	lo, ok := num()
	if !ok {
		return 0, 0, 0
	}
	if j < len(s) && s[j] == '}' {
		return lo, lo, j + 1
	}
	if j >= len(s) || s[j] != ',' {
		return 0, 0, 0
	}
	j++
	if j < len(s) && s[j] == '}' {
		return lo, -1, j + 1
	}
	hi, ok := num()
	if !ok || j >= len(s) || s[j] != '}' {
		return 0, 0, 0
	}
	return lo, hi, j + 1
}

// quantifier translates the quantifier, if any, that follows the atom just written.
func (t *translator) quantifier(f *flags) error {
	t.skipExtended(f)
	if t.i >= len(t.src) {
		return nil
	}
	at := t.i
	var q string
	unbounded, optional := false, false
	switch c := t.src[t.i]; c {
	case '*', '+', '?':
		q = string(c)
		unbounded, optional = c != '?', c != '+'
		t.i++
	case '{':
		min, max, n := t.parseCount(t.i)
		if n == 0 {
			return nil
		}
		if min > pcreRepeat || max > pcreRepeat {
			return t.errAt(at, "number too big in {} quantifier")
		}
		if max >= 0 && max < min {
			return t.errAt(at, "numbers out of order in {} quantifier")
		}
		if min > maxRepeat || max > maxRepeat {
			return t.errAt(at, "repeat count over RE2's limit of %d", maxRepeat)
		}
		unbounded, optional = max < 0, min == 0
		switch {
		case max < 0:
			q = fmt.Sprintf("{%d,}", min)
		case max == min:
			q = fmt.Sprintf("{%d}", min)
		default:
			q = fmt.Sprintf("{%d,%d}", min, max)
		}
		t.i += n
	default:
		return nil
	}
	switch t.lastKind {
	case atomNone, atomAssert:
		return t.errAt(at, "quantifier does not follow a repeatable item")
	case atomNonASCII:
		return t.errAt(at, "quantifier after a non-ASCII character: PCRE repeats its last byte, RE2 the whole character; write (?:...) around it")
	}
	if unbounded && t.nullable {
		// PCRE ends such a loop at the first iteration that matches empty; RE2
		// skips empty iterations and may go on: the matches would differ.
		return t.errAt(at, "a repeated item that can match empty: PCRE stops at an empty iteration, RE2 does not; make it match at least one character")
	}
	if optional {
		t.nullable = true
	}
	lazy := f.ungreedy
	t.skipExtended(f)
	if t.i < len(t.src) {
		switch t.src[t.i] {
		case '?':
			lazy = !lazy
			t.i++
		case '+':
			return t.errAt(at, "possessive quantifier %s+ is not supported by RE2", q)
		}
	}
	t.out.WriteString(q)
	if lazy {
		t.out.WriteByte('?')
	}
	t.lastKind = atomOK
	// PCRE2 refuses a quantifier that follows another one ("a**"); so does RE2.
	t.skipExtended(f)
	if t.i < len(t.src) {
		c := t.src[t.i]
		_, _, n := t.parseCount(t.i)
		if c == '*' || c == '+' || c == '?' || (c == '{' && n > 0) {
			return t.errAt(t.i, "quantifier does not follow a repeatable item")
		}
	}
	return nil
}

// group translates "(" ... ")" in all the forms PCRE2 has, from the "(".
func (t *translator) group(f *flags, depth int) (atom, error) {
	open := t.i
	if depth+1 > maxNesting {
		return 0, t.errAt(open, "parentheses are too deeply nested")
	}
	rest := t.src[t.i+1:]
	inner := *f
	name := ""
	capture := !f.noAuto
	switch {
	case strings.HasPrefix(rest, "*"):
		return 0, t.errAt(open, "(*...) verbs and options are not supported by RE2")
	case strings.HasPrefix(rest, "?#"):
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return 0, t.errAt(open, "missing ) at end of (?# comment")
		}
		t.i += 1 + end + 1
		return atomNone, nil
	case strings.HasPrefix(rest, "?:"):
		capture = false
		t.i += 3
	case strings.HasPrefix(rest, "?P<"), strings.HasPrefix(rest, "?<") && !strings.HasPrefix(rest, "?<=") && !strings.HasPrefix(rest, "?<!"),
		strings.HasPrefix(rest, "?'"):
		start := t.i + 2
		term := byte('>')
		switch rest[1] {
		case 'P':
			start++
		case '\'':
			term = '\''
		}
		end := start + 1
		for end < len(t.src) && isWord(t.src[end]) {
			end++
		}
		name = t.src[start+1 : end]
		switch {
		case name == "":
			return 0, t.errAt(start+1, "group name expected")
		case isDigit(name[0]):
			return 0, t.errAt(start+1, "subpattern name must start with a non-digit")
		case len(name) > maxNameLen:
			return 0, t.errAt(start+1, "subpattern name is too long (maximum 32 code units)")
		case end >= len(t.src) || t.src[end] != term:
			return 0, t.errAt(end, "syntax error in subpattern name (missing terminator?)")
		}
		for _, n := range t.names {
			if n == name {
				return 0, t.errAt(start+1, "two named subpatterns have the same name %q", name)
			}
		}
		capture = true
		t.i = end + 1
	case strings.HasPrefix(rest, "?"):
		return t.options(f, &inner, depth)
	default:
		t.i++
	}
	return t.body(&inner, depth, capture, name)
}

// body translates a group's contents after its opening and the ")".
func (t *translator) body(inner *flags, depth int, capture bool, name string) (atom, error) {
	switch {
	case name != "":
		t.out.WriteString("(?P<" + name + ">")
	case capture:
		t.out.WriteByte('(')
	default:
		t.out.WriteString("(?:")
	}
	if capture {
		t.names = append(t.names, name)
	}
	if err := t.sequence(inner, depth+1); err != nil {
		return 0, err
	}
	if t.i >= len(t.src) {
		return 0, t.errAt(len(t.src), "missing closing parenthesis")
	}
	t.i++
	t.out.WriteByte(')')
	return atomOK, nil
}

// options translates "(?" groups that are not names or comments: option settings
// "(?i)" and "(?i:...)", and the PCRE constructs RE2 does not have.
func (t *translator) options(f, inner *flags, depth int) (atom, error) {
	open := t.i
	rest := t.src[t.i+2:]
	refuse := func(what string) (atom, error) {
		return 0, t.errAt(open, "%s is not supported by RE2", what)
	}
	switch {
	case strings.HasPrefix(rest, "="):
		return refuse("lookahead assertion (?=")
	case strings.HasPrefix(rest, "!"):
		return refuse("negative lookahead assertion (?!")
	case strings.HasPrefix(rest, "<="):
		return refuse("lookbehind assertion (?<=")
	case strings.HasPrefix(rest, "<!"):
		return refuse("negative lookbehind assertion (?<!")
	case strings.HasPrefix(rest, ">"):
		return refuse("atomic group (?>")
	case strings.HasPrefix(rest, "|"):
		return refuse("branch reset group (?|")
	case strings.HasPrefix(rest, "("):
		return refuse("conditional group (?(")
	case strings.HasPrefix(rest, "C"):
		return refuse("callout (?C")
	case strings.HasPrefix(rest, "P="), strings.HasPrefix(rest, "P>"), strings.HasPrefix(rest, "&"):
		return refuse("named backreference or subroutine call (?" + rest[:min(2, len(rest))])
	case strings.HasPrefix(rest, "R"), len(rest) > 0 && (isDigit(rest[0]) || rest[0] == '+' || rest[0] == '-' && len(rest) > 1 && isDigit(rest[1])):
		return refuse("recursion or subroutine call (?R, (?1")
	}
	// Option letters: (?imnsxU-imnsxU) or (?^...), then ")" or ":".
	j := t.i + 2
	on := true
	nf := *f
	if j < len(t.src) && t.src[j] == '^' {
		nf.caseless, nf.multiline, nf.noAuto, nf.dotall, nf.extended, nf.extended2 = false, false, false, false, false, false
		j++
	}
	for ; j < len(t.src); j++ {
		c := t.src[j]
		switch c {
		case '-':
			if !on {
				return 0, t.errAt(j, "invalid hyphen in option setting")
			}
			on = false
			continue
		case 'i':
			nf.caseless = on
		case 'm':
			nf.multiline = on
		case 's':
			nf.dotall = on
		case 'n':
			nf.noAuto = on
		case 'U':
			nf.ungreedy = on
		case 'J':
			// duplicate names: accepted, but RE2 refuses them when they occur
		case 'x':
			if on && j+1 < len(t.src) && t.src[j+1] == 'x' {
				nf.extended2 = true
				j++
			} else if !on {
				nf.extended2 = false
			}
			nf.extended = on
		case ')':
			*f = nf
			t.i = j + 1
			return atomNone, nil
		case ':':
			*inner = nf
			t.i = j + 1
			return t.body(inner, depth, false, "")
		default:
			return 0, t.errAt(j, "unrecognized character after (? or (?-")
		}
	}
	return 0, t.errAt(len(t.src), "missing closing parenthesis")
}

// escape translates a backslash sequence outside a class.
func (t *translator) escape(f *flags) (atom, error) {
	at := t.i
	if t.i+1 >= len(t.src) {
		return 0, t.errAt(at, `\ at end of pattern`)
	}
	c := t.src[t.i+1]
	t.i += 2
	switch c {
	case 'd', 'D', 'w', 'W':
		t.out.WriteByte('\\')
		t.out.WriteByte(c)
		return atomOK, nil
	case 's':
		// PCRE's \s has VT since 8.34; RE2's has not.
		t.out.WriteString(`[\t\n\x0b\f\r ]`)
		return atomOK, nil
	case 'S':
		t.out.WriteString(`[^\t\n\x0b\f\r ]`)
		return atomOK, nil
	case 'b', 'B':
		t.out.WriteByte('\\')
		t.out.WriteByte(c)
		return atomAssert, nil
	case 'A':
		t.out.WriteString(`\A`)
		return atomAssert, nil
	case 'z':
		t.out.WriteString(`\z`)
		return atomAssert, nil
	case 'Z':
		t.out.WriteString(`(?:\n?\z)`)
		return atomAssert, nil
	case 'N':
		if strings.HasPrefix(t.src[t.i:], "{U+") {
			return 0, t.errAt(at, `\N{U+hh..} is supported only in UTF mode`)
		}
		t.out.WriteString(`[^\n]`)
		return atomOK, nil
	case 'Q':
		end := strings.Index(t.src[t.i:], `\E`)
		lit := t.src[t.i:]
		if end >= 0 {
			lit = lit[:end]
			t.i += end + 2
		} else {
			t.i = len(t.src)
		}
		if lit == "" {
			return atomNone, nil
		}
		// Each character is an atom of its own: a quantifier after \E repeats
		// the last one only.
		kind := atomOK
		for k := 0; k < len(lit); {
			if lit[k] >= utf8.RuneSelf {
				r, size := utf8.DecodeRuneInString(lit[k:])
				if r == utf8.RuneError && size <= 1 {
					return 0, t.errAt(at, "byte 0x%02x is not UTF-8: RE2 cannot match a single byte of a character", lit[k])
				}
				t.out.WriteString(lit[k : k+size])
				k += size
				kind = atomNonASCII
				continue
			}
			t.literal(f, lit[k])
			k++
			kind = atomOK
		}
		return kind, nil
	case 'E':
		return atomNone, nil
	case 'G':
		return 0, t.errAt(at, `\G is not supported by RE2`)
	case 'K':
		return 0, t.errAt(at, `\K is not supported by RE2`)
	case 'R', 'X', 'C', 'h', 'H', 'v', 'V', 'p', 'P':
		return 0, t.errAt(at, `\%c is not supported: write the characters it stands for`, c)
	case 'g', 'k':
		return 0, t.errAt(at, `backreference \%c is not supported by RE2`, c)
	}
	if '1' <= c && c <= '9' {
		// PCRE2: a backreference when below 10, from 8 or 9, or when that many
		// groups came before; else up to three octal digits.
		j := t.i - 1
		n := 0
		for j < len(t.src) && isDigit(t.src[j]) && n < 1000 {
			n = n*10 + int(t.src[j]-'0')
			j++
		}
		if n < 10 || c >= '8' || n <= len(t.names)-1 {
			return 0, t.errAt(at, `backreference \%s is not supported by RE2`, t.src[at+1:j])
		}
		v := 0
		t.i--
		for k := 0; k < 3 && t.i < len(t.src) && '0' <= t.src[t.i] && t.src[t.i] <= '7'; k++ {
			v = v*8 + int(t.src[t.i]-'0')
			t.i++
		}
		if v > 0xff {
			return 0, t.errAt(at, "octal value is greater than \\377 in 8-bit non-UTF-8 mode")
		}
		if v >= 0x80 {
			return 0, t.errAt(at, "character 0x%02x is a single byte of a character to RE2: write the character itself", v)
		}
		t.literal(f, byte(v))
		return atomOK, nil
	}
	v, err := t.charEscape(at, c)
	if err != nil {
		return 0, err
	}
	if v >= 0x80 {
		return 0, t.errAt(at, "character 0x%02x is a single byte of a character to RE2: write the character itself", v)
	}
	t.literal(f, byte(v))
	return atomOK, nil
}

// charEscape reads the escapes that stand for one character: \n \xhh \x{h} \0oo
// \o{o} \cX, and \ before punctuation. t.i is past the escape's letter.
func (t *translator) charEscape(at int, c byte) (int, error) {
	switch c {
	case 'a':
		return 7, nil
	case 'e':
		return 0x1b, nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '0':
		v := 0
		for k := 0; k < 2 && t.i < len(t.src) && '0' <= t.src[t.i] && t.src[t.i] <= '7'; k++ {
			v = v*8 + int(t.src[t.i]-'0')
			t.i++
		}
		return v, nil
	case 'o':
		if t.i >= len(t.src) || t.src[t.i] != '{' {
			return 0, t.errAt(at, `missing opening brace after \o`)
		}
		end := strings.IndexByte(t.src[t.i:], '}')
		if end < 2 {
			return 0, t.errAt(at, `digits missing in \x{} or \o{} or \N{U+}`)
		}
		v, err := strconv.ParseUint(t.src[t.i+1:t.i+end], 8, 32)
		if err != nil {
			return 0, t.errAt(at, `non-octal character in \o{} (closing brace missing?)`)
		}
		t.i += end + 1
		if v > 0xff {
			return 0, t.errAt(at, `character code point value in \x{} or \o{} is too large`)
		}
		return int(v), nil
	case 'x':
		if t.i < len(t.src) && t.src[t.i] == '{' {
			end := strings.IndexByte(t.src[t.i:], '}')
			if end < 2 {
				return 0, t.errAt(at, `digits missing in \x{} or \o{} or \N{U+}`)
			}
			v, err := strconv.ParseUint(t.src[t.i+1:t.i+end], 16, 32)
			if err != nil {
				return 0, t.errAt(at, `non-hex character in \x{} (closing brace missing?)`)
			}
			t.i += end + 1
			if v > 0xff {
				return 0, t.errAt(at, `character code point value in \x{} or \o{} is too large`)
			}
			return int(v), nil
		}
		v := 0
		for k := 0; k < 2 && t.i < len(t.src) && isHex(t.src[t.i]); k++ {
			v = v*16 + hexVal(t.src[t.i])
			t.i++
		}
		return v, nil
	case 'c':
		if t.i >= len(t.src) {
			return 0, t.errAt(at, `\c at end of pattern`)
		}
		x := t.src[t.i]
		if x < 0x20 || x > 0x7e {
			return 0, t.errAt(at, `\c must be followed by a printable ASCII character`)
		}
		t.i++
		if 'a' <= x && x <= 'z' {
			x -= 0x20
		}
		return int(x ^ 0x40), nil
	}
	if c >= utf8.RuneSelf || isLetter(c) || isDigit(c) {
		if c >= utf8.RuneSelf {
			// \ before a non-ASCII character quotes its first byte only.
			return 0, t.errAt(at, `\ before a non-ASCII character`)
		}
		return 0, t.errAt(at, `unrecognized character follows \`)
	}
	return int(c), nil
}

func isHex(c byte) bool { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }
func hexVal(c byte) int {
	if isDigit(c) {
		return int(c - '0')
	}
	return int(c|0x20-'a') + 10
}

// byteSet is a character class over the 256 byte values PCRE sees without UTF.
type byteSet [4]uint64

func (s *byteSet) add(c int)      { s[c>>6] |= 1 << (c & 63) }
func (s *byteSet) has(c int) bool { return s[c>>6]&(1<<(c&63)) != 0 }
func (s *byteSet) addRange(lo, hi int) {
	for c := lo; c <= hi; c++ {
		s.add(c)
	}
}
func (s *byteSet) addSet(o *byteSet, negate bool) {
	for k := range s {
		if negate {
			s[k] |= ^o[k]
		} else {
			s[k] |= o[k]
		}
	}
}

var (
	setDigit, setWord, setSpace byteSet
	posixClasses                = map[string]*byteSet{}
)

func init() {
	setDigit.addRange('0', '9')
	setWord.addRange('0', '9')
	setWord.addRange('a', 'z')
	setWord.addRange('A', 'Z')
	setWord.add('_')
	for _, c := range "\t\n\v\f\r " {
		setSpace.add(int(c))
	}
	mk := func(name string, fn func(c int) bool) {
		s := new(byteSet)
		for c := 0; c < 128; c++ {
			if fn(c) {
				s.add(c)
			}
		}
		posixClasses[name] = s
	}
	mk("alpha", func(c int) bool { return isLetter(byte(c)) })
	mk("digit", func(c int) bool { return isDigit(byte(c)) })
	mk("alnum", func(c int) bool { return isLetter(byte(c)) || isDigit(byte(c)) })
	mk("upper", func(c int) bool { return 'A' <= c && c <= 'Z' })
	mk("lower", func(c int) bool { return 'a' <= c && c <= 'z' })
	mk("space", func(c int) bool { return setSpace.has(c) })
	mk("blank", func(c int) bool { return c == ' ' || c == '\t' })
	mk("cntrl", func(c int) bool { return c < 0x20 || c == 0x7f })
	mk("graph", func(c int) bool { return c > 0x20 && c < 0x7f })
	mk("print", func(c int) bool { return c >= 0x20 && c < 0x7f })
	mk("punct", func(c int) bool { return c > 0x20 && c < 0x7f && !isLetter(byte(c)) && !isDigit(byte(c)) })
	mk("xdigit", func(c int) bool { return isHex(byte(c)) })
	mk("word", func(c int) bool { return isWord(byte(c)) })
	mk("ascii", func(c int) bool { return true })
}

// class translates a "[...]" class from its "[".
func (t *translator) class(f *flags) error {
	open := t.i
	t.i++
	// PCRE2 looks past \E, an empty \Q\E and (with xx) blanks for the "^" and for
	// a "]" that is a literal when it comes first.
	skip := func() {
		for t.i < len(t.src) {
			switch {
			case strings.HasPrefix(t.src[t.i:], `\E`):
				t.i += 2
			case strings.HasPrefix(t.src[t.i:], `\Q\E`):
				t.i += 4
			case f.extended2 && (t.src[t.i] == ' ' || t.src[t.i] == '\t'):
				t.i++
			default:
				return
			}
		}
	}
	skip()
	negate := false
	if t.i < len(t.src) && t.src[t.i] == '^' {
		negate = true
		t.i++
		skip()
	}
	if p := t.src[t.i:]; len(p) > 1 && (p[0] == ':' || p[0] == '.' || p[0] == '=') {
		// "[:alpha:]" without the outer brackets
		if end := strings.IndexByte(p[1:], ']'); end > 0 && p[end] == p[0] {
			return t.errAt(open, "POSIX named classes are supported only within a class")
		}
	}
	var set byteSet
	first := true
	for {
		if t.i >= len(t.src) {
			return t.errAt(open, "missing terminating ] for character class")
		}
		c := t.src[t.i]
		if c == ']' && !first {
			t.i++
			break
		}
		first = false
		if f.extended2 && (c == ' ' || c == '\t') {
			t.i++
			continue
		}
		at := t.i
		// A character, an escape that is one, or a set.
		v := -1
		var sub *byteSet
		subNeg := false
		switch {
		case c == '[' && t.i+1 < len(t.src) && (t.src[t.i+1] == ':' || t.src[t.i+1] == '.' || t.src[t.i+1] == '='):
			end := strings.Index(t.src[t.i+2:], string(t.src[t.i+1])+"]")
			if end < 0 {
				v = '['
				t.i++
				break
			}
			if t.src[t.i+1] != ':' {
				return t.errAt(at, "POSIX collating elements are not supported")
			}
			name := t.src[t.i+2 : t.i+2+end]
			if strings.HasPrefix(name, "^") {
				subNeg, name = true, name[1:]
			}
			if f.caseless && (name == "lower" || name == "upper") {
				name = "alpha" // as PCRE2 does, in the negated form too
			}
			s, ok := posixClasses[name]
			if !ok {
				return t.errAt(at, "unknown POSIX class name")
			}
			sub = s
			t.i += 2 + end + 2
		case c == '\\':
			if t.i+1 >= len(t.src) {
				return t.errAt(at, `\ at end of pattern`)
			}
			e := t.src[t.i+1]
			t.i += 2
			switch e {
			case 'd':
				sub = &setDigit
			case 'D':
				sub, subNeg = &setDigit, true
			case 'w':
				sub = &setWord
			case 'W':
				sub, subNeg = &setWord, true
			case 's':
				sub = &setSpace
			case 'S':
				sub, subNeg = &setSpace, true
			case 'b':
				v = '\b'
			case 'Q':
				end := strings.Index(t.src[t.i:], `\E`)
				lit := t.src[t.i:]
				if end >= 0 {
					lit = lit[:end]
					t.i += end + 2
				} else {
					t.i = len(t.src)
				}
				for k := 0; k < len(lit); k++ {
					if lit[k] >= utf8.RuneSelf {
						return t.errAt(at, "non-ASCII character in a class: PCRE matches its bytes one by one, RE2 the character")
					}
					set.add(int(lit[k]))
				}
				continue
			case 'E':
				continue
			default:
				if '1' <= e && e <= '7' {
					// Inside a class \ddd is octal, never a backreference.
					v = int(e - '0')
					for k := 0; k < 2 && t.i < len(t.src) && '0' <= t.src[t.i] && t.src[t.i] <= '7'; k++ {
						v = v*8 + int(t.src[t.i]-'0')
						t.i++
					}
					if v > 0xff {
						return t.errAt(at, "octal value is greater than \\377 in 8-bit non-UTF-8 mode")
					}
					break
				}
				if strings.IndexByte("RXhHvVpPNgkBAzZGK89", e) >= 0 {
					return t.errAt(at, `\%c is not supported in a character class`, e)
				}
				var err error
				if v, err = t.charEscape(at, e); err != nil {
					return err
				}
			}
		case c >= utf8.RuneSelf:
			return t.errAt(at, "non-ASCII character in a class: PCRE matches its bytes one by one, RE2 the character")
		default:
			v = int(c)
			t.i++
		}
		if sub != nil {
			if t.i+1 < len(t.src) && t.src[t.i] == '-' && t.src[t.i+1] != ']' {
				return t.errAt(at, "invalid range in character class")
			}
			set.addSet(sub, subNeg)
			continue
		}
		// v is one character; "-" and another character make a range.
		if t.i+1 < len(t.src) && t.src[t.i] == '-' && t.src[t.i+1] != ']' {
			hiAt := t.i + 1
			t.i++
			hi, isSet, err := t.classChar(f)
			if err != nil {
				return err
			}
			if isSet {
				return t.errAt(hiAt, "invalid range in character class")
			}
			if hi < v {
				return t.errAt(hiAt, "range out of order in character class")
			}
			set.addRange(v, hi)
			continue
		}
		set.add(v)
	}
	if f.caseless {
		for c := 'A'; c <= 'Z'; c++ {
			if set.has(int(c)) || set.has(int(c|0x20)) {
				set.add(int(c))
				set.add(int(c | 0x20))
			}
		}
	}
	if negate {
		for k := range set {
			set[k] = ^set[k]
		}
	}
	// RE2 sees characters: the bytes 0x80-0xFF must be all in (any non-ASCII
	// character) or all out.
	high := 0
	for c := 0x80; c <= 0xff; c++ {
		if set.has(c) {
			high++
		}
	}
	if high != 0 && high != 0x80 {
		return t.errAt(open, "class with some of the bytes 0x80-0xFF: RE2 matches characters, not single bytes")
	}
	writeClass(&t.out, &set, high != 0)
	return nil
}

// classChar reads the character that ends a range: a character or an escape that
// stands for one; isSet when it is a set such as \d instead.
func (t *translator) classChar(f *flags) (v int, isSet bool, err error) {
	at := t.i
	c := t.src[t.i]
	if c >= utf8.RuneSelf {
		return 0, false, t.errAt(at, "non-ASCII character in a class: PCRE matches its bytes one by one, RE2 the character")
	}
	if c == '[' && t.i+1 < len(t.src) && t.src[t.i+1] == ':' && strings.Contains(t.src[t.i+2:], ":]") {
		return 0, true, nil
	}
	if c != '\\' {
		t.i++
		return int(c), false, nil
	}
	if t.i+1 >= len(t.src) {
		return 0, false, t.errAt(at, `\ at end of pattern`)
	}
	e := t.src[t.i+1]
	t.i += 2
	switch {
	case strings.IndexByte("dDwWsS", e) >= 0:
		return 0, true, nil
	case e == 'b':
		return '\b', false, nil
	case '1' <= e && e <= '7':
		v := int(e - '0')
		for k := 0; k < 2 && t.i < len(t.src) && '0' <= t.src[t.i] && t.src[t.i] <= '7'; k++ {
			v = v*8 + int(t.src[t.i]-'0')
			t.i++
		}
		if v > 0xff {
			return 0, false, t.errAt(at, "octal value is greater than \\377 in 8-bit non-UTF-8 mode")
		}
		return v, false, nil
	case strings.IndexByte("QERXhHvVpPNgkBAzZGK89", e) >= 0:
		return 0, false, t.errAt(at, `\%c cannot end a range in a character class`, e)
	}
	v, err = t.charEscape(at, e)
	return v, false, err
}

// writeClass writes a byte set as an RE2 class; high says it holds 0x80-0xFF, which
// RE2 reads as "any non-ASCII character".
func writeClass(b *strings.Builder, s *byteSet, high bool) {
	want := true
	if high {
		want = false // write the ASCII bytes left out, negated
	}
	var ranges [][2]int
	for c := 0; c < 0x80; c++ {
		if s.has(c) != want {
			continue
		}
		if n := len(ranges); n > 0 && ranges[n-1][1] == c-1 {
			ranges[n-1][1] = c
		} else {
			ranges = append(ranges, [2]int{c, c})
		}
	}
	switch {
	case high && len(ranges) == 0:
		b.WriteString(`(?s:.)`)
		return
	case !high && len(ranges) == 0:
		b.WriteString(`[^\x00-\x{10FFFF}]`)
		return
	}
	b.WriteByte('[')
	if high {
		b.WriteByte('^')
	}
	for _, r := range ranges {
		classChar(b, r[0])
		if r[1] > r[0] {
			if r[1] > r[0]+1 {
				b.WriteByte('-')
			}
			classChar(b, r[1])
		}
	}
	b.WriteByte(']')
}

func classChar(b *strings.Builder, c int) {
	if isWord(byte(c)) {
		b.WriteByte(byte(c))
		return
	}
	fmt.Fprintf(b, `\x%02x`, c)
}
