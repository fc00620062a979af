package static

import (
	"bytes"
	"log/slog"
	"slices"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
)

// DirEntry is one line of a listing.
type DirEntry struct {
	Name  []byte
	Dir   bool // a folder (a link to one counts)
	File  bool // a regular file (likewise)
	Mtime int64
	Size  int64
}

// ListingOptions are the autoindex settings the HTML format uses.
type ListingOptions struct {
	UTF8      bool  // the response's charset is utf-8: names are cut by characters
	ExactSize bool  // autoindex_exact_size
	Offset    int64 // autoindex_localtime: seconds east of UTC to add; 0 for UTC
}

const nameWidth = 50 // NGX_HTTP_AUTOINDEX_NAME_LEN

var months = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// AppendHTMLListing appends nginx's HTML autoindex page for uri ($uri, decoded) and
// entries (sorted).
func AppendHTMLListing(dst, uri []byte, entries []DirEntry, o ListingOptions) []byte {
	dst = append(dst, "<html>\r\n<head><title>Index of "...)
	dst = appendHTML(dst, uri)
	dst = append(dst, "</title></head>\r\n<body>\r\n<h1>Index of "...)
	dst = appendHTML(dst, uri)
	dst = append(dst, "</h1><hr><pre><a href=\"../\">../</a>\r\n"...)
	for i := range entries {
		dst = appendHTMLEntry(dst, &entries[i], o)
	}
	return append(dst, "</pre><hr></body>\r\n</html>\r\n"...)
}

func appendHTMLEntry(dst []byte, e *DirEntry, o ListingOptions) []byte {
	name := e.Name
	dst = append(dst, `<a href="`...)
	dst = appendEscaped(dst, name, &escapeComponent)
	if e.Dir {
		dst = append(dst, '/')
	}
	dst = append(dst, `">`...)

	length := len(name)
	if o.UTF8 {
		length = utf8Length(name)
	}
	escape := bytes.ContainsAny(name, `<>&"`)
	var last int // where "..&gt;" goes when the name is cut
	switch {
	case length != len(name):
		n := nameWidth + 1
		if length > nameWidth {
			n = nameWidth - 3 + 1
		}
		copied := utf8Prefix(name, n-1)
		if escape {
			dst = appendHTML(dst, name[:copied])
		} else {
			dst = append(dst, name[:copied]...)
		}
		last = len(dst)
	case escape:
		n := length
		if length > nameWidth {
			n = nameWidth - 3
		}
		dst = appendHTML(dst, name[:n])
		last = len(dst)
	default:
		dst = append(dst, name[:min(len(name), nameWidth)]...)
		last = len(dst) - 3
	}
	if length > nameWidth {
		dst = append(dst[:last], "..&gt;</a>"...)
	} else {
		if e.Dir && nameWidth-length > 0 {
			dst = append(dst, '/')
			length++
		}
		dst = append(dst, "</a>"...)
		for i := length; i < nameWidth; i++ {
			dst = append(dst, ' ')
		}
	}
	dst = append(dst, ' ')

	t := time.Unix(e.Mtime+o.Offset, 0).UTC()
	dst = appendPad(dst, int64(t.Day()), 2, '0')
	dst = append(append(append(dst, '-'), months[t.Month()-1]...), '-')
	dst = strconv.AppendInt(dst, int64(t.Year()), 10)
	dst = append(dst, ' ')
	dst = appendPad(dst, int64(t.Hour()), 2, '0')
	dst = append(dst, ':')
	dst = appendPad(dst, int64(t.Minute()), 2, '0')
	dst = append(dst, ' ')

	switch {
	case o.ExactSize && e.Dir:
		dst = append(dst, "                  -"...)
	case o.ExactSize:
		dst = appendPad(dst, e.Size, 19, ' ')
	case e.Dir:
		dst = append(dst, "      -"...)
	default:
		size, scale := e.Size, byte(0)
		switch {
		case size > 1<<30-1:
			size, scale = roundDiv(e.Size, 1<<30), 'G'
		case size > 1<<20-1:
			size, scale = roundDiv(e.Size, 1<<20), 'M'
		case size > 9999:
			size, scale = roundDiv(e.Size, 1<<10), 'K'
		}
		if scale != 0 {
			dst = append(appendPad(dst, size, 6, ' '), scale)
		} else {
			dst = appendPad(append(dst, ' '), size, 6, ' ')
		}
	}
	return append(dst, "\r\n"...)
}

// roundDiv divides rounding halves up, as nginx's listing sizes.
func roundDiv(n, unit int64) int64 {
	q := n / unit
	if n%unit > unit/2-1 {
		q++
	}
	return q
}

func appendPad(dst []byte, n int64, width int, pad byte) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], n, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, pad)
	}
	return append(dst, s...)
}

// utf8Length is nginx's ngx_utf8_length: characters, or bytes if s is not valid
// UTF-8.
func utf8Length(s []byte) int {
	n := 0
	for p := 0; p < len(s); n++ {
		if s[p] < 0x80 {
			p++
			continue
		}
		var u uint32
		u, p = utf8Decode(s, p)
		if u > 0x10ffff {
			return len(s)
		}
	}
	return n
}

// utf8Prefix returns how many bytes of s nginx's ngx_utf8_cpystrn copies for at
// most n characters: it stops at the first invalid sequence.
func utf8Prefix(s []byte, n int) int {
	p := 0
	for ; n > 0 && p < len(s); n-- {
		if s[p] < 0x80 {
			p++
			continue
		}
		u, next := utf8Decode(s, p)
		if u > 0x10ffff {
			break
		}
		p = next
	}
	return p
}

// utf8Decode is nginx's ngx_utf8_decode: the code point at s[p] (above 0x10ffff when
// invalid) and where the next one starts.
func utf8Decode(s []byte, p int) (uint32, int) {
	u := uint32(s[p])
	var valid uint32
	var n int
	switch {
	case u >= 0xf0:
		u, valid, n = u&0x07, 0xffff, 3
	case u >= 0xe0:
		u, valid, n = u&0x0f, 0x7ff, 2
	case u >= 0xc2:
		u, valid, n = u&0x1f, 0x7f, 1
	default:
		return 0xffffffff, p + 1
	}
	if len(s)-p-1 < n {
		return 0xfffffffe, p
	}
	p++
	for ; n > 0; n-- {
		c := uint32(s[p])
		p++
		if c < 0x80 {
			return 0xffffffff, p
		}
		u = u<<6 | c&0x3f
	}
	if u > valid {
		return u, p
	}
	return 0xffffffff, p
}

// AppendJSONListing appends nginx's JSON autoindex; a non-empty callback makes it
// JSONP.
func AppendJSONListing(dst []byte, entries []DirEntry, callback []byte) []byte {
	if len(callback) > 0 {
		dst = append(append(dst, "/* callback */\r\n"...), callback...)
		dst = append(dst, '(')
	}
	dst = append(dst, '[')
	for i := range entries {
		e := &entries[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, "\r\n{ \"name\":\""...)
		dst = appendJSON(dst, e.Name)
		dst = append(dst, "\", \"type\":\""...)
		switch {
		case e.Dir:
			dst = append(dst, "directory"...)
		case e.File:
			dst = append(dst, "file"...)
		default:
			dst = append(dst, "other"...)
		}
		dst = append(dst, "\", \"mtime\":\""...)
		dst = AppendHTTPTime(dst, e.Mtime)
		if e.File {
			dst = strconv.AppendInt(append(dst, "\", \"size\":"...), e.Size, 10)
		} else {
			dst = append(dst, '"')
		}
		dst = append(dst, " }"...)
	}
	dst = append(dst, "\r\n]"...)
	if len(callback) > 0 {
		dst = append(dst, ");"...)
	}
	return dst
}

// AppendXMLListing appends nginx's XML autoindex.
func AppendXMLListing(dst []byte, entries []DirEntry) []byte {
	dst = append(dst, "<?xml version=\"1.0\"?>\r\n<list>\r\n"...)
	for i := range entries {
		e := &entries[i]
		typ := "other"
		switch {
		case e.Dir:
			typ = "directory"
		case e.File:
			typ = "file"
		}
		dst = append(append(append(dst, '<'), typ...), " mtime=\""...)
		t := time.Unix(e.Mtime, 0).UTC()
		dst = appendPad(dst, int64(t.Year()), 4, '0')
		dst = append(dst, '-')
		dst = appendPad(dst, int64(t.Month()), 2, '0')
		dst = append(dst, '-')
		dst = appendPad(dst, int64(t.Day()), 2, '0')
		dst = append(dst, 'T')
		dst = appendPad(dst, int64(t.Hour()), 2, '0')
		dst = append(dst, ':')
		dst = appendPad(dst, int64(t.Minute()), 2, '0')
		dst = append(dst, ':')
		dst = appendPad(dst, int64(t.Second()), 2, '0')
		dst = append(dst, 'Z')
		if e.File {
			dst = strconv.AppendInt(append(dst, "\" size=\""...), e.Size, 10)
		}
		dst = append(dst, "\">"...)
		dst = appendHTML(dst, e.Name)
		dst = append(append(append(append(dst, "</"...), typ...), '>'), "\r\n"...)
	}
	return append(dst, "</list>\r\n"...)
}

// SortEntries orders a listing as nginx: folders first, then by name, byte by byte.
func SortEntries(entries []DirEntry) {
	slices.SortFunc(entries, func(a, b DirEntry) int {
		if a.Dir != b.Dir {
			if a.Dir {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.Name, b.Name)
	})
}

// dirReader reads a folder for autoindex, reusing its buffers.
type dirReader struct {
	buf     []byte // getdents64 records
	names   []byte // entry names, NUL-terminated, back to back
	entries []DirEntry
	offs    []int
}

// read lists the folder at path (NUL-terminated) as nginx does: names starting with
// "." are left out; each entry is stat()ed (so a link shows what it points to), a
// broken link is lstat()ed, one that cannot be read (EACCES) is skipped. The
// getdents64 and fstatat calls, one per entry, run on the loop.
func (d *dirReader) read(path []byte) ([]DirEntry, syscall.Errno, string) {
	fd, e := eventloop.Openat(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if e != 0 {
		return nil, e, "opendir()"
	}
	defer unix.Close(fd)
	if cap(d.buf) == 0 {
		d.buf = make([]byte, 32<<10)
	}
	d.names, d.offs, d.entries = d.names[:0], d.offs[:0], d.entries[:0]
	for {
		n, err := unix.Getdents(fd, d.buf[:cap(d.buf)])
		if err != nil {
			return nil, err.(syscall.Errno), "readdir()"
		}
		if n <= 0 {
			break
		}
		for b := d.buf[:n]; len(b) > 0; {
			reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if len(name) == 0 || name[0] == '.' {
				continue
			}
			d.offs = append(d.offs, len(d.names))
			d.names = append(append(d.names, name...), 0)
		}
	}
	for _, off := range d.offs {
		end := off + bytes.IndexByte(d.names[off:], 0)
		name := d.names[off : end+1]
		var st unix.Stat_t
		e := fstatat(fd, name, &st, 0)
		if e == unix.ENOENT || e == unix.ELOOP {
			e = fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if e != 0 {
				return nil, e, "lstat()"
			}
		}
		if e == unix.EACCES {
			continue
		}
		if e != 0 {
			return nil, e, "stat()"
		}
		d.entries = append(d.entries, DirEntry{
			Name:  d.names[off:end:end],
			Dir:   st.Mode&unix.S_IFMT == unix.S_IFDIR,
			File:  st.Mode&unix.S_IFMT == unix.S_IFREG,
			Mtime: st.Mtim.Sec,
			Size:  st.Size,
		})
	}
	SortEntries(d.entries)
	return d.entries, 0, ""
}

// autoindex is nginx's autoindex handler for a URI ending in "/".
func (h *Handler) autoindex(req *Request, lc *LocConf, r *Response, m method) {
	path, ok := h.mapPath(req, lc, r)
	if !ok {
		return
	}
	if len(path) > 1 {
		path = path[:len(path)-1] // the URI's trailing slash
	}
	h.path = append(path, 0)
	format := lc.AutoindexFormat
	var callback []byte
	if format == FormatJSONP {
		var valid bool
		callback, valid = jsonpCallback(req.Args)
		if !valid {
			r.fail(400)
			r.Log = LogEntry{Level: slog.LevelInfo, Kind: LogBadCallback}
			return
		}
		if len(callback) == 0 {
			format = FormatJSON
		}
	}
	var entries []DirEntry
	if m != methodHead {
		var e syscall.Errno
		var op string
		entries, e, op = h.dir.read(h.path)
		if e != 0 {
			status, level := 500, errorlog.LevelCrit
			switch e {
			case unix.ENOENT, unix.ENOTDIR, unix.ENAMETOOLONG:
				status, level = 404, slog.LevelError
			case unix.EACCES:
				status, level = 403, slog.LevelError
			}
			r.fail(status)
			r.Log = LogEntry{Level: level, Kind: LogFailed, Op: op, Path: r.appendBuf(path), Errno: e}
			return
		}
	} else if fd, e := eventloop.Openat(unix.AT_FDCWD, h.path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC); e != 0 {
		// A HEAD gets the same status as a GET without the listing being read.
		switch e {
		case unix.ENOENT, unix.ENOTDIR, unix.ENAMETOOLONG:
			r.fail(404)
		case unix.EACCES:
			r.fail(403)
		default:
			r.fail(500)
		}
		return
	} else {
		unix.Close(fd)
	}
	r.Action, r.Status = Send, 200
	switch format {
	case FormatJSON:
		r.ContentType = typeJSON
	case FormatJSONP:
		r.ContentType = typeJavaScript
	case FormatXML:
		r.ContentType, r.Charset = typeXML, charsetUTF8
	default:
		r.ContentType = textHTML
	}
	if m == methodHead {
		return
	}
	if format == FormatHTML {
		// The listing is cut by characters when the charset filter will call it
		// utf-8, as nginx decides after sending the head.
		h.CharsetFilter(lc, r)
	}
	start := len(r.buf)
	switch format {
	case FormatJSON, FormatJSONP:
		r.buf = AppendJSONListing(r.buf, entries, callback)
	case FormatXML:
		r.buf = AppendXMLListing(r.buf, entries)
	default:
		o := ListingOptions{ExactSize: lc.AutoindexExactSize, UTF8: equalFold(string(r.Charset), "utf-8")}
		if lc.AutoindexLocaltime {
			_, off := time.Unix(req.Now, 0).Zone()
			o.Offset = int64(off)
		}
		r.buf = AppendHTMLListing(r.buf, req.URI, entries, o)
	}
	r.Body = append(r.Body[:0], Part{Data: r.buf[start:len(r.buf):len(r.buf)]})
}

var (
	typeJSON       = []byte("application/json")
	typeJavaScript = []byte("application/javascript")
	typeXML        = []byte("text/xml")
	charsetUTF8    = []byte("utf-8")
)

// jsonpCallback finds the callback argument (the name case-insensitive, the value as
// sent) and checks it is a JavaScript name of at most 128 letters, digits, "_" and
// ".".
func jsonpCallback(args []byte) ([]byte, bool) {
	v, found := httpcore.ArgValue(args, "callback")
	if !found {
		return nil, true
	}
	if len(v) > 128 {
		return nil, false
	}
	for _, c := range v {
		l := c | 0x20
		if !(l >= 'a' && l <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return nil, false
		}
	}
	return v, true
}

func indexFold(s []byte, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if prefixFold(s[i:], sub) {
			return i
		}
	}
	return -1
}
