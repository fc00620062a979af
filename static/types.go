package static

import (
	"github.com/numaproxy/numaproxy/conf"
)

// Types maps file name extensions to MIME types: a types { } block.
type Types struct {
	byExt map[string][]byte // lower-case extension -> type as written
}

// defaultTypes is nginx's table for a configuration with no types block.
func defaultTypes() *Types {
	return &Types{byExt: map[string][]byte{
		"html": []byte("text/html"),
		"gif":  []byte("image/gif"),
		"jpg":  []byte("image/jpeg"),
	}}
}

// Lookup returns the type for an extension, matched without regard to case, or nil.
// scratch is room to lower-case ext in; Lookup allocates nothing.
func (t *Types) Lookup(ext, scratch []byte) []byte {
	for i := 0; i < len(ext); i++ {
		if c := ext[i]; c >= 'A' && c <= 'Z' {
			scratch = append(scratch[:0], ext...)
			for j := i; j < len(scratch); j++ {
				if c := scratch[j]; c >= 'A' && c <= 'Z' {
					scratch[j] = c + 'a' - 'A'
				}
			}
			return t.byExt[string(scratch)]
		}
	}
	return t.byExt[string(ext)]
}

// Len is the number of extensions known.
func (t *Types) Len() int { return len(t.byExt) }

// setTypes parses "types { type ext ...; ... }". Several blocks at one level add to
// the same table; a repeated extension takes the later type, with nginx's warning.
func setTypes(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitTypes == 0 || lc.Types == nil {
		lc.Types = &Types{byExt: map[string][]byte{}}
		lc.set |= bitTypes
	}
	t := lc.Types
	return c.ParseRawBlock(func(c *conf.Cursor, s *conf.Stmt) error {
		typ := []byte(s.Name)
		for _, a := range s.Args {
			ext := lower(a.Value)
			if old, ok := t.byExt[ext]; ok {
				c.Warn(a.Pos, "duplicate extension %q, content type: %q, previous content type: %q", a.Value, s.Name, old)
			}
			t.byExt[ext] = typ
		}
		return nil
	})
}

// TypeSet is a set of MIME types such as charset_types; Any matches every type ("*").
type TypeSet struct {
	Any   bool
	types map[string]struct{} // lower-case
}

var defaultCharsetTypes = []string{"text/html", "text/xml", "text/plain", "text/vnd.wap.wml", "application/javascript", "application/rss+xml"}

func newTypeSet(types ...string) *TypeSet {
	ts := &TypeSet{types: map[string]struct{}{}}
	for _, t := range types {
		ts.types[lower(t)] = struct{}{}
	}
	return ts
}

// Has reports whether the MIME type typ (without parameters) is in the set; scratch
// is room to lower-case it.
func (ts *TypeSet) Has(typ, scratch []byte) bool {
	if ts.Any {
		return true
	}
	scratch = append(scratch[:0], typ...)
	for i, c := range scratch {
		if c >= 'A' && c <= 'Z' {
			scratch[i] = c + 'a' - 'A'
		}
	}
	_, ok := ts.types[string(scratch)]
	return ok
}

// setCharsetTypes is nginx's types slot: the first at a level starts from text/html,
// "*" means every type and ends the list.
func setCharsetTypes(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitCharsetTypes == 0 {
		lc.CharsetTypes = newTypeSet("text/html")
		lc.set |= bitCharsetTypes
	}
	ts := lc.CharsetTypes
	if ts.Any {
		return nil
	}
	for _, a := range s.Args {
		if a.Value == "*" {
			ts.Any, ts.types = true, nil
			return nil
		}
		t := lower(a.Value)
		if _, dup := ts.types[t]; dup {
			c.Warn(a.Pos, "duplicate MIME type %q", a.Value)
		}
		ts.types[t] = struct{}{}
	}
	return nil
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
