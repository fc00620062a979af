// Package varmap is nginx's map block: a variable whose value is chosen by matching
// another value (a string with variables) against exact keys, host name wildcards
// and regular expressions, in nginx's order.
//
// Each map defines its variable in the configuration's variables (httpcore's
// Declared): it is computed when a template first uses it in a request and kept
// for the rest of the request, unless the map is volatile. A regex key's captures
// ($1 ..., named groups) are the request's, as nginx's.
package varmap

import (
	"fmt"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/pcre"
)

// Module declares map (conf declares map_hash_*_size).
var Module = &conf.Module{
	Name: "map",
	Directives: []conf.Directive{
		{Name: "map", Contexts: conf.HTTPCtx, Args: conf.Args2, Block: true, Multi: true, Set: setMap,
			Syntax: "map string $variable { ... }",
			Doc:    "Defines $variable, whose value depends on the string (with variables): exact keys (case-insensitive), with hostnames also *.example.com, .example.com and www.example.*, then ~regex and ~*regex in order; default when nothing matches."},
	},
	NewMain: func() any { return &Conf{} },
}

// Conf holds the maps of a configuration, in the order written.
type Conf struct {
	Maps []*Map
}

func setMap(c *conf.Cursor, s *conf.Stmt) error {
	m, err := Parse(c, s)
	if err != nil {
		return err
	}
	if err := m.define(c); err != nil {
		return err
	}
	mc := c.MainConf().(*Conf)
	mc.Maps = append(mc.Maps, m)
	return nil
}

// define compiles the map's string and values and defines its variable.
func (m *Map) define(c *conf.Cursor) error {
	vars, err := httpcore.ConfigVariables(c)
	if err != nil {
		return err
	}
	src, err := httpcore.CompileTemplate(c, m.Source)
	if err != nil {
		return &conf.Error{Pos: m.Pos, Msg: err.Error()}
	}
	values := make([]*httpcore.Template, len(m.Values))
	for i, v := range m.Values {
		if values[i], err = httpcore.CompileTemplate(c, v.Text); err != nil {
			return &conf.Error{Pos: v.Pos, Msg: err.Error()}
		}
	}
	for _, r := range m.regexes {
		if err := vars.AddRegex(r.re); err != nil {
			return &conf.Error{Pos: m.Pos, Msg: err.Error()}
		}
	}
	get := func(dst []byte, r *httpcore.Request) []byte {
		// The key, then room to lower-case it, in dst past what it holds; the
		// value replaces both.
		start := len(dst)
		dst = src.Append(dst, r)
		key := dst[start:]
		v, _ := m.Lookup(key, dst[len(dst):], r)
		return values[v].Append(dst[:start], r)
	}
	if _, err := vars.Define(m.Var, get, m.Volatile); err != nil {
		return &conf.Error{Pos: m.Pos, Msg: err.Error()}
	}
	return nil
}

// Value is one of a map's values as written: a string that may hold variables
// ("$1", "$name" of a regex key's group, any other variable), which the core
// compiles. Lookups return indexes into Map.Values.
type Value struct {
	Text string
	Pos  conf.Pos
}

// Map is one map block.
type Map struct {
	Source    string   // the string matched, as written: a template the core compiles
	Var       string   // the variable defined, without "$"
	Pos       conf.Pos // where the map starts
	Hostnames bool     // host name wildcards; a final "." of the string is ignored
	Volatile  bool     // the value is not cached for the request
	Values    []Value  // every distinct value
	Default   int      // index of the default value, an empty one if none was given

	exact   map[string]int32 // lower-case keys
	dotKeys map[string]bool  // names of ".example.com" keys, which conflict with exact ones
	head    *wildcard        // *.example.com and .example.com, labels from the right
	tail    *wildcard        // www.example.*, labels from the left
	regexes []regexKey       // in the order written
	valueOf map[string]int32 // Values by text
}

type regexKey struct {
	re    *pcre.Regexp
	value int32
}

// wildcard is a level of a wildcard trie: one label per edge.
type wildcard struct {
	next  map[string]*wildcard
	value int32 // -1: no key ends here
	dot   bool  // ".example.com": the name itself matches too, not only below it
}

func newWildcard() *wildcard { return &wildcard{value: -1} }

// Parse reads "map string $variable { ... }" from the directive s, with c at its
// block, as nginx's ngx_http_map_block does.
func Parse(c *conf.Cursor, s *conf.Stmt) (*Map, error) {
	if len(s.Args) != 2 {
		return nil, s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	name := s.Args[1].Value
	if !strings.HasPrefix(name, "$") || name == "$" {
		return nil, &conf.Error{Pos: s.Args[1].Pos, Msg: fmt.Sprintf("invalid variable name %q", name)}
	}
	m := &Map{Source: s.Args[0].Value, Var: name[1:], Pos: s.Pos, Default: -1,
		exact: map[string]int32{}, valueOf: map[string]int32{}}
	hostnames := false
	err := c.ParseRawBlock(func(c *conf.Cursor, st *conf.Stmt) error {
		if len(st.Args) == 0 && st.Name == "hostnames" {
			hostnames = true
			m.Hostnames = true
			return nil
		}
		if len(st.Args) == 0 && st.Name == "volatile" {
			m.Volatile = true
			return nil
		}
		if len(st.Args) != 1 {
			return st.Errorf("invalid number of the map parameters")
		}
		return m.add(st.Name, st.Args[0], st.Pos, hostnames)
	})
	if err != nil {
		return nil, err
	}
	if m.Default < 0 {
		m.Default = int(m.value("", s.Pos))
	}
	m.valueOf, m.dotKeys = nil, nil
	return m, nil
}

// Build makes a map from lines as they would stand in the block, one key and value
// each (or "hostnames", "volatile"), for tests and for the core's own maps.
func Build(source, variable string, lines [][2]string) (*Map, error) {
	m := &Map{Source: source, Var: variable, Default: -1, exact: map[string]int32{}, valueOf: map[string]int32{}}
	hostnames := false
	for _, l := range lines {
		switch {
		case l[0] == "hostnames" && l[1] == "":
			hostnames, m.Hostnames = true, true
			continue
		case l[0] == "volatile" && l[1] == "":
			m.Volatile = true
			continue
		}
		if err := m.add(l[0], conf.Token{Value: l[1]}, conf.Pos{}, hostnames); err != nil {
			return nil, err
		}
	}
	if m.Default < 0 {
		m.Default = int(m.value("", conf.Pos{}))
	}
	m.valueOf, m.dotKeys = nil, nil
	return m, nil
}

// value interns a value's text.
func (m *Map) value(text string, pos conf.Pos) int32 {
	if v, ok := m.valueOf[text]; ok {
		return v
	}
	v := int32(len(m.Values))
	m.Values = append(m.Values, Value{Text: text, Pos: pos})
	m.valueOf[text] = v
	return v
}

// add is ngx_http_map for one "key value;" line.
func (m *Map) add(key string, val conf.Token, pos conf.Pos, hostnames bool) error {
	v := m.value(val.Value, val.Pos)
	if key == "default" {
		if m.Default >= 0 {
			return fmt.Errorf("duplicate default map parameter")
		}
		m.Default = int(v)
		return nil
	}
	if strings.HasPrefix(key, "~") {
		pattern, caseless := key[1:], false
		if strings.HasPrefix(pattern, "*") {
			pattern, caseless = pattern[1:], true
		}
		re, err := pcre.Compile(pattern, caseless)
		if err != nil {
			return err
		}
		m.regexes = append(m.regexes, regexKey{re: re, value: v})
		return nil
	}
	key = strings.TrimPrefix(key, `\`)
	if !hostnames {
		return m.addExact(key, v)
	}
	return m.addHostname(key, v)
}

func (m *Map) addExact(key string, v int32) error {
	key = strings.ToLower(key)
	if _, dup := m.exact[key]; dup || m.dotKeys[key] {
		return fmt.Errorf("conflicting parameter %q", key)
	}
	m.exact[key] = v
	return nil
}

// addHostname sorts a key of a hostnames map as ngx_hash_add_key does with
// NGX_HASH_WILDCARD_KEY.
func (m *Map) addHostname(key string, v int32) error {
	invalid := fmt.Errorf("invalid hostname or wildcard %q", key)
	if strings.Count(key, "*") > 1 || strings.Contains(key, "..") || strings.IndexByte(key, 0) >= 0 {
		return invalid
	}
	lower := strings.ToLower(key)
	switch {
	case len(key) > 1 && key[0] == '.':
		name := lower[1:]
		if _, dup := m.exact[name]; dup {
			return fmt.Errorf("conflicting parameter %q", key)
		}
		if m.dotKeys == nil {
			m.dotKeys = map[string]bool{}
		}
		m.dotKeys[name] = true
		return m.addHead(name, true, key, v)
	case len(key) > 2 && key[0] == '*' && key[1] == '.':
		return m.addHead(lower[2:], false, key, v)
	case len(key) > 2 && key[len(key)-2] == '.' && key[len(key)-1] == '*':
		return m.addTail(lower[:len(key)-2], key, v)
	case strings.IndexByte(key, '*') >= 0:
		return invalid
	}
	return m.addExact(key, v)
}

// addHead adds "*.name" (dot false) or ".name" (dot true).
func (m *Map) addHead(name string, dot bool, key string, v int32) error {
	if m.head == nil {
		m.head = newWildcard()
	}
	n := m.head
	for rest := name; ; {
		i := strings.LastIndexByte(rest, '.')
		label := rest[i+1:]
		n = n.child(label)
		if i < 0 {
			break
		}
		rest = rest[:i]
	}
	if n.value >= 0 {
		return fmt.Errorf("conflicting parameter %q", key)
	}
	n.value, n.dot = v, dot
	return nil
}

// addTail adds "name.*".
func (m *Map) addTail(name string, key string, v int32) error {
	if m.tail == nil {
		m.tail = newWildcard()
	}
	n := m.tail
	for _, label := range strings.Split(name, ".") {
		n = n.child(label)
	}
	if n.value >= 0 {
		return fmt.Errorf("conflicting parameter %q", key)
	}
	n.value = v
	return nil
}

func (w *wildcard) child(label string) *wildcard {
	if w.next == nil {
		w.next = map[string]*wildcard{}
	}
	c := w.next[label]
	if c == nil {
		c = newWildcard()
		w.next[label] = c
	}
	return c
}

// Regexes returns the regex keys in order; the core makes variables of their named
// groups, as nginx does.
func (m *Map) Regexes() []*pcre.Regexp {
	res := make([]*pcre.Regexp, len(m.regexes))
	for i, r := range m.regexes {
		res[i] = r.re
	}
	return res
}

// MaxCaptures is the longest captures buffer a Find on this map can fill.
func (m *Map) MaxCaptures() int {
	n := 0
	for _, r := range m.regexes {
		n = max(n, r.re.CapLen())
	}
	return n
}

// Match is the result of Find.
type Match struct {
	Value int          // index in Map.Values
	Regex *pcre.Regexp // the regex key that matched, nil for any other key
	NCaps int          // how many ints of caps the regex set (offsets into the key)
	Found bool         // false: Value is the default
}

// Find selects the value for key, the source's value: exact keys, then the longest
// leading wildcard, the longest trailing wildcard, then regexes in order, else the
// default. Keys match without regard to ASCII case; regexes see key as it is.
// scratch is room to lower-case key in when it has upper-case letters; caps receives
// a regex key's captures (see pcre.Regexp.Exec), offsets into key, which the caller
// keeps as nginx keeps r->captures_data; caps may be nil. Find allocates nothing.
// Matcher runs a regex key for a request: the HTTP core's request, which keeps the
// captures of a match.
type Matcher interface {
	Regex(re *pcre.Regexp, subject []byte) bool
}

// Lookup is Find for a request: regex keys run through mt, which keeps their
// captures. It returns the value's index and whether a key matched.
func (m *Map) Lookup(key, scratch []byte, mt Matcher) (int, bool) {
	if m.Hostnames && len(key) > 0 && key[len(key)-1] == '.' {
		key = key[:len(key)-1]
	}
	if v := m.findKey(key, scratch); v >= 0 {
		return int(v), true
	}
	if len(key) > 0 {
		for _, r := range m.regexes {
			if mt.Regex(r.re, key) {
				return int(r.value), true
			}
		}
	}
	return m.Default, false
}

func (m *Map) Find(key, scratch []byte, caps []int) Match {
	if m.Hostnames && len(key) > 0 && key[len(key)-1] == '.' {
		key = key[:len(key)-1]
	}
	if v := m.findKey(key, scratch); v >= 0 {
		return Match{Value: int(v), Found: true}
	}
	if len(key) > 0 {
		for _, r := range m.regexes {
			if n, ok := r.re.Exec(key, caps); ok {
				return Match{Value: int(r.value), Regex: r.re, NCaps: n, Found: true}
			}
		}
	}
	return Match{Value: m.Default}
}

// findKey looks key up in the exact and wildcard keys: the value's index, or -1.
func (m *Map) findKey(key, scratch []byte) int32 {
	if len(m.exact) == 0 && m.head == nil && m.tail == nil {
		return -1 // regex keys only (a User-Agent map): no key to lower-case
	}
	low := key
	for i := 0; i < len(key); i++ {
		if c := key[i]; 'A' <= c && c <= 'Z' {
			low = append(scratch[:0], key...)
			for j := i; j < len(low); j++ {
				if c := low[j]; 'A' <= c && c <= 'Z' {
					low[j] = c + 'a' - 'A'
				}
			}
			break
		}
	}
	if v, ok := m.exact[string(low)]; ok {
		return v
	}
	if len(low) > 0 {
		if v := m.head.findHead(low); v >= 0 {
			return v
		}
		if v := m.tail.findTail(low); v >= 0 {
			return v
		}
	}
	return -1
}

// findHead is ngx_hash_find_wc_head: the deepest key along name's labels from the
// right, where a key that ends at the last label matches only in its ".name" form.
func (w *wildcard) findHead(name []byte) int32 {
	if w == nil {
		return -1
	}
	best := int32(-1)
	n := w
	for rest := name; ; {
		i := lastDot(rest)
		c := n.next[string(rest[i+1:])]
		if c == nil {
			return best
		}
		if i < 0 { // the name itself
			if c.value >= 0 && c.dot {
				return c.value
			}
			return best
		}
		if c.value >= 0 {
			best = c.value
		}
		n, rest = c, rest[:i]
	}
}

// findTail is ngx_hash_find_wc_tail: the deepest key along name's labels from the
// left that leaves at least one label after it.
func (w *wildcard) findTail(name []byte) int32 {
	if w == nil {
		return -1
	}
	best := int32(-1)
	n := w
	for rest := name; ; {
		i := indexDot(rest)
		if i < 0 {
			return best
		}
		c := n.next[string(rest[:i])]
		if c == nil {
			return best
		}
		if c.value >= 0 {
			best = c.value
		}
		n, rest = c, rest[i+1:]
	}
}

func lastDot(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '.' {
			return i
		}
	}
	return -1
}

func indexDot(b []byte) int {
	for i, c := range b {
		if c == '.' {
			return i
		}
	}
	return -1
}
