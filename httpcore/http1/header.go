package http1

import "iter"

// field locates one field line in the head buffer as [start,end) offsets.
type field struct {
	nameStart, nameEnd, valueStart, valueEnd uint32
}

// Headers is the field section of a parsed head: up to MaxHeaderFields
// name/value offsets into the caller's buffer. Values have their surrounding
// whitespace trimmed. It is embedded in Request and Response.
type Headers struct {
	buf    []byte
	n      int
	fields [MaxHeaderFields]field
}

// Len returns the number of field lines.
func (h *Headers) Len() int { return h.n }

// Name returns the i-th field name as received (case preserved).
func (h *Headers) Name(i int) []byte {
	f := &h.fields[i]
	return h.buf[f.nameStart:f.nameEnd:f.nameEnd]
}

// Value returns the i-th field value without leading or trailing whitespace.
func (h *Headers) Value(i int) []byte {
	f := &h.fields[i]
	return h.buf[f.valueStart:f.valueEnd:f.valueEnd]
}

// Get returns the value of the first field called name (ASCII
// case-insensitive) and whether there is one.
func (h *Headers) Get(name string) ([]byte, bool) {
	if i := h.Index(name, 0); i >= 0 {
		return h.Value(i), true
	}
	return nil, false
}

// Index returns the index of the first field called name at or after from,
// or -1. Loop with Index(name, i+1) to visit repeated fields.
func (h *Headers) Index(name string, from int) int {
	for i := from; i < h.n; i++ {
		if EqualFold(h.Name(i), name) {
			return i
		}
	}
	return -1
}

// All yields every field line in order as (name, value).
func (h *Headers) All() iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for i := 0; i < h.n; i++ {
			if !yield(h.Name(i), h.Value(i)) {
				return
			}
		}
	}
}

// NameRules say which request fields a parser drops as it reads them, nginx's
// ignore_invalid_headers and underscores_in_headers. The zero value keeps every field.
type NameRules struct {
	// IgnoreInvalid drops a field whose name holds anything but letters, digits and
	// "-" (and "_" with AllowUnderscores). Names with other token characters are
	// valid HTTP but invalid to nginx; names with non-token bytes are refused (400)
	// whatever the rules.
	IgnoreInvalid bool
	// AllowUnderscores keeps names with "_": a CGI or WSGI upstream turns both
	// X-Forwarded-For and X_Forwarded_For into HTTP_X_FORWARDED_FOR, so a client's
	// X_Forwarded_For would pass for the proxy's X-Forwarded-For.
	AllowUnderscores bool
}

// Drops reports whether the rules drop a field called name.
func (n NameRules) Drops(name []byte) bool {
	if !n.IgnoreInvalid {
		return false
	}
	for _, c := range name {
		if byteClass[c]&classNginxName == 0 && (c != '_' || !n.AllowUnderscores) {
			return true
		}
	}
	return false
}

// NameRulesByHost gives the NameRules of the server a host selects: nginx reads the
// fields after Host (all of them for an absolute-form target) with the settings of
// that server, those before it with the default server's.
type NameRulesByHost interface {
	NameRulesFor(host []byte) NameRules
}

// IsHopByHop reports whether the i-th field applies to this connection only
// and must not be forwarded (RFC 9110 §7.6.1): a standard hop-by-hop name or a
// name listed in a Connection field. A reverse proxy forwarding a client's
// request should use IsHopByHopName alone, as nginx does: honouring the list
// lets a client strip end-to-end fields a proxy adds or checks.
func (h *Headers) IsHopByHop(i int) bool {
	name := h.Name(i)
	return IsHopByHopName(name) || h.ListedInConnection(name)
}

// ListedInConnection reports whether name is one of the Connection options.
func (h *Headers) ListedInConnection(name []byte) bool {
	for i := h.Index("Connection", 0); i >= 0; i = h.Index("Connection", i+1) {
		for l := (listIter{rest: h.Value(i)}); ; {
			opt, ok := l.next()
			if !ok {
				break
			}
			if equalFoldBytes(opt, name) {
				return true
			}
		}
	}
	return false
}

// IsHopByHopName reports whether name is one of the fields that always
// describe a single connection (RFC 9110 §7.6.1) plus the non-standard
// Proxy-Connection.
func IsHopByHopName(name []byte) bool {
	switch len(name) {
	case 2:
		return EqualFold(name, "TE")
	case 7:
		return EqualFold(name, "Upgrade")
	case 10:
		return EqualFold(name, "Connection") || EqualFold(name, "Keep-Alive")
	case 16:
		return EqualFold(name, "Proxy-Connection")
	case 17:
		return EqualFold(name, "Transfer-Encoding")
	}
	return false
}

// listIter walks a comma-separated field value (RFC 9110 §5.6.1), yielding
// elements with surrounding whitespace removed, empty elements included.
type listIter struct {
	rest []byte
	done bool
}

func (l *listIter) next() ([]byte, bool) {
	if l.done {
		return nil, false
	}
	for i, c := range l.rest {
		if c == ',' {
			elem := l.rest[:i]
			l.rest = l.rest[i+1:]
			return trimOWS(elem), true
		}
	}
	l.done = true
	return trimOWS(l.rest), true
}
