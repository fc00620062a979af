package http1

// MaxHeaderFields is the capacity of the field table embedded in a parsed head.
const MaxHeaderFields = 100

// Limits bound a head the way nginx's large_client_header_buffers does
// (default "4 8k"). A zero field takes its DefaultLimits value.
type Limits struct {
	// MaxLineSize bounds one line, CRLF included. A longer request line is
	// answered 414, a longer field line 400 "Request Header Or Cookie Too Large".
	MaxLineSize int
	// MaxHeadSize bounds the whole head, start line and fields (400).
	MaxHeadSize int
	// MaxHeaders bounds the number of field lines; at most MaxHeaderFields.
	MaxHeaders int
}

// DefaultLimits mirror nginx's large_client_header_buffers 4 8k.
var DefaultLimits = Limits{MaxLineSize: 8 << 10, MaxHeadSize: 32 << 10, MaxHeaders: MaxHeaderFields}

// normalized fills zero fields from DefaultLimits and keeps the fields
// consistent: a head is never smaller than a line.
func (l Limits) normalized() Limits {
	if l.MaxLineSize <= 0 {
		l.MaxLineSize = DefaultLimits.MaxLineSize
	}
	if l.MaxHeadSize <= 0 {
		l.MaxHeadSize = DefaultLimits.MaxHeadSize
	}
	if l.MaxHeadSize < l.MaxLineSize {
		l.MaxHeadSize = l.MaxLineSize
	}
	if l.MaxHeaders <= 0 || l.MaxHeaders > MaxHeaderFields {
		l.MaxHeaders = MaxHeaderFields
	}
	return l
}
