package static

import (
	"log/slog"
	"strconv"
	"syscall"
)

// Request is what the static handlers read from a request. The core fills it; its
// slices alias the core's buffers and are only read during the call.
type Request struct {
	Method []byte // "GET", "HEAD", ...
	URI    []byte // $uri: decoded and normalised, starting with "/"
	Args   []byte // the query string, without "?"

	Internal      bool // reached by an internal redirect (index, try_files, error_page)
	Rewritten     bool // rewrite changed the URI in this location: an alias cannot map it (500, as nginx)
	AddURIToAlias bool // set from try_files' Response in a regex location with alias

	// Request header values; nil when the header is absent (a present, empty one is
	// an empty non-nil slice). nginx refuses a duplicate of the If-* headers with 400
	// and takes the first Range header.
	IfModifiedSince   []byte
	IfUnmodifiedSince []byte
	IfMatch           []byte
	IfNoneMatch       []byte
	IfRange           []byte
	Range             []byte

	Vars Vars  // expands templates (root with variables, index, try_files); may be nil
	Now  int64 // seconds since 1970, the loop's clock

	// Encodes, when set, reports whether a filter after the module will encode the
	// response on the fly (compress): the range filter then leaves it whole, as
	// nginx's gzip filter clears allow_ranges before its range filter runs. Called
	// only for a 200 with a Range header.
	Encodes func(*Response) bool

	// Redirect makes a Location that starts with "/" absolute, as nginx's header
	// filter does when absolute_redirect is on; nil leaves it as it is.
	Redirect *RedirectBase
}

// RedirectBase is what an absolute Location is built from: the core chooses Host as
// nginx does (the server's first name with server_name_in_redirect, else the Host
// header's host, else the local address) and Port (the local port, 0 with
// port_in_redirect off).
type RedirectBase struct {
	HTTPS bool
	Host  []byte
	Port  int
}

// Action says what the core does with a Response.
type Action int

const (
	// Send: answer with Status, the headers and Body.
	Send Action = iota
	// Redirect: an internal redirect to URI with Args (index, try_files' last URI).
	Redirect
	// Named: go to the named location URI ("@name") with the request as it is.
	Named
	// Continue: try_files found URI; run the content phase with it as $uri, in the
	// same location (nginx changes r->uri without a new location lookup).
	Continue
	// Declined: the location has no try_files.
	Declined
)

// Response is a handler's answer: nginx's headers_out and output chain, or where to
// go instead. The core owns one per request (or per loop) and reuses it: its slices
// point into a buffer it keeps, so a steady state allocates nothing.
type Response struct {
	Action Action
	Status int
	// ErrorPage: the body is the core's special response for Status (its error
	// page, or an error_page redirect): the core sets Content-Type text/html and
	// Content-Length. The headers below that are set are sent with it.
	ErrorPage bool

	ContentType   []byte // without parameters; nil: no Content-Type
	Charset       []byte // the charset parameter, from the charset filter
	ContentLength int64  // -1: none
	LastModified  int64  // seconds since 1970; -1: none
	ETag          []byte
	Location      []byte
	ContentRange  []byte
	AcceptRanges  bool
	Expires       []byte
	CacheControl  []byte
	// ContentEncoding is a precompressed file's coding (gzip_static's "gzip").
	ContentEncoding []byte

	URI, Args     []byte // for Redirect, Named and Continue
	AddURIToAlias bool   // Continue in a regex location with alias

	// File is the file the Body's ranges read from (Fd < 0: none). The core Closes
	// it (or Resets the Response) when the response is sent or dropped.
	File File
	// Body is what to send after the head, in order (the core skips it for HEAD).
	Body []Part

	// Log is what nginx would write to the error log for this request.
	Log LogEntry

	allowRanges bool
	buf         []byte
}

// Part is a piece of the body: literal bytes, or Len bytes of File from Off.
type Part struct {
	Data     []byte
	Off, Len int64
}

// IsFile reports a part read from the file.
func (p Part) IsFile() bool { return p.Data == nil }

// LogEntry is an error-log line nginx writes: Op "Path" failed (Errno: text), or a
// message about Path.
type LogEntry struct {
	Level slog.Level
	Kind  LogKind
	Op    string // the failed call, for LogFailed
	Path  []byte
	Errno syscall.Errno
}

// LogKind says which of nginx's messages a LogEntry is.
type LogKind int

const (
	LogNone           LogKind = iota
	LogFailed                 // open() "/path" failed (2: No such file or directory)
	LogIndexDenied            // directory index of "/path/" is forbidden
	LogNotRegular             // "/path" is not a regular file
	LogForbidden              // "/path" is forbidden (13: Permission denied)
	LogNotFound               // "/path" is not found (2: No such file or directory)
	LogNotDir                 // "/path" is not a directory
	LogAliasRewritten         // "alias" cannot be used in location "..." where URI was rewritten
	LogOutsideRoot            // "/path" leaves the root
	LogNoCharsetMap           // no "charset_map" between the charsets
	LogBadCallback            // client sent invalid callback name
)

// AppendText appends the entry's message as nginx words it.
func (e *LogEntry) AppendText(dst []byte) []byte {
	q := func(dst []byte) []byte { return append(append(append(dst, '"'), e.Path...), '"') }
	errno := func(dst []byte) []byte {
		if e.Errno == 0 {
			return dst
		}
		dst = append(dst, " ("...)
		dst = strconv.AppendInt(dst, int64(e.Errno), 10)
		dst = append(dst, ": "...)
		text := e.Errno.Error()
		if c := text[0]; c >= 'a' && c <= 'z' {
			// strerror's capital, as in nginx's log ("No such file or directory").
			dst, text = append(dst, c-'a'+'A'), text[1:]
		}
		return append(append(dst, text...), ')')
	}
	switch e.Kind {
	case LogFailed:
		dst = append(append(dst, e.Op...), ' ')
		return errno(append(q(dst), " failed"...))
	case LogIndexDenied:
		return append(q(append(dst, "directory index of "...)), " is forbidden"...)
	case LogNotRegular:
		return append(q(dst), " is not a regular file"...)
	case LogForbidden:
		return errno(append(q(dst), " is forbidden"...))
	case LogNotFound:
		return errno(append(q(dst), " is not found"...))
	case LogNotDir:
		return append(q(dst), " is not a directory"...)
	case LogAliasRewritten:
		return append(dst, `"alias" cannot be used in location where URI was rewritten`...)
	case LogOutsideRoot:
		return append(q(dst), ` leaves the root ("..")`...)
	case LogBadCallback:
		return append(dst, "client sent invalid callback name"...)
	}
	return dst
}

// Reset empties the response for the next request, keeping its buffers; it Closes
// the File.
func (r *Response) Reset() {
	r.File.Close()
	buf, body := r.buf[:0], r.Body[:0]
	// Cleared in place: a composite literal is built on the stack and copied,
	// twice the stores for a struct of half a KiB.
	*r = Response{}
	r.buf, r.Body, r.ContentLength, r.LastModified, r.File.Fd = buf, body, -1, -1, -1
}

// fail makes the response nginx's special response for status.
func (r *Response) fail(status int) {
	r.Action, r.Status, r.ErrorPage = Send, status, true
}

func (r *Response) logFailed(level slog.Level, f *FileInfo, path []byte) {
	r.Log = LogEntry{Level: level, Kind: LogFailed, Op: f.Op, Path: path, Errno: f.Errno}
}

// appendBuf copies a and b, one after the other, into the response's buffer and
// returns the copy.
func (r *Response) appendBuf(a []byte, b ...byte) []byte {
	start := len(r.buf)
	r.buf = append(append(r.buf, a...), b...)
	return r.buf[start:len(r.buf):len(r.buf)]
}

// AppendContentType appends the Content-Type value: the type and its charset.
func (r *Response) AppendContentType(dst []byte) []byte {
	dst = append(dst, r.ContentType...)
	if len(r.Charset) > 0 {
		dst = append(append(dst, "; charset="...), r.Charset...)
	}
	return dst
}
