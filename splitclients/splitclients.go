// Package splitclients is nginx's split_clients block: a variable that puts each
// value of a string (with variables) in one of several buckets by percentage, with
// nginx's MurmurHash2 so a key lands in the bucket nginx would put it in.
package splitclients

import (
	"fmt"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module declares split_clients; each block defines its variable in the
// configuration's variables, computed once a request.
var Module = &conf.Module{
	Name: "split_clients",
	Directives: []conf.Directive{
		{Name: "split_clients", Contexts: conf.HTTPCtx, Args: conf.Args2, Block: true, Multi: true, Set: setSplit,
			Syntax: "split_clients string $variable { ... }",
			Doc:    "Defines $variable for A/B testing: MurmurHash2 of the string (with variables) picks one of the lines \"percent% value;\" (up to two decimals) or \"* value;\", as in nginx."},
	},
	NewMain: func() any { return &Conf{} },
}

// Conf holds the split_clients blocks of a configuration, in the order written.
type Conf struct {
	Splits []*Split
}

func setSplit(c *conf.Cursor, s *conf.Stmt) error {
	sp, err := Parse(c, s)
	if err != nil {
		return err
	}
	if err := sp.define(c); err != nil {
		return err
	}
	sc := c.MainConf().(*Conf)
	sc.Splits = append(sc.Splits, sp)
	return nil
}

// define defines the block's variable: the value of the part the string's hash
// falls in.
func (s *Split) define(c *conf.Cursor) error {
	vars, err := httpcore.ConfigVariables(c)
	if err != nil {
		return err
	}
	src, err := httpcore.CompileTemplate(c, s.Source)
	if err != nil {
		return &conf.Error{Pos: s.Pos, Msg: err.Error()}
	}
	get := func(dst []byte, r *httpcore.Request) []byte {
		start := len(dst)
		dst = src.Append(dst, r)
		i := s.Lookup(dst[start:])
		dst = dst[:start]
		if i < 0 {
			return dst
		}
		return append(dst, s.Values[i]...)
	}
	if _, err := vars.Define(s.Var, get, false); err != nil {
		return &conf.Error{Pos: s.Pos, Msg: err.Error()}
	}
	return nil
}

// Split is one split_clients block.
type Split struct {
	Source string   // the string hashed, as written: a template the core compiles
	Var    string   // the variable defined, without "$"
	Pos    conf.Pos // where the block starts
	Values []string // the parts' values, in order (plain strings, as in nginx)

	// limits[i] is part i's upper bound on the hash, exclusive; 0 takes every hash
	// (the "*" part, or the one that reaches 100%).
	limits []uint32
}

// Parse reads "split_clients string $variable { ... }" from the directive s, with c
// at its block, as nginx's ngx_conf_split_clients_block does.
func Parse(c *conf.Cursor, s *conf.Stmt) (*Split, error) {
	if len(s.Args) != 2 {
		return nil, s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	name := s.Args[1].Value
	if !strings.HasPrefix(name, "$") {
		return nil, &conf.Error{Pos: s.Args[1].Pos, Msg: fmt.Sprintf("invalid variable name %q", name)}
	}
	if name == "$" {
		return nil, &conf.Error{Pos: s.Args[1].Pos, Msg: `invalid variable name "$"`}
	}
	sp := &Split{Source: s.Args[0].Value, Var: name[1:], Pos: s.Pos}
	var percents []uint32
	err := c.ParseRawBlock(func(c *conf.Cursor, st *conf.Stmt) error {
		if len(st.Args) != 1 {
			// nginx hands any line to its handler and reads value[1].
			return st.Errorf("invalid number of parameters in split_clients block")
		}
		p, err := ParsePercent(st.Name)
		if err != nil {
			return st.Errorf("invalid percent value %q", st.Name)
		}
		percents = append(percents, p)
		sp.Values = append(sp.Values, st.Args[0].Value)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sp.limits, err = Limits(percents); err != nil {
		return nil, &conf.Error{Pos: s.Pos, Msg: err.Error()}
	}
	return sp, nil
}

// ParsePercent reads "12.34%" as 1234 (ten-thousandths), as ngx_atofp(.., 2) does,
// or "*" as 0; no more than two decimals, and not 0%.
func ParsePercent(s string) (uint32, error) {
	if s == "*" {
		return 0, nil
	}
	if s == "" || s[len(s)-1] != '%' {
		return 0, fmt.Errorf("invalid percent value %q", s)
	}
	digits := s[:len(s)-1]
	if digits == "" {
		return 0, fmt.Errorf("invalid percent value %q", s)
	}
	var v uint64
	point, dot := 2, false
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if point == 0 {
			return 0, fmt.Errorf("invalid percent value %q", s)
		}
		if c == '.' {
			if dot {
				return 0, fmt.Errorf("invalid percent value %q", s)
			}
			dot = true
			continue
		}
		if c < '0' || c > '9' || v > 1<<40 {
			return 0, fmt.Errorf("invalid percent value %q", s)
		}
		v = v*10 + uint64(c-'0')
		if dot {
			point--
		}
	}
	for ; point > 0; point-- {
		v *= 10
	}
	if v == 0 || v > 1<<31 {
		return 0, fmt.Errorf("invalid percent value %q", s)
	}
	return uint32(v), nil
}

// Limits turns the parts' percentages (ten-thousandths, 0 for "*") into hash
// limits as nginx does: each part covers percent * 0xffffffff / 10000 more hashes
// than the one before; the part that brings the total to 100% (or "*") takes all
// the rest, as nginx does since 1.29.
func Limits(percents []uint32) ([]uint32, error) {
	limits := make([]uint32, len(percents))
	var sum, last uint32
	for i, p := range percents {
		if p != 0 {
			sum += p
		} else {
			sum = 10000
		}
		if sum > 10000 {
			return nil, fmt.Errorf("percent total is greater than 100%%")
		}
		if sum == 10000 {
			p = 0
		}
		if p != 0 {
			last += uint32(uint64(p) * 0xffffffff / 10000)
			limits[i] = last
		}
	}
	return limits, nil
}

// Lookup returns the index in Values of the part key's hash falls in, or -1 when the
// percentages leave it out (the variable is then empty). It allocates nothing.
func (s *Split) Lookup(key []byte) int {
	h := Hash(key)
	for i, l := range s.limits {
		if h < l || l == 0 {
			return i
		}
	}
	return -1
}

// Value is the variable's value for key.
func (s *Split) Value(key []byte) string {
	if i := s.Lookup(key); i >= 0 {
		return s.Values[i]
	}
	return ""
}

// Hash is ngx_murmur_hash2: 32-bit MurmurHash2 with seed 0, bytes read little-endian.
func Hash(data []byte) uint32 {
	const m = 0x5bd1e995
	h := uint32(len(data))
	for len(data) >= 4 {
		k := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
		k *= m
		k ^= k >> 24
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
