package conf

// Inherited is one field (or group of fields) of a module's http-level config that a
// level takes from its parent when it did not set it itself, as nginx's
// ngx_conf_merge_*_value: Bit is the field's bit in the level's set mask.
type Inherited[T any] struct {
	Bit  uint64
	Take func(c, p *T)
}

// Merged is the bit of a level's set mask that marks its config as complete.
const Merged uint64 = 1 << 63

// Inherit completes child from parent, nginx's merge. The http level's parent is
// nginx's defaults, so when parent is the http level and not complete yet it takes
// what it did not set from defaults first. set returns a config's set mask.
func Inherit[T any](child, parent *T, set func(*T) *uint64, defaults func() T, fields []Inherited[T]) {
	if *set(parent)&Merged == 0 {
		d := defaults()
		take(parent, &d, set, fields)
		*set(parent) |= Merged
	}
	take(child, parent, set, fields)
	*set(child) |= Merged
}

func take[T any](c, p *T, set func(*T) *uint64, fields []Inherited[T]) {
	TakeUnset(c, p, *set(c), fields)
}

// TakeUnset is Inherit's step without defaults: c takes from p each of fields
// whose bit is not in mask, c's set mask.
func TakeUnset[T any](c, p *T, mask uint64, fields []Inherited[T]) {
	for _, f := range fields {
		if mask&f.Bit == 0 {
			f.Take(c, p)
		}
	}
}

// SetValue is a directive's Set for a value in one argument: parse reads it into
// field of the calling module's config at this http level (an L), and bit is marked
// in the set mask mask returns, for Inherit. A value parse refuses is nginx's
// "invalid value".
func SetValue[L, T any](parse func(string) (T, error), field func(*L) *T, mask func(*L) *uint64, bit uint64) func(*Cursor, *Stmt) error {
	return SetParsed(func(s *Stmt) (T, error) {
		v, err := parse(s.Args[0].Value)
		if err != nil {
			return v, s.InvalidValue(s.Args[0], "")
		}
		return v, nil
	}, field, mask, bit)
}

// SetParsed is SetValue for a parse that reads the whole statement and words its
// own errors.
func SetParsed[L, T any](parse func(*Stmt) (T, error), field func(*L) *T, mask func(*L) *uint64, bit uint64) func(*Cursor, *Stmt) error {
	return func(c *Cursor, s *Stmt) error {
		v, err := parse(s)
		if err != nil {
			return err
		}
		lc := c.HTTPConf().(*L)
		*field(lc) = v
		*mask(lc) |= bit
		return nil
	}
}
