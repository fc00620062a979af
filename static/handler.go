package static

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/errorlog"
)

// Handler runs the static content handlers and filters for one event loop. It keeps
// the loop's open file caches and scratch buffers: make one per loop and
// configuration snapshot with NewHandler, Close it when the loop drops the snapshot.
// It is not safe for concurrent use.
type Handler struct {
	Files *Files

	path     []byte
	name     []byte
	scratch  []byte
	ranges   []byteRange
	boundary uint64
	dir      dirReader
	vars     docRootVars

	// The last file's ETag and the last Content-Type lookup: a loop's requests
	// mostly ask for the same few files, and these cost a formatting and a map
	// lookup each per request.
	etag     memoETag
	typeMemo memoType
}

// memoETag is AppendETag's last answer.
type memoETag struct {
	mtime, size int64
	etag        []byte // empty: none yet
}

// appendETag is AppendETag through the memo.
func (m *memoETag) appendETag(dst []byte, mtime, size int64) []byte {
	if len(m.etag) == 0 || m.mtime != mtime || m.size != size {
		m.mtime, m.size = mtime, size
		m.etag = AppendETag(m.etag[:0], mtime, size)
	}
	return append(dst, m.etag...)
}

// memoType is the last Types.Lookup: the extension in types, and its type (nil:
// not in the table).
type memoType struct {
	types *Types
	ext   [16]byte
	n     int
	t     []byte
}

// NewHandler makes a loop's Handler.
func NewHandler() *Handler {
	return &Handler{
		Files:    NewFiles(),
		path:     make([]byte, 0, 512),
		name:     make([]byte, 0, 256),
		scratch:  make([]byte, 0, 64),
		etag:     memoETag{etag: make([]byte, 0, 40)},
		boundary: rand.Uint64() / 2, // nginx counts from 0; a random start keeps boundaries unguessable
	}
}

// Close closes the cached descriptors.
func (h *Handler) Close() { h.Files.Close() }

// Serve is what nginx does in the content phase for a location without proxy_pass,
// up to the response head: Content, then Filter. The core's own phases and filter
// chains call the two (and the filters) separately.
func (h *Handler) Serve(req *Request, lc *LocConf, r *Response) {
	h.Content(req, lc, r)
	h.Filter(req, lc, r)
}

type method int

const (
	methodOther method = iota
	methodGet
	methodHead
	methodPost
)

func methodOf(m []byte) method {
	switch string(m) {
	case "GET":
		return methodGet
	case "HEAD":
		return methodHead
	case "POST":
		return methodPost
	}
	return methodOther
}

// Content runs nginx's content handlers for files in their order (index, autoindex,
// static) and the core's answer when all decline: 403 for a URI ending in "/", and
// otherwise the static handler's. r is Reset first; on return r.Action says what
// the core does next. It may block the loop on the file system (see open.go).
func (h *Handler) Content(req *Request, lc *LocConf, r *Response) {
	r.Reset()
	uri := req.URI
	if (len(uri) == 0 || uri[0] != '/') && !req.AddURIToAlias {
		r.fail(400)
		return
	}
	m := methodOf(req.Method)
	// try_files "" in a regex location with alias leaves an empty URI: the file is
	// the alias itself.
	if len(uri) == 0 || uri[len(uri)-1] != '/' {
		h.static(req, lc, r, m)
		return
	}
	if m != methodOther && h.index(req, lc, r) {
		return
	}
	if lc.Autoindex && (m == methodGet || m == methodHead) {
		h.autoindex(req, lc, r, m)
		return
	}
	if m == methodOther {
		r.fail(405)
		return
	}
	r.fail(403)
	if path, _, err := MapURI(h.path[:0], lc, uri, req.Vars, req.AddURIToAlias); err == nil {
		h.path = path
		r.Log = LogEntry{Level: slog.LevelError, Kind: LogIndexDenied, Path: r.appendBuf(path)}
	}
}

// mapPath maps the request's URI, answering the errors; ok false means r is final.
func (h *Handler) mapPath(req *Request, lc *LocConf, r *Response) (path []byte, ok bool) {
	if lc.Alias && req.Rewritten {
		r.fail(500)
		r.Log = LogEntry{Level: errorlog.LevelAlert, Kind: LogAliasRewritten}
		return nil, false
	}
	path, _, err := MapURI(h.path[:0], lc, req.URI, req.Vars, req.AddURIToAlias)
	h.path = path[:0]
	switch {
	case errors.Is(err, ErrBadURI):
		r.fail(400)
		return nil, false
	case errors.Is(err, ErrOutsideRoot):
		r.fail(403)
		r.Log = LogEntry{Level: slog.LevelError, Kind: LogOutsideRoot, Path: r.appendBuf(req.URI)}
		return nil, false
	case err != nil:
		r.fail(500)
		return nil, false
	}
	return path, true
}

// openOptions are the location's lookup settings for path.
func openOptions(req *Request, lc *LocConf, path, from []byte, testOnly bool) OpenOptions {
	o := OpenOptions{
		TestOnly: testOnly,
		Symlinks: lc.DisableSymlinks,
		DirectIO: lc.DirectIO,
		Valid:    int64(lc.CacheValid / time.Second),
		MinUses:  lc.CacheMinUses,
		Errors:   lc.CacheErrors,
		Now:      req.Now,
	}
	if lc.SymlinksFrom != nil && o.Symlinks != SymlinksOff {
		o.Symlinks, o.From = SymlinksFrom(path, from, o.Symlinks)
	}
	return o
}

// symlinksFrom expands disable_symlinks' from= into h.scratch ($document_root comes
// from the location).
func (h *Handler) symlinksFrom(req *Request, lc *LocConf) []byte {
	if lc.SymlinksFrom == nil || lc.DisableSymlinks == SymlinksOff {
		return nil
	}
	h.vars = docRootVars{lc: lc, vars: req.Vars}
	h.scratch = lc.SymlinksFrom.Append(h.scratch[:0], &h.vars)
	return h.scratch
}

// docRootVars adds $document_root, which belongs to this module, to the core's
// variables.
type docRootVars struct {
	lc   *LocConf
	vars Vars
}

func (v *docRootVars) AppendVar(dst []byte, name string) ([]byte, bool) {
	if name == "document_root" {
		return DocumentRoot(dst, v.lc, v.vars), true
	}
	if v.vars == nil {
		return dst, false
	}
	return v.vars.AppendVar(dst, name)
}

// static is nginx's static handler for a URI not ending in "/".
func (h *Handler) static(req *Request, lc *LocConf, r *Response, m method) {
	if m == methodOther {
		r.fail(405)
		return
	}
	path, ok := h.mapPath(req, lc, r)
	if !ok {
		return
	}
	o := openOptions(req, lc, path, h.symlinksFrom(req, lc), false)
	f := &r.File
	h.Files.Open(f, path, lc.OpenFileCache, &o)
	if !f.OK {
		h.openFailed(lc, r, path)
		return
	}
	if f.IsDir {
		f.Close()
		start := len(r.buf)
		r.buf = appendEscaped(r.buf, req.URI, &escapeURI)
		r.buf = append(r.buf, '/')
		if len(req.Args) > 0 {
			r.buf = append(append(r.buf, '?'), req.Args...)
		}
		r.Location = r.buf[start:len(r.buf):len(r.buf)]
		r.fail(301)
		return
	}
	if !f.IsFile {
		f.Close()
		r.fail(404)
		r.Log = LogEntry{Level: errorlog.LevelCrit, Kind: LogNotRegular, Path: r.appendBuf(path)}
		return
	}
	if m == methodPost {
		f.Close()
		r.fail(405)
		return
	}
	r.Action, r.Status = Send, 200
	r.ContentLength, r.LastModified = f.Size, f.Mtime
	if lc.ETag {
		start := len(r.buf)
		r.buf = h.etag.appendETag(r.buf, f.Mtime, f.Size)
		r.ETag = r.buf[start:len(r.buf):len(r.buf)]
	}
	r.ContentType = h.contentType(lc, req.URI)
	r.allowRanges = true
	if f.Size > 0 {
		r.Body = append(r.Body[:0], Part{Off: 0, Len: f.Size})
	}
}

// openFailed answers a lookup error as nginx's static handler does.
func (h *Handler) openFailed(lc *LocConf, r *Response, path []byte) {
	f := &r.File
	level, status := slog.LevelError, 500
	switch f.Errno {
	case 0:
		r.fail(500)
		return
	case unix.ENOENT, unix.ENOTDIR, unix.ENAMETOOLONG:
		status = 404
	case unix.EACCES, unix.EMLINK, unix.ELOOP:
		status = 403
	default:
		level = errorlog.LevelCrit
	}
	r.fail(status)
	if status != 404 || lc.LogNotFound {
		r.logFailed(level, &f.FileInfo, r.appendBuf(path))
	}
}

// contentType is nginx's ngx_http_set_content_type: the type of the URI's extension,
// else default_type.
func (h *Handler) contentType(lc *LocConf, uri []byte) []byte {
	if ext := Exten(uri); len(ext) > 0 {
		m := &h.typeMemo
		if m.types != lc.Types || m.n != len(ext) || string(m.ext[:m.n]) != string(ext) {
			t := lc.Types.Lookup(ext, h.scratch[:0])
			if len(ext) > len(m.ext) {
				if t == nil {
					t = lc.DefaultType
				}
				return t
			}
			m.types, m.n, m.t = lc.Types, copy(m.ext[:], ext), t
		}
		if m.t != nil {
			return m.t
		}
	}
	return lc.DefaultType
}

// index is nginx's index handler: the first index file that exists is an internal
// redirect to it. It reports whether it answered.
func (h *Handler) index(req *Request, lc *LocConf, r *Response) bool {
	dirTested := false
	for _, idx := range lc.Index {
		h.name = idx.Append(h.name[:0], req.Vars)
		if len(h.name) > 0 && h.name[0] == '/' {
			r.Action = Redirect
			r.URI, r.Args = r.appendBuf(h.name), req.Args
			return true
		}
		path, ok := h.mapPath(req, lc, r)
		if !ok {
			return true
		}
		nameAt := len(path)
		path = append(path, h.name...)
		h.path = path[:0]
		o := openOptions(req, lc, path, h.symlinksFrom(req, lc), true)
		var f File
		h.Files.Open(&f, path, lc.OpenFileCache, &o)
		f.Close()
		if f.OK {
			r.Action = Redirect
			r.URI, r.Args = r.appendBuf(req.URI, h.name...), req.Args
			return true
		}
		switch f.Errno {
		case 0:
			r.fail(500)
			return true
		case unix.ELOOP, unix.EMLINK:
			r.fail(403)
			return true
		case unix.ENOTDIR, unix.ENAMETOOLONG, unix.EACCES:
			h.indexError(lc, r, path, f.Errno)
			return true
		}
		if !dirTested {
			if h.indexTestDir(req, lc, r, path, nameAt) {
				return true
			}
			dirTested = true
		}
		if f.Errno == unix.ENOENT {
			continue
		}
		r.fail(500)
		r.logFailed(errorlog.LevelCrit, &f.FileInfo, r.appendBuf(path))
		return true
	}
	return false
}

// indexTestDir checks, after the first index file is missing, that the folder
// itself exists (nginx's ngx_http_index_test_dir); true means r holds the answer.
func (h *Handler) indexTestDir(req *Request, lc *LocConf, r *Response, path []byte, nameAt int) bool {
	last := nameAt - 1
	if last < 0 || path[last] != '/' || last == 0 {
		last++ // "alias" without a trailing slash
	}
	dir := path[:last]
	o := openOptions(req, lc, dir, h.symlinksFrom(req, lc), true)
	o.TestDir = true
	var f File
	h.Files.Open(&f, dir, lc.OpenFileCache, &o)
	f.Close()
	if f.OK {
		if f.IsDir {
			return false
		}
		r.fail(500)
		r.Log = LogEntry{Level: errorlog.LevelAlert, Kind: LogNotDir, Path: r.appendBuf(dir)}
		return true
	}
	switch f.Errno {
	case 0:
		r.fail(500)
		return true
	case unix.ELOOP, unix.EMLINK:
		r.fail(403)
		return true
	case unix.ENOENT:
		h.indexError(lc, r, dir, unix.ENOENT)
		return true
	case unix.EACCES:
		return false // searching it is allowed: the index file's error said so
	}
	r.fail(500)
	r.logFailed(errorlog.LevelCrit, &f.FileInfo, r.appendBuf(dir))
	return true
}

// indexError is nginx's ngx_http_index_error.
func (h *Handler) indexError(lc *LocConf, r *Response, path []byte, errno unix.Errno) {
	if errno == unix.EACCES {
		r.fail(403)
		r.Log = LogEntry{Level: slog.LevelError, Kind: LogForbidden, Path: r.appendBuf(path), Errno: errno}
		return
	}
	r.fail(404)
	if lc.LogNotFound {
		r.Log = LogEntry{Level: slog.LevelError, Kind: LogNotFound, Path: r.appendBuf(path), Errno: errno}
	}
}

// TryFiles is nginx's try_files phase: the first argument naming a file (or with a
// trailing slash a folder) that exists under the root makes it the URI (Continue);
// else the last argument decides: =code (Send with ErrorPage), @name (Named) or a
// URI with optional ?args (Redirect). Declined when the location has no try_files.
func (h *Handler) TryFiles(req *Request, lc *LocConf, r *Response) {
	r.Reset()
	if lc.TryFiles == nil {
		r.Action = Declined
		return
	}
	if lc.Alias && req.Rewritten {
		r.fail(500)
		r.Log = LogEntry{Level: errorlog.LevelAlert, Kind: LogAliasRewritten}
		return
	}
	uri := req.URI
	for i, tf := range lc.TryFiles {
		last := i == len(lc.TryFiles)-1
		// The root (with alias: the alias), then the argument's value.
		h.path = DocumentRoot(h.path[:0], lc, req.Vars)
		root := len(h.path)
		h.path = tf.Name.Append(h.path, req.Vars)
		// As nginx: with alias, a value with variables that starts with the
		// location's prefix has it cut (the fallback's too).
		if lc.Alias && !lc.AliasWhole && tf.Name.HasVars() && len(h.path)-root >= lc.AliasLen &&
			len(uri) >= lc.AliasLen && string(h.path[root:root+lc.AliasLen]) == string(uri[:lc.AliasLen]) {
			copy(h.path[root:], h.path[root+lc.AliasLen:])
			h.path = h.path[:len(h.path)-lc.AliasLen]
		}
		path, name := h.path, h.path[root:]
		if last {
			if tf.Code != 0 {
				r.fail(tf.Code)
				return
			}
			h.tryFallback(r, name)
			return
		}
		if indexByte(path, 0) >= 0 || dotDotAfter(path, root) {
			continue
		}
		o := openOptions(req, lc, path, h.symlinksFrom(req, lc), true)
		var f File
		h.Files.Open(&f, path, lc.OpenFileCache, &o)
		f.Close()
		if !f.OK {
			if f.Errno == 0 {
				r.fail(500)
				return
			}
			if f.Errno != unix.ENOENT && f.Errno != unix.ENOTDIR && f.Errno != unix.ENAMETOOLONG {
				r.logFailed(errorlog.LevelCrit, &f.FileInfo, r.appendBuf(path))
			}
			continue
		}
		if f.IsDir != tf.TestDir {
			continue
		}
		r.Action = Continue
		switch {
		case !lc.Alias:
			r.URI = r.appendBuf(name)
		case lc.AliasWhole:
			r.URI = req.URI
			if !tf.TestDir {
				r.URI, r.AddURIToAlias = r.appendBuf(name), true
			}
		default:
			r.URI = r.appendBuf(uri[:lc.AliasLen], name...)
		}
		return
	}
}

// tryFallback follows try_files' last argument: @name, or a URI whose "?" starts
// new arguments.
func (h *Handler) tryFallback(r *Response, name []byte) {
	if len(name) > 0 && name[0] == '@' {
		r.Action, r.URI = Named, r.appendBuf(name)
		return
	}
	r.Action = Redirect
	if q := indexByte(name, '?'); q >= 0 {
		r.URI, r.Args = r.appendBuf(name[:q]), r.appendBuf(name[q+1:])
		return
	}
	r.URI, r.Args = r.appendBuf(name), nil
}

// OpenPrecompressed is the first half of nginx's gzip_static handler (and
// ngx_brotli's brotli_static): it opens the file the URI maps to with suffix
// (".gz") added. It reports whether the file was found, and then r.File holds it;
// otherwise r.Action is Declined (static serves the URI), or Send with the error
// (a 500 as nginx), and r.Log what nginx logs for an unreadable file.
func (h *Handler) OpenPrecompressed(req *Request, lc *LocConf, r *Response, suffix string) bool {
	r.Reset()
	r.Action = Declined
	m := methodOf(req.Method)
	uri := req.URI
	if m != methodGet && m != methodHead || len(uri) == 0 || uri[len(uri)-1] == '/' {
		return false
	}
	path, ok := h.mapPath(req, lc, r)
	if !ok {
		// static maps the same URI and answers the same error, logged once.
		r.Reset()
		r.Action = Declined
		return false
	}
	path = append(path, suffix...)
	h.path = path[:0]
	o := openOptions(req, lc, path, h.symlinksFrom(req, lc), false)
	f := &r.File
	h.Files.Open(f, path, lc.OpenFileCache, &o)
	if f.OK {
		return true
	}
	switch f.Errno {
	case 0:
		r.fail(500)
	case unix.ENOENT, unix.ENOTDIR, unix.ENAMETOOLONG:
	case unix.EACCES, unix.EMLINK, unix.ELOOP:
		r.logFailed(slog.LevelError, &f.FileInfo, r.appendBuf(path))
	default:
		r.logFailed(errorlog.LevelCrit, &f.FileInfo, r.appendBuf(path))
	}
	return false
}

// SendPrecompressed is the second half, once the client's Accept-Encoding took
// the file OpenPrecompressed found: a folder is Declined; otherwise r is the 200
// with the original's Content-Type, the file's length, Last-Modified and ETag,
// Content-Encoding coding, no ranges. Filter then shapes it as static's own.
func (h *Handler) SendPrecompressed(req *Request, lc *LocConf, r *Response, suffix string, coding []byte) {
	f := &r.File
	if f.IsDir {
		f.Close()
		r.Action = Declined
		return
	}
	if !f.IsFile {
		f.Close()
		r.fail(404)
		path, _, err := MapURI(h.path[:0], lc, req.URI, req.Vars, req.AddURIToAlias)
		if err == nil {
			h.path = path[:0]
			r.Log = LogEntry{Level: errorlog.LevelCrit, Kind: LogNotRegular, Path: r.appendBuf(path, []byte(suffix)...)}
		}
		return
	}
	r.Action, r.Status = Send, 200
	r.ContentLength, r.LastModified = f.Size, f.Mtime
	if lc.ETag {
		start := len(r.buf)
		r.buf = h.etag.appendETag(r.buf, f.Mtime, f.Size)
		r.ETag = r.buf[start:len(r.buf):len(r.buf)]
	}
	r.ContentType = h.contentType(lc, req.URI)
	r.ContentEncoding = coding // and no ranges: nginx's gzip_static leaves allow_ranges off
	if f.Size > 0 {
		r.Body = append(r.Body[:0], Part{Off: 0, Len: f.Size})
	}
}
