package pcre

// A required-literal prefilter, as RE2 and Go's regexp use a literal prefix: from
// the parsed pattern, a few ASCII literals one of which every match contains, so
// that a subject containing none of them is rejected by one scan, without the
// backtracker's state. The User-Agent idiom ~*(googlebot|bingbot|yandex) fails
// this way on a browser's agent: the scan costs a fraction of a search from
// every position the first set lets through.

import (
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

const (
	maxLits   = 16 // literals in a set: more say little and cost a compare each
	maxLitLen = 64 // bytes of a literal (its fold mask is a uint64)
)

// lit is an ASCII literal; the bits of fold are its case-insensitive positions,
// where s holds the lower-case letter.
type lit struct {
	s    string
	fold uint64
}

// litSet is what the analysis knows of a node: exact, the set of all its matches
// (each a literal); req, literals one of which every match contains (nil: none
// known). A set holding "" requires nothing.
type litSet struct {
	exact []lit
	isExt bool
	req   []lit
}

// prefilter is the compiled requirement: first maps a byte to the literals that
// may start with it (bit i: lits[i]).
type prefilter struct {
	lits  []lit
	first [256]uint16
}

// newPrefilter analyses re; nil when it finds no literal every match contains.
func newPrefilter(re *syntax.Regexp) *prefilter {
	req := analyse(re).req
	if len(req) == 0 || len(req) > maxLits {
		return nil
	}
	pf := &prefilter{lits: req}
	for i, l := range req {
		if l.s == "" {
			return nil
		}
		c := l.s[0]
		pf.first[c] |= 1 << i
		if l.fold&1 != 0 {
			pf.first[c-'a'+'A'] |= 1 << i
		}
	}
	return pf
}

// reject reports that s contains none of the literals: no match is possible.
func (pf *prefilter) reject(s string) bool {
	first := &pf.first
	for i := 0; i < len(s); i++ {
		// Four bytes at a time while none may start a literal (most of them).
		for i+4 <= len(s) && first[s[i]]|first[s[i+1]]|first[s[i+2]]|first[s[i+3]] == 0 {
			i += 4
		}
		if i == len(s) {
			break
		}
		m := first[s[i]]
		for m != 0 {
			j := 0
			for m&(1<<j) == 0 {
				j++
			}
			m &^= 1 << j
			if pf.lits[j].at(s, i) {
				return false
			}
		}
	}
	return true
}

// at reports that l occurs in s at i.
func (l *lit) at(s string, i int) bool {
	if len(s)-i < len(l.s) {
		return false
	}
	for k := 0; k < len(l.s); k++ {
		c := s[i+k]
		if l.fold&(1<<k) != 0 {
			c |= 0x20 // only an ASCII letter folds onto the lower-case letter there
		}
		if c != l.s[k] {
			return false
		}
	}
	return true
}

func exactSet(ls ...lit) litSet { return litSet{exact: ls, isExt: true, req: ls} }

// analyse computes n's litSet. Anything it does not know requires nothing, which
// is always sound.
func analyse(n *syntax.Regexp) litSet {
	switch n.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return exactSet(lit{})
	case syntax.OpLiteral:
		// Go's parser writes the translation's [gG] as g with FoldCase.
		fold := n.Flags&syntax.FoldCase != 0
		if len(n.Rune) > maxLitLen {
			return litSet{}
		}
		var l lit
		b := make([]byte, len(n.Rune))
		for i, r := range n.Rune {
			if r >= utf8.RuneSelf {
				return litSet{}
			}
			b[i] = byte(r)
			if !fold || unicode.SimpleFold(r) == r {
				continue
			}
			// Only a letter whose fold orbit is its two ASCII cases (not k and s:
			// the Kelvin sign, the long s).
			lo, up := r|0x20, r&^0x20
			if 'a' > lo || lo > 'z' || unicode.SimpleFold(lo) != up || unicode.SimpleFold(up) != lo {
				return litSet{}
			}
			b[i] = byte(lo)
			l.fold |= 1 << i
		}
		l.s = string(b)
		return exactSet(l)
	case syntax.OpCharClass:
		return classSet(n.Rune)
	case syntax.OpCapture:
		return analyse(n.Sub[0])
	case syntax.OpPlus:
		return litSet{req: analyse(n.Sub[0]).req}
	case syntax.OpRepeat:
		if n.Min >= 1 {
			return litSet{req: analyse(n.Sub[0]).req}
		}
	case syntax.OpAlternate:
		var res litSet
		res.isExt = true
		for i, sub := range n.Sub {
			s := analyse(sub)
			if s.req == nil {
				return litSet{}
			}
			if i == 0 {
				res.exact, res.req = s.exact, s.req
				res.isExt = s.isExt
				continue
			}
			res.isExt = res.isExt && s.isExt && len(res.exact)+len(s.exact) <= maxLits
			if res.isExt {
				res.exact = append(res.exact[:len(res.exact):len(res.exact)], s.exact...)
			} else {
				res.exact = nil
			}
			if len(res.req)+len(s.req) > maxLits {
				return litSet{}
			}
			res.req = append(res.req[:len(res.req):len(res.req)], s.req...)
		}
		return res
	case syntax.OpConcat:
		return concatSet(n.Sub)
	}
	return litSet{}
}

// classSet: a class of one ASCII character, or of an ASCII letter in both cases
// (the translation's [gG]), is exact.
func classSet(rs []rune) litSet {
	switch {
	case len(rs) == 2 && rs[0] == rs[1] && rs[0] < utf8.RuneSelf:
		return exactSet(lit{s: string(rune(rs[0]))})
	case len(rs) == 4 && rs[0] == rs[1] && rs[2] == rs[3] && 'A' <= rs[0] && rs[0] <= 'Z' && rs[2] == rs[0]+'a'-'A':
		return exactSet(lit{s: string(rune(rs[2])), fold: 1})
	}
	return litSet{}
}

// concatSet joins the exact sets of consecutive nodes (their cross product while
// it stays small); the requirement is the best of those runs and of the other
// nodes' requirements.
func concatSet(subs []*syntax.Regexp) litSet {
	var best []lit
	consider := func(ls []lit) {
		if better(ls, best) {
			best = ls
		}
	}
	cur := []lit{{}}
	exact := true
	for _, sub := range subs {
		s := analyse(sub)
		if !s.isExt {
			consider(cur)
			consider(s.req)
			cur, exact = []lit{{}}, false
			continue
		}
		if p := cross(cur, s.exact); p != nil {
			cur = p
			continue
		}
		consider(cur)
		cur, exact = s.exact, false
	}
	consider(cur)
	if exact {
		return exactSet(cur...)
	}
	return litSet{req: best}
}

// cross is every a followed by every b, nil when too many or too long.
func cross(a, b []lit) []lit {
	if len(a)*len(b) > maxLits {
		return nil
	}
	res := make([]lit, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			if len(x.s)+len(y.s) > maxLitLen {
				return nil
			}
			res = append(res, lit{s: x.s + y.s, fold: x.fold | y.fold<<len(x.s)})
		}
	}
	return res
}

// better reports that requirement a selects more than b: it requires something
// (no "") and its shortest literal is longer, or as long with fewer literals.
func better(a, b []lit) bool {
	ma, mb := minLen(a), minLen(b)
	if ma == 0 {
		return false
	}
	return ma > mb || ma == mb && len(a) < len(b)
}

func minLen(ls []lit) int {
	if len(ls) == 0 || len(ls) > maxLits {
		return 0
	}
	m := maxLitLen + 1
	for _, l := range ls {
		m = min(m, len(l.s))
	}
	return m
}
