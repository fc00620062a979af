package pcre

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"unsafe"
)

// Regexp is a compiled nginx regular expression. It is safe for concurrent use.
type Regexp struct {
	re       *regexp.Regexp
	bt       *prog // the same program, for Exec
	pattern  string
	caseless bool
	names    []string
}

// Compile translates and compiles a pattern as nginx writes it; caseless is "~*".
func Compile(pattern string, caseless bool) (*Regexp, error) {
	tr, err := Translate(pattern, caseless)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(tr.RE2)
	if err != nil {
		// Only RE2's size limits can get here (the translation is valid syntax).
		return nil, &Error{Pattern: pattern, Offset: len(pattern), Msg: err.Error()}
	}
	return newRegexp(re, pattern, caseless, tr.Names)
}

// newRegexp compiles re's program again, as regexp does, for the backtracker.
func newRegexp(re *regexp.Regexp, pattern string, caseless bool, names []string) (*Regexp, error) {
	sre, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil, &Error{Pattern: pattern, Offset: len(pattern), Msg: err.Error()}
	}
	sre = sre.Simplify()
	p, err := syntax.Compile(sre)
	if err != nil {
		return nil, &Error{Pattern: pattern, Offset: len(pattern), Msg: err.Error()}
	}
	return &Regexp{re: re, bt: newProg(p, sre, 2*len(names)), pattern: pattern, caseless: caseless, names: names}, nil
}

// MustCompile is Compile for patterns known to be good; it panics on an error.
func MustCompile(pattern string, caseless bool) *Regexp {
	re, err := Compile(pattern, caseless)
	if err != nil {
		panic(fmt.Sprintf("pcre: %v", err))
	}
	return re
}

// String returns the pattern as written.
func (re *Regexp) String() string { return re.pattern }

// Caseless reports a "~*" pattern.
func (re *Regexp) Caseless() bool { return re.caseless }

// RE2 returns the translated pattern Go's regexp runs.
func (re *Regexp) RE2() string { return re.re.String() }

// NumCaptures is the number of capturing groups ($1 ... $n).
func (re *Regexp) NumCaptures() int { return len(re.names) - 1 }

// Names returns the group names by number: Names()[n] names $n, "" when unnamed.
// nginx makes each named group a variable set by a successful match.
func (re *Regexp) Names() []string { return re.names }

// Match reports whether b matches; it does not allocate.
func (re *Regexp) Match(b []byte) bool {
	return re.MatchString(unsafe.String(unsafe.SliceData(b), len(b)))
}

// MatchString reports whether s matches; it does not allocate.
func (re *Regexp) MatchString(s string) bool {
	if len(s) <= re.bt.maxLen {
		// The backtracker (its prefilter first), not Go's regexp: an unanchored
		// case-insensitive pattern over a User-Agent took Go's Match 2-3 µs, the
		// backtracker 0.3 µs.
		var whole [2]int
		_, ok := re.bt.exec(s, whole[:])
		return ok
	}
	if re.bt.pf != nil && re.bt.pf.reject(s) {
		return false
	}
	return re.re.MatchString(s)
}

// CapLen is the length of a captures buffer that holds every group: $0 ... $n.
func (re *Regexp) CapLen() int { return 2 * len(re.names) }

// Exec matches b and fills caps with the offsets of $0, $1, ... in pairs (-1 for a
// group that did not take part), as nginx's r->captures; caps may be shorter than
// CapLen, and then holds the first groups only. It returns the number of ints set.
// It does not allocate, but for a subject longer than the backtracker takes (1 MiB
// divided by the compiled pattern's length: 16 KiB for 64 instructions): Go's
// regexp then matches it and allocates its result.
func (re *Regexp) Exec(b []byte, caps []int) (int, bool) {
	if len(caps) == 0 {
		return 0, re.Match(b)
	}
	// The backtracker only reads the string during the call.
	return re.ExecString(unsafe.String(unsafe.SliceData(b), len(b)), caps)
}

// ExecString is Exec on a string.
func (re *Regexp) ExecString(s string, caps []int) (int, bool) {
	if len(caps) == 0 {
		return 0, re.MatchString(s)
	}
	if len(s) <= re.bt.maxLen {
		return re.bt.exec(s, caps)
	}
	loc := re.re.FindStringSubmatchIndex(s)
	if loc == nil {
		return 0, false
	}
	return copy(caps, loc), true
}

// AppendCapture appends group n of a match of subject, whose offsets Exec put in
// caps (its first set ints), to dst: nginx's $n, empty when the group is unset.
func AppendCapture(dst, subject []byte, caps []int, n int) []byte {
	if 2*n+1 >= len(caps) || caps[2*n] < 0 {
		return dst
	}
	return append(dst, subject[caps[2*n]:caps[2*n+1]]...)
}

// FindStringSubmatch is regexp's: the match and its groups, nil for no match.
func (re *Regexp) FindStringSubmatch(s string) []string { return re.re.FindStringSubmatch(s) }

// FindSubmatchIndex is regexp's: the offsets of $0, $1, ... in pairs, nil for no
// match (one allocation for a match).
func (re *Regexp) FindSubmatchIndex(b []byte) []int { return re.re.FindSubmatchIndex(b) }
