package pcre

// A bounded backtracker over the compiled program Go's regexp runs, adapted from
// Go's regexp/backtrack.go (BSD licence, The Go Authors): Go's regexp has no call
// that writes a match's offsets into a caller's buffer, so a match with captures
// would allocate once per request. This one keeps its scratch state in a pool and
// writes into the caller's slice. It explores the program in Go's priority order and
// stops at the first match from the leftmost start, so its offsets are exactly
// regexp's leftmost-first ones; a bitset of visited (instruction, position) pairs
// keeps it linear in prog × input (no exponential backtracking). Inputs too long
// go to Go's regexp (see maxWork).
//
// Unlike Go's, it only marks the instructions that more than one edge leads to (or
// the start): one that a single edge leads to is reached only from its predecessor,
// so each of its runs follows a run of the nearest marked instruction before it and
// the work stays linear. Such a state may be run twice (two rune widths landing on
// the same position), but never while its first run is in progress (that would be
// a loop of no width, which passes a marked instruction at the same position), and
// a finished run found no match with a visited set that has only grown since, so
// the second fails too: the order in which matches are found is Go's.

import (
	"regexp/syntax"
	"strings"
	"sync"
	"unicode/utf8"
)

const (
	// maxWork bounds program length × (input length + 1), so the visited bits
	// (128 KiB at most) and the job stack: an input longer than that allows (16 KiB
	// for a 64-instruction program) is matched by Go's regexp, which allocates the
	// result. Go's own backtracker stops at a quarter of it.
	maxWork = 1 << 20
	// maxPooledJobs is the longest job stack kept for the next match (512 KiB).
	maxPooledJobs = 1 << 16
)

// op is what the backtracker does at an instruction: Go's consuming opcodes are one
// opRune, tested on an ASCII bitmap first.
type op uint8

const (
	opFail op = iota
	opAlt
	opRune
	opCapture
	opEmpty
	opNop
	opMatch
)

type inst struct {
	op       op
	out, arg uint32
	row      int32        // its row of visited bits; -1: not marked
	ascii    [2]uint64    // opRune: the ASCII characters it takes
	wide     *syntax.Inst // opRune: Go's instruction, for the others
}

// prog is a syntax.Prog laid out for the backtracker.
type prog struct {
	inst   []inst
	start  uint32
	cond   syntax.EmptyOp // what the start needs (\A: only position 0)
	prefix string         // a literal every match starts with
	// Unanchored programs that cannot match empty: the bytes a match can start
	// with (all of 0x80-0xFF or none: whether it can start with a non-ASCII
	// character or an invalid byte); nil for the others.
	first  *[256]bool
	pf     *prefilter // unanchored programs without a prefix: literals a match needs
	ncap   int        // offsets of $0 ... $n
	rows   int        // marked instructions
	maxLen int        // longest input the backtracker takes; -1: none
}

// newProg lays out p, whose pattern has ncap/2 groups counting $0 (simplification
// may have dropped some from p: they stay unset, as regexp pads them).
func newProg(p *syntax.Prog, re *syntax.Regexp, ncap int) *prog {
	bp := &prog{start: uint32(p.Start), cond: p.StartCond(), ncap: max(p.NumCap, ncap, 2)}
	bp.prefix, _ = p.Prefix()
	bp.inst = make([]inst, len(p.Inst))
	in := make([]int, len(p.Inst))
	in[p.Start]++
	for pc := range p.Inst {
		switch gi := &p.Inst[pc]; gi.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			in[gi.Out]++
			in[gi.Arg]++
		case syntax.InstMatch, syntax.InstFail:
		default:
			in[gi.Out]++
		}
	}
	for pc := range bp.inst {
		bp.inst[pc].row = -1
		if in[pc] > 1 {
			bp.inst[pc].row = int32(bp.rows)
			bp.rows++
		}
	}
	bp.maxLen = maxWork/len(p.Inst) - 1
	for pc := range p.Inst {
		gi := &p.Inst[pc]
		in := &bp.inst[pc]
		in.out, in.arg = gi.Out, gi.Arg
		switch gi.Op {
		case syntax.InstAlt:
			in.op = opAlt
		case syntax.InstCapture:
			in.op = opCapture
		case syntax.InstEmptyWidth:
			in.op = opEmpty
		case syntax.InstNop:
			in.op = opNop
		case syntax.InstMatch:
			in.op = opMatch
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			in.op, in.wide = opRune, gi
			for c := rune(0); c < utf8.RuneSelf; c++ {
				if matchRune(gi, c) {
					in.ascii[c>>6] |= 1 << (c & 63)
				}
			}
		case syntax.InstFail:
			in.op = opFail
		default:
			// syntax.Compile writes no other (InstAltMatch is onepass's): should
			// it one day, Go's regexp runs the pattern.
			bp.maxLen = -1
		}
	}
	bp.firstSet(p)
	if bp.prefix == "" && bp.cond&syntax.EmptyBeginText == 0 {
		bp.pf = newPrefilter(re)
	}
	return bp
}

// firstSet finds what a match can start with: the consuming instructions reached
// from the start without consuming, unless a match can be empty.
func (bp *prog) firstSet(p *syntax.Prog) {
	if bp.prefix != "" || bp.cond&syntax.EmptyBeginText != 0 {
		return // a literal or an anchor does better
	}
	var first [256]bool
	seen := make([]bool, len(p.Inst))
	stack := []uint32{uint32(p.Start)}
	for len(stack) > 0 {
		pc := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pc] {
			continue
		}
		seen[pc] = true
		switch gi := &p.Inst[pc]; gi.Op {
		case syntax.InstMatch:
			return // an empty match: any position may be it
		case syntax.InstAlt, syntax.InstAltMatch:
			stack = append(stack, gi.Out, gi.Arg)
		case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
			stack = append(stack, gi.Out) // an assertion only narrows
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			ascii := &bp.inst[pc].ascii
			for c := range utf8.RuneSelf {
				first[c] = first[c] || ascii[c>>6]&(1<<(c&63)) != 0
			}
			if takesWide(gi) {
				for c := utf8.RuneSelf; c < len(first); c++ {
					first[c] = true
				}
			}
		}
	}
	bp.first = &first
}

// takesWide reports whether gi may take a character at or above utf8.RuneSelf
// (or an invalid byte, U+FFFD); true when unsure.
func takesWide(gi *syntax.Inst) bool {
	switch gi.Op {
	case syntax.InstRune1:
		return gi.Rune[0] >= utf8.RuneSelf
	case syntax.InstRune:
		if syntax.Flags(gi.Arg)&syntax.FoldCase != 0 {
			return true // k folds to U+212A KELVIN SIGN
		}
		for i := 1; i < len(gi.Rune); i += 2 {
			if gi.Rune[i] >= utf8.RuneSelf {
				return true
			}
		}
		return len(gi.Rune) == 1 && gi.Rune[0] >= utf8.RuneSelf
	}
	return true
}

// skip returns the first start position at or after pos, one of Go's (a
// character's first byte or an invalid byte), where a match can start by the
// first set, or len(s) if none. pos is one of Go's: so is every ASCII byte, and
// the first non-ASCII byte after pos or after an ASCII byte.
func (p *prog) skip(s string, pos int) int {
	first := p.first
	for ; pos < len(s); pos++ {
		if first[s[pos]] {
			return pos
		}
	}
	return len(s)
}

// matchRune is what Go's backtracker tests for each consuming opcode.
func matchRune(gi *syntax.Inst, r rune) bool {
	switch gi.Op {
	case syntax.InstRune1:
		return r == gi.Rune[0]
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	case syntax.InstRuneAny:
		return true
	}
	return gi.MatchRune(r)
}

// job is an entry of the job stack: an instruction to run at pos, or (jobArg set in
// pc) the second half of an Alt, or a capture to restore (pos is then its old
// value). Inputs are shorter than maxWork, so positions fit in 32 bits.
type job struct {
	pc  uint32
	pos int32
}

const jobArg = 1 << 31

// scratch is one match's state, pooled across matches and programs.
type scratch struct {
	end     int
	visited []uint32
	jobs    []job
	cap     []int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (b *scratch) reset(p *prog, end int) {
	b.end = end
	b.jobs = b.jobs[:0]
	n := (p.rows*(end+1) + 31) / 32
	if cap(b.visited) < n {
		b.visited = make([]uint32, n)
	} else {
		b.visited = b.visited[:n]
		clear(b.visited)
	}
	if cap(b.cap) < p.ncap {
		b.cap = make([]int, p.ncap)
	}
	b.cap = b.cap[:p.ncap]
	for i := range b.cap {
		b.cap[i] = -1
	}
}

// shouldVisit marks (in, pos) visited and reports whether it was not yet.
func (b *scratch) shouldVisit(in *inst, pos int) bool {
	if in.row < 0 {
		return true
	}
	n := uint(int(in.row)*(b.end+1) + pos)
	w, bit := n/32, uint32(1)<<(n&31)
	if b.visited[w]&bit != 0 {
		return false
	}
	b.visited[w] |= bit
	return true
}

func (b *scratch) push(p *prog, pc uint32, pos int, arg bool) {
	if in := &p.inst[pc]; in.op != opFail && (arg || b.shouldVisit(in, pos)) {
		if arg {
			pc |= jobArg
		}
		b.jobs = append(b.jobs, job{pc: pc, pos: int32(pos)})
	}
}

// exec matches s, fills caps as Exec documents and reports the match. s must be no
// longer than p.maxLen.
func (p *prog) exec(s string, caps []int) (int, bool) {
	if p.cond == ^syntax.EmptyOp(0) {
		return 0, false // the program cannot match
	}
	if p.pf != nil && p.pf.reject(s) {
		return 0, false
	}
	start := 0
	if p.first != nil {
		if start = p.skip(s, 0); start == len(s) {
			return 0, false // a match would take a character
		}
	}
	b := scratchPool.Get().(*scratch)
	b.reset(p, len(s))
	matched := false
	if p.cond&syntax.EmptyBeginText != 0 {
		b.cap[0] = 0
		matched = p.try(b, s, 0)
	} else {
		// Every start position in turn; visited is not cleared between them, so
		// each (pc, pos) is still run once in all.
		for pos := start; pos <= len(s); {
			if p.prefix != "" {
				i := indexFrom(s, pos, p.prefix)
				if i < 0 {
					break
				}
				pos = i
			} else if p.first != nil {
				if pos = p.skip(s, pos); pos == len(s) {
					break
				}
			}
			b.cap[0] = pos
			if p.try(b, s, pos) {
				matched = true
				break
			}
			if pos == len(s) {
				break
			}
			_, w := utf8.DecodeRuneInString(s[pos:])
			pos += w
		}
	}
	n := 0
	if matched {
		n = copy(caps, b.cap)
	}
	if cap(b.jobs) > maxPooledJobs {
		b.jobs = nil // a rare long subject: not kept for every match after it
	}
	scratchPool.Put(b)
	return n, matched
}

// try runs the program from pc Start at pos; on a match b.cap holds its offsets.
func (p *prog) try(b *scratch, s string, pos int) bool {
	b.push(p, p.start, pos, false)
	for len(b.jobs) > 0 {
		l := len(b.jobs) - 1
		j := b.jobs[l]
		b.jobs = b.jobs[:l]
		pc, pos, arg := j.pc&^jobArg, int(j.pos), j.pc&jobArg != 0
		var in *inst
		goto skip
	check:
		in = &p.inst[pc]
		if !b.shouldVisit(in, pos) {
			continue
		}
	skip:
		in = &p.inst[pc]
		switch in.op {
		case opAlt:
			// The Arg branch is pushed as a reminder (arg), not as a job, so that
			// reaching it first from the Out branch runs it there, as Go does.
			if arg {
				arg = false
				pc = in.arg
				goto check
			}
			b.push(p, pc, pos, true)
			pc = in.out
			goto check
		case opRune:
			if pos >= len(s) {
				continue
			}
			if c := s[pos]; c < utf8.RuneSelf {
				if in.ascii[c>>6]&(1<<(c&63)) == 0 {
					continue
				}
				pos++
			} else {
				r, w := utf8.DecodeRuneInString(s[pos:])
				if !matchRune(in.wide, r) {
					continue
				}
				pos += w
			}
			pc = in.out
			goto check
		case opCapture:
			if arg {
				b.cap[in.arg] = pos // done with Out: restore the old value
				continue
			}
			if in.arg < uint32(len(b.cap)) {
				b.push(p, pc, b.cap[in.arg], true)
				b.cap[in.arg] = pos
			}
			pc = in.out
			goto check
		case opEmpty:
			if !emptyMatch(syntax.EmptyOp(in.arg), s, pos) {
				continue
			}
			pc = in.out
			goto check
		case opNop:
			pc = in.out
			goto check
		case opMatch:
			b.cap[1] = pos // leftmost-first: the first match found from here wins
			return true
		default:
			panic("pcre: bad instruction")
		}
	}
	return false
}

// emptyMatch is Go's lazyFlag.match: the characters either side of pos (-1 at the
// ends) satisfy op. Go decodes them, but only tests them against '\n' and ASCII word
// characters, so the bytes either side give the same answers.
func emptyMatch(op syntax.EmptyOp, s string, pos int) bool {
	if op == 0 {
		return true
	}
	r1, r2 := rune(-1), rune(-1)
	if pos > 0 {
		r1 = rune(s[pos-1])
	}
	if pos < len(s) {
		r2 = rune(s[pos])
	}
	if op&syntax.EmptyBeginLine != 0 && r1 != '\n' && r1 >= 0 ||
		op&syntax.EmptyBeginText != 0 && r1 >= 0 ||
		op&syntax.EmptyEndLine != 0 && r2 != '\n' && r2 >= 0 ||
		op&syntax.EmptyEndText != 0 && r2 >= 0 {
		return false
	}
	op &^= syntax.EmptyBeginLine | syntax.EmptyBeginText | syntax.EmptyEndLine | syntax.EmptyEndText
	if op == 0 {
		return true
	}
	if syntax.IsWordChar(r1) != syntax.IsWordChar(r2) {
		op &^= syntax.EmptyWordBoundary
	} else {
		op &^= syntax.EmptyNoWordBoundary
	}
	return op == 0
}

// indexFrom is the first index at or after from where prefix starts, or -1.
func indexFrom(s string, from int, prefix string) int {
	i := strings.Index(s[from:], prefix)
	if i < 0 {
		return -1
	}
	return from + i
}
