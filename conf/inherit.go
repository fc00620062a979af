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
	mask := *set(c)
	for _, f := range fields {
		if mask&f.Bit == 0 {
			f.Take(c, p)
		}
	}
}
