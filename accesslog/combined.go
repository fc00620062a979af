package accesslog

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// The literal text of the combined format, each in a little-endian word (putLit).
var (
	litDash  = litWord(" - ")
	litOpen  = litWord(" [")
	litClose = litWord("] \"")
	litQSp   = litWord("\" ")
	litSpQ   = litWord(" \"")
	litQSpQ  = litWord("\" \"")
)

func litWord(s string) uint64 {
	var w [8]byte
	copy(w[:], s)
	return binary.LittleEndian.Uint64(w[:])
}

// putLit appends the first n bytes of w, in one store (the buffer grows by
// eight where they are not left, as append grows it).
func putLit(dst []byte, w uint64, n int) []byte {
	if cap(dst)-len(dst) < 8 {
		dst = slices.Grow(dst, 8)
	}
	l := len(dst)
	binary.LittleEndian.PutUint64(dst[l:l+8], w)
	return dst[:l+n]
}

// appendCombined is appendLine for nginx's combined format (to its
// $http_user_agent), the default of access_log and the most used, and the start
// of others (nginx's main): each value read from the request directly, the
// three fields it names found in one pass over the head. It writes what the ops
// would, byte for byte (TestCombinedAsOps); the ops' generic dispatch, eight
// times a line, was half the line's cost.
func (ls *loopState) appendCombined(f *Format, dst []byte, r *httpcore.Request) []byte {
	start := len(dst)
	dst, plain := ls.appendRemoteAddr(dst, r)
	if !plain {
		dst = ls.value(dst, start)
	}

	// $remote_user, $http_referer, $http_user_agent: the first field of each
	// name, as the core's variables take it (Headers.Get).
	h := &r.Head().Headers
	auth, ref, ua := -1, -1, -1
	for i := range h.Len() {
		switch name := h.Name(i); len(name) {
		case len("referer"):
			if ref < 0 && http1.EqualFold(name, "referer") {
				ref = i
			}
		case len("user-agent"):
			if ua < 0 && http1.EqualFold(name, "user-agent") {
				ua = i
			}
		case len("authorization"):
			if auth < 0 && http1.EqualFold(name, "authorization") {
				auth = i
			}
		}
	}

	dst = putLit(dst, litDash, 3)
	if auth >= 0 {
		start = len(dst)
		dst = ls.value(httpcore.AppendBasicUser(dst, h.Value(auth)), start)
	} else {
		dst = append(dst, '-')
	}

	dst = putLit(dst, litOpen, 2)
	dst = f.timeLocal(dst, r, "") // the core's text of the second, formatted once a second

	dst = putLit(dst, litClose, 3)
	line := r.RawHead()
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
		for len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
	}
	start = len(dst)
	dst = ls.value(append(dst, line...), start)

	// `" `, the status as nginx's "%03ui", ` `: one store.
	st := uint64(r.Status())
	dst = putLit(dst, litQSp|('0'+st/100%10)<<16|('0'+st/10%10)<<24|('0'+st%10)<<32|' '<<40, 6)
	dst = appendUint(dst, uint64(r.BodyBytesSent()))

	// A field that is there and empty is found: nothing between the quotes.
	dst = putLit(dst, litSpQ, 2)
	if ref >= 0 {
		dst = ls.escaped(dst, h.Value(ref))
	} else {
		dst = append(dst, '-')
	}
	dst = putLit(dst, litQSpQ, 3)
	if ua >= 0 {
		return ls.escaped(dst, h.Value(ua))
	}
	return append(dst, '-')
}

// escaped appends v as the default escaping writes a found value.
func (ls *loopState) escaped(dst, v []byte) []byte {
	start := len(dst)
	return ls.escapeTail(append(dst, v...), start)
}

// value escapes the value appended to dst from start as the default escaping
// does: "-" for an empty one (not found).
func (ls *loopState) value(dst []byte, start int) []byte {
	if len(dst) == start {
		return append(dst, '-')
	}
	return ls.escapeTail(dst, start)
}

// escapeTail escapes what dst holds from start on, where it needs it.
func (ls *loopState) escapeTail(dst []byte, start int) []byte {
	if i := indexEscaped(dst[start:]); i >= 0 {
		return ls.escapeFrom(dst, start+i)
	}
	return dst
}

// escapeFrom escapes dst from i on.
func (ls *loopState) escapeFrom(dst []byte, i int) []byte {
	ls.val = append(ls.val[:0], dst[i:]...)
	return appendEscaped(dst[:i], ls.val)
}

// appendUint is strconv.AppendUint's base 10 without its calls: a body size has a
// few digits.
func appendUint(dst []byte, n uint64) []byte {
	var b [20]byte
	i := len(b) - 1
	for n >= 10 {
		b[i] = byte('0' + n%10)
		n /= 10
		i--
	}
	b[i] = byte('0' + n)
	return append(dst, b[i:]...)
}
