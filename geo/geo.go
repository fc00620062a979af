// Package geo is nginx's geo block: a variable whose value depends on an IPv4 or
// IPv6 address, by longest-prefix match over networks or, in "ranges" mode, over
// IPv4 address ranges, with nginx's X-Forwarded-For handling for trusted proxies.
//
// Both modes compile to sorted disjoint address intervals: a lookup is a binary
// search over one slice, allocation-free.
package geo

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module declares geo; each block defines its variable in the configuration's
// variables, computed once a request (unless volatile).
var Module = &conf.Module{
	Name: "geo",
	Directives: []conf.Directive{
		{Name: "geo", Contexts: conf.HTTPCtx, Args: conf.Args1 | conf.Args2, Block: true, Multi: true, Set: setGeo,
			Syntax: "geo [$address] $variable { ... }",
			Doc:    "Defines $variable from the client address (or $address): CIDR value; lines by longest prefix, or start-end value; with ranges; default, delete, include, proxy CIDR; proxy_recursive; volatile; as nginx."},
	},
	NewMain: func() any { return &Conf{} },
}

// Conf holds the geo blocks of a configuration, in the order written.
type Conf struct {
	Geos []*Geo
}

func setGeo(c *conf.Cursor, s *conf.Stmt) error {
	g, err := Parse(c, s)
	if err != nil {
		return err
	}
	if err := g.define(c); err != nil {
		return err
	}
	gc := c.MainConf().(*Conf)
	gc.Geos = append(gc.Geos, g)
	return nil
}

// define defines the block's variable: the value for the client's address, or the
// address the source variable holds, as ngx_http_geo_addr finds it.
func (g *Geo) define(c *conf.Cursor) error {
	vars, err := httpcore.ConfigVariables(c)
	if err != nil {
		return err
	}
	var src *httpcore.Template
	if g.Source != "" {
		if src, err = httpcore.CompileTemplate(c, "$"+g.Source); err != nil {
			return &conf.Error{Pos: g.Pos, Msg: err.Error()}
		}
	}
	get := func(dst []byte, r *httpcore.Request) []byte {
		var addr netip.Addr
		if src == nil {
			addr = r.RemoteAddr().Addr()
		} else {
			start := len(dst)
			dst = src.Append(dst, r)
			addr = ParseAddr(dst[start:])
			dst = dst[:start]
		}
		if len(g.Proxies) > 0 {
			addr = g.Addr(addr, forwardedFor(r))
		}
		return append(dst, g.Values[g.Lookup(addr)]...)
	}
	if _, err := vars.Define(g.Var, get, g.Volatile); err != nil {
		return &conf.Error{Pos: g.Pos, Msg: err.Error()}
	}
	return nil
}

// forwardedFor is the request's X-Forwarded-For fields' values in order.
func forwardedFor(r *httpcore.Request) [][]byte {
	h := &r.Head().Headers
	var xff [][]byte
	for i := h.Index("x-forwarded-for", 0); i >= 0; i = h.Index("x-forwarded-for", i+1) {
		xff = append(xff, h.Value(i))
	}
	return xff
}

// Geo is one geo block.
type Geo struct {
	Source         string         // the variable holding the address, without "$"; "" for the client's
	Var            string         // the variable defined, without "$"
	Pos            conf.Pos       // where the block starts
	Ranges         bool           // "ranges": IPv4 start-end ranges
	Volatile       bool           // the value is not cached for the request
	Proxies        []netip.Prefix // "proxy": whose X-Forwarded-For is believed
	ProxyRecursive bool
	Values         []string // every distinct value; lookups return an index

	v4 table4
	v6 table6
}

// table4 maps IPv4 addresses to values: starts[i] ... starts[i+1]-1 have vals[i];
// starts[0] is 0.
type table4 struct {
	starts []uint32
	vals   []int32
}

type table6 struct {
	starts []u128
	vals   []int32
}

// u128 is an IPv6 address as a number.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }
func (a u128) next() u128 {
	if a.lo == ^uint64(0) {
		return u128{a.hi + 1, 0}
	}
	return u128{a.hi, a.lo + 1}
}

func u128Of(a [16]byte) u128 {
	var v u128
	for i := 0; i < 8; i++ {
		v.hi = v.hi<<8 | uint64(a[i])
		v.lo = v.lo<<8 | uint64(a[8+i])
	}
	return v
}

// Lookup returns the index in Values for addr: the client's address, or the address
// the source variable holds (see ParseAddr), after Addr. The zero Addr (no address,
// or one that did not parse) looks up 255.255.255.255, as nginx does.
func (g *Geo) Lookup(addr netip.Addr) int {
	switch {
	case !addr.IsValid():
		return int(g.v4.find(inaddrNone))
	case addr.Is4() || addr.Is4In6():
		b := addr.Unmap().As4()
		return int(g.v4.find(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])))
	case g.Ranges:
		return int(g.v4.find(inaddrNone))
	default:
		return int(g.v6.find(u128Of(addr.As16())))
	}
}

// Value is Values[Lookup(addr)].
func (g *Geo) Value(addr netip.Addr) string { return g.Values[g.Lookup(addr)] }

// Addr is the address a request looks up, as ngx_http_geo_addr finds it: addr is the
// client's address or the one the source variable parsed to (the zero Addr if it did
// not); when it is one of the proxies, X-Forwarded-For (xff: the headers' values in
// the order received) gives the address instead.
func (g *Geo) Addr(addr netip.Addr, xff [][]byte) netip.Addr {
	if !addr.IsValid() || len(g.Proxies) == 0 || len(xff) == 0 {
		return addr
	}
	return ForwardedAddr(addr, xff, g.Proxies, g.ProxyRecursive)
}

func (t *table4) find(a uint32) int32 {
	lo, hi := 0, len(t.starts)
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if t.starts[mid] <= a {
			lo = mid
		} else {
			hi = mid
		}
	}
	return t.vals[lo]
}

func (t *table6) find(a u128) int32 {
	lo, hi := 0, len(t.starts)
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if !a.less(t.starts[mid]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return t.vals[lo]
}

// builder is a geo block being parsed.
type builder struct {
	g        *Geo
	valueOf  map[string]int32
	cidrSeen bool // a network line: "ranges" may no longer come
	nets4    map[netip.Prefix]int32
	nets6    map[netip.Prefix]int32
	chunks   map[uint32][]rng // ranges mode: nginx's ranges per /16, by the /16
	dflt     int32            // ranges mode default, -1 for none
}

// rng is a range inside one /16: the low 16 bits of its first and last address.
type rng struct {
	start, end uint32
	value      int32
}

func (b *builder) value(text string) int32 {
	if v, ok := b.valueOf[text]; ok {
		return v
	}
	v := int32(len(b.g.Values))
	b.g.Values = append(b.g.Values, text)
	b.valueOf[text] = v
	return v
}

// Parse reads "geo [$address] $variable { ... }" from the directive s, with c at its
// block, as nginx's ngx_http_geo_block does.
func Parse(c *conf.Cursor, s *conf.Stmt) (*Geo, error) {
	g := &Geo{Pos: s.Pos}
	args := s.Args
	for _, a := range args {
		if !strings.HasPrefix(a.Value, "$") || a.Value == "$" {
			return nil, &conf.Error{Pos: a.Pos, Msg: fmt.Sprintf("invalid variable name %q", a.Value)}
		}
	}
	switch len(args) {
	case 1:
		g.Var = args[0].Value[1:]
	case 2:
		g.Source, g.Var = args[0].Value[1:], args[1].Value[1:]
	default:
		return nil, s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	b := &builder{g: g, valueOf: map[string]int32{}, nets4: map[netip.Prefix]int32{},
		nets6: map[netip.Prefix]int32{}, chunks: map[uint32][]rng{}, dflt: -1}
	err := c.ParseRawBlock(func(c *conf.Cursor, st *conf.Stmt) error {
		return b.line(c, st)
	})
	if err != nil {
		return nil, err
	}
	b.finish()
	return g, nil
}

// line is ngx_http_geo for one statement.
func (b *builder) line(c *conf.Cursor, st *conf.Stmt) error {
	g := b.g
	if len(st.Args) == 0 {
		switch st.Name {
		case "ranges":
			if b.cidrSeen {
				return st.Errorf(`the "ranges" directive must be the first directive inside "geo" block`)
			}
			g.Ranges = true
			return nil
		case "proxy_recursive":
			g.ProxyRecursive = true
			return nil
		case "volatile":
			g.Volatile = true
			return nil
		}
	}
	if len(st.Args) != 1 {
		return st.Errorf("invalid number of the geo parameters")
	}
	arg := st.Args[0].Value
	if st.Name == "proxy" {
		p, meaningless, ok := parseCIDR(arg)
		if !ok {
			return st.Errorf("invalid network %q", arg)
		}
		if meaningless {
			c.Warn(st.Pos, "low address bits of %s are meaningless", arg)
		}
		g.Proxies = append(g.Proxies, p)
		return nil
	}
	if g.Ranges {
		return b.rangeLine(c, st)
	}
	return b.cidrLine(c, st)
}

// cidrLine is ngx_http_geo_cidr.
func (b *builder) cidrLine(c *conf.Cursor, st *conf.Stmt) error {
	b.cidrSeen = true
	if st.Name == "default" {
		v := b.value(st.Args[0].Value)
		b.addNet(c, st, netip.PrefixFrom(netip.IPv4Unspecified(), 0), v, "default")
		b.addNet(c, st, netip.PrefixFrom(netip.IPv6Unspecified(), 0), v, "default")
		return nil
	}
	net, del := st.Name, false
	if net == "delete" {
		net, del = st.Args[0].Value, true
	}
	p, meaningless, ok := parseCIDR(net)
	if !ok {
		return st.Errorf("invalid network %q", net)
	}
	if meaningless {
		c.Warn(st.Pos, "low address bits of %s are meaningless", net)
	}
	nets := b.nets6
	if p.Addr().Is4() {
		nets = b.nets4
	}
	if del {
		if _, ok := nets[p]; !ok {
			c.Warn(st.Pos, "no network %q to delete", net)
		}
		delete(nets, p)
		return nil
	}
	b.addNet(c, st, p, b.value(st.Args[0].Value), net)
	return nil
}

func (b *builder) addNet(c *conf.Cursor, st *conf.Stmt, p netip.Prefix, v int32, net string) {
	nets := b.nets6
	if p.Addr().Is4() {
		nets = b.nets4
	}
	if old, dup := nets[p]; dup {
		c.Warn(st.Pos, "duplicate network %q, value: %q, old value: %q", net, b.g.Values[v], b.g.Values[old])
	}
	nets[p] = v
}

// rangeLine is ngx_http_geo_range.
func (b *builder) rangeLine(c *conf.Cursor, st *conf.Stmt) error {
	if st.Name == "default" {
		if b.dflt >= 0 {
			c.Warn(st.Pos, "duplicate default geo range value: %q, old value: %q", st.Args[0].Value, b.g.Values[b.dflt])
		}
		b.dflt = b.value(st.Args[0].Value)
		return nil
	}
	net, del := st.Name, false
	if net == "delete" {
		net, del = st.Args[0].Value, true
	}
	first, last, found := cut(net, '-')
	if !found {
		return st.Errorf("invalid range %q", net)
	}
	start, ok1 := inetAddr([]byte(first))
	end, ok2 := inetAddr([]byte(last))
	if !ok1 || !ok2 || start > end {
		return st.Errorf("invalid range %q", net)
	}
	if del {
		if b.deleteRange(start, end) {
			c.Warn(st.Pos, "no address range %q to delete", net)
		}
		return nil
	}
	return b.addRange(c, st, net, start, end, b.value(st.Args[0].Value))
}

// addRange is ngx_http_geo_add_range: the range is cut at each /16; in each, it may
// fall in a gap, replace an equal range, or lie inside one range (which it splits);
// any other overlap is an error.
func (b *builder) addRange(c *conf.Cursor, st *conf.Stmt, net string, start, end uint32, v int32) error {
	for n := start; ; n = (n + 0x10000) & 0xffff0000 {
		h := n >> 16
		s, e := uint32(0), uint32(0xffff)
		if n == start {
			s = n & 0xffff
		}
		if n|0xffff > end {
			e = end & 0xffff
		}
		rs := b.chunks[h]
		i := len(rs)
		placed := false
		for i > 0 && !placed {
			i--
			r := rs[i]
			switch {
			case e < r.start:
				continue
			case s > r.end: // after it
				rs = slices.Insert(rs, i+1, rng{s, e, v})
			case s == r.start && e == r.end:
				c.Warn(st.Pos, "duplicate range %q, value: %q, old value: %q", net, b.g.Values[v], b.g.Values[r.value])
				rs[i].value = v
			case s > r.start && e < r.end: // inside: split
				rs = slices.Insert(rs, i+1, rng{s, e, v}, rng{e + 1, r.end, r.value})
				rs[i].end = s - 1
			case s == r.start && e < r.end:
				rs = slices.Insert(rs, i, rng{s, e, v})
				rs[i+1].start = e + 1
			case s > r.start && e == r.end:
				rs = slices.Insert(rs, i+1, rng{s, e, v})
				rs[i].end = s - 1
			default:
				return st.Errorf("range %q overlaps \"%d.%d.%d.%d-%d.%d.%d.%d\"", net,
					h>>8, h&0xff, r.start>>8, r.start&0xff, h>>8, h&0xff, r.end>>8, r.end&0xff)
			}
			placed = true
		}
		if !placed {
			rs = slices.Insert(rs, 0, rng{s, e, v})
		}
		b.chunks[h] = rs
		if h == 0xffff || (n+0x10000)&0xffff0000 > end || (n+0x10000)&0xffff0000 == 0 {
			break
		}
	}
	return nil
}

// deleteRange is ngx_http_geo_delete_range: it removes the pieces equal to the range
// in each /16, and reports whether one was missing.
func (b *builder) deleteRange(start, end uint32) (warn bool) {
	for n := start; ; n = (n + 0x10000) & 0xffff0000 {
		h := n >> 16
		s, e := uint32(0), uint32(0xffff)
		if n == start {
			s = n & 0xffff
		}
		if n|0xffff > end {
			e = end & 0xffff
		}
		rs := b.chunks[h]
		if len(rs) == 0 {
			warn = true
		}
		for i := range rs {
			if rs[i].start == s && rs[i].end == e {
				b.chunks[h] = slices.Delete(rs, i, i+1)
				break
			}
			if i == len(rs)-1 {
				warn = true
			}
		}
		if h == 0xffff || (n+0x10000)&0xffff0000 > end || (n+0x10000)&0xffff0000 == 0 {
			break
		}
	}
	return warn
}

// finish compiles the block into interval tables.
func (b *builder) finish() {
	g := b.g
	null := func() int32 { return b.value("") }
	if g.Ranges {
		dflt := b.dflt
		if dflt < 0 {
			dflt = null()
		}
		var ivs []interval
		for h, rs := range b.chunks {
			for _, r := range rs {
				ivs = append(ivs, interval{u128{0, uint64(h<<16 | r.start)}, u128{0, uint64(h<<16 | r.end)}, r.value})
			}
		}
		g.v4 = toTable4(flatten(ivs, dflt, u128{0, 0xffffffff}))
		return
	}
	// nginx gives networks without a value the empty one, unless a default was set.
	zero4 := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if _, ok := b.nets4[zero4]; !ok {
		b.nets4[zero4] = null()
	}
	zero6 := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	if _, ok := b.nets6[zero6]; !ok {
		b.nets6[zero6] = null()
	}
	g.v4 = toTable4(flatten(prefixIntervals(b.nets4), b.nets4[zero4], u128{0, 0xffffffff}))
	full := flatten(prefixIntervals(b.nets6), b.nets6[zero6], u128{^uint64(0), ^uint64(0)})
	g.v6 = table6{}
	for _, iv := range full {
		g.v6.starts = append(g.v6.starts, iv.first)
		g.v6.vals = append(g.v6.vals, iv.value)
	}
}

// interval is a block of addresses with one value.
type interval struct {
	first, last u128
	value       int32
}

// prefixIntervals turns networks into intervals, the outer ones first where
// several start at the same address.
func prefixIntervals(nets map[netip.Prefix]int32) []interval {
	var ivs []interval
	for p, v := range nets {
		first := u128Of(p.Masked().Addr().As16())
		bits := p.Bits()
		if p.Addr().Is4() {
			bits += 96
		}
		last := first
		if bits < 64 {
			last.hi |= ^uint64(0) >> bits
			last.lo = ^uint64(0)
		} else if bits < 128 {
			last.lo |= ^uint64(0) >> (bits - 64)
		}
		if p.Addr().Is4() {
			// IPv4 addresses are numbers below 2^32 in the tables.
			first, last = u128{0, first.lo & 0xffffffff}, u128{0, last.lo & 0xffffffff}
		}
		ivs = append(ivs, interval{first, last, v})
	}
	return ivs
}

// flatten makes nested or disjoint intervals into a partition of [0, max], the
// innermost interval deciding each address and dflt the rest. Intervals that start
// at the same address must not be nested the other way (networks, ranges).
func flatten(ivs []interval, dflt int32, max u128) []interval {
	slices.SortFunc(ivs, func(a, b interval) int {
		switch {
		case a.first.less(b.first):
			return -1
		case b.first.less(a.first):
			return 1
		case b.last.less(a.last): // the larger one first
			return -1
		case a.last.less(b.last):
			return 1
		}
		return 0
	})
	var out []interval
	emit := func(first u128, v int32) {
		if n := len(out); n > 0 && out[n-1].first == first {
			out[n-1].value = v
		} else {
			out = append(out, interval{first: first, value: v})
		}
	}
	type open struct {
		last  u128
		value int32
	}
	stack := []open{{max, dflt}}
	emit(u128{}, dflt)
	for _, iv := range ivs {
		// Close the intervals that end before this one starts.
		for len(stack) > 1 && stack[len(stack)-1].last.less(iv.first) {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.last != max {
				emit(top.last.next(), stack[len(stack)-1].value)
			}
		}
		emit(iv.first, iv.value)
		stack = append(stack, open{iv.last, iv.value})
	}
	for len(stack) > 1 {
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if top.last != max {
			emit(top.last.next(), stack[len(stack)-1].value)
		}
	}
	// Drop boundaries that do not change the value.
	merged := out[:1]
	for _, iv := range out[1:] {
		if iv.value != merged[len(merged)-1].value {
			merged = append(merged, iv)
		}
	}
	return merged
}

func toTable4(ivs []interval) table4 {
	var t table4
	for _, iv := range ivs {
		t.starts = append(t.starts, uint32(iv.first.lo))
		t.vals = append(t.vals, iv.value)
	}
	return t
}
