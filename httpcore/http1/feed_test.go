package http1

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// parser is what Request and Response have in common for feeding tests.
type parser interface {
	Parse(buf []byte) (int, error)
}

// feed hands input to p in pieces cut at cuts, the way a connection delivers
// it: the buffer only grows, and appending may move it.
func feed(p parser, input []byte, cuts []int) (int, error) {
	var buf []byte
	prev := 0
	for _, c := range append(cuts, len(input)) {
		buf = append(buf, input[prev:c]...)
		prev = c
		n, err := p.Parse(buf)
		if err != ErrNeedMore {
			return n, err
		}
	}
	return 0, ErrNeedMore
}

// splits returns the ways every table input is fed: whole, one byte at a
// time, and a few random cuttings.
func splits(n int, rng *rand.Rand) [][]int {
	every := make([]int, 0, n)
	for i := 1; i < n; i++ {
		every = append(every, i)
	}
	out := [][]int{nil, every}
	for range 4 {
		var cuts []int
		for i := 1; i < n; i += 1 + rng.IntN(16) {
			cuts = append(cuts, i)
		}
		out = append(out, cuts)
	}
	return out
}

func statusOf(err error) int {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Status
	}
	return 0
}

// sameResult fails t unless every split of input gives what the whole input
// gives.
func sameResult(t *testing.T, newParser func() parser, input []byte, rng *rand.Rand) (parser, int, error) {
	t.Helper()
	whole := newParser()
	n, err := feed(whole, input, nil)
	for _, cuts := range splits(len(input), rng) {
		p := newParser()
		n2, err2 := feed(p, input, cuts)
		if n2 != n || err2 != err {
			t.Fatalf("fed in %d pieces: (%d, %v), whole: (%d, %v)", len(cuts)+1, n2, err2, n, err)
		}
	}
	return whole, n, err
}
