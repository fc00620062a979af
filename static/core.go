package static

import (
	"bytes"
	"context"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// The module in the HTTP core: its phase handlers, its header filter and its
// variables (httpcore.Hooks). Everything a request needs is in the loop's state and
// runs to its end in one call: a file's rest is queued on the connection with a
// descriptor of its own (eventloop's WriteFile), so no request holds a File.

// self is Module, for the handlers (Module's own initialiser cannot name them).
var self *conf.Module

// key is the module's slot for its loop state and request contexts.
var key = httpcore.NewKey()

func init() {
	self = Module
	Module.Ctx = &httpcore.Hooks{Variables: variables, Init: initModule, NewLoop: newLoop, Key: key}
}

// snapState is the module's state for one snapshot: the core variables the
// module's templates name, compiled once.
type snapState struct {
	vars map[string]*httpcore.Template
}

// initModule adds the handlers the configuration needs: the find config handler
// (the request's context, captures) and try_files in the precontent
// phase only where some location has them, the content handler (reached only by locations no other module serves), the header
// filter only with expires or charset, and the tcp_nodelay handler only with
// tcp_nodelay off somewhere.
func initModule(s *httpcore.Setup) error {
	var tryFiles, filter, noDelayOff bool // tryFiles: or captures
	ss := &snapState{vars: map[string]*httpcore.Template{}}
	var err error
	addVars := func(t *Template) {
		if t == nil || err != nil {
			return
		}
		for _, name := range t.VarNames() {
			if ss.vars[name] != nil || isCapture(name) {
				continue
			}
			var ct *httpcore.Template
			if ct, err = s.Variables().Compile("${" + name + "}"); err == nil {
				ss.vars[name] = ct
			}
		}
	}
	httpcore.Walk(s.Config, self, func(v any) {
		lc := v.(*LocConf)
		tryFiles = tryFiles || lc.TryFiles != nil || lc.captures
		filter = filter || lc.Expires.Mode != ExpiresOff || lc.Charset != ""
		noDelayOff = noDelayOff || !lc.TCPNoDelay
		addVars(lc.RootTmpl)
		addVars(lc.SymlinksFrom)
		for _, t := range lc.Index {
			addVars(t)
		}
		for _, tf := range lc.TryFiles {
			addVars(tf.Name)
		}
	})
	if err != nil {
		return err
	}
	s.SetState(key, ss)
	if tryFiles {
		if err := s.AddHandler(httpcore.FindConfigPhase, findConfigHandler); err != nil {
			return err
		}
	}
	if noDelayOff {
		if err := s.AddHandler(httpcore.PrecontentPhase, noDelayHandler); err != nil {
			return err
		}
	}
	if tryFiles {
		if err := s.AddHandler(httpcore.PrecontentPhase, tryFilesHandler); err != nil {
			return err
		}
	}
	if err := s.AddHandler(httpcore.ContentPhase, contentHandler); err != nil {
		return err
	}
	if filter {
		s.AddHeaderFilter(func(next httpcore.HeaderFilter) httpcore.HeaderFilter {
			return func(r *httpcore.Request) {
				headerFilter(r)
				next(r)
			}
		})
	}
	return nil
}

func isCapture(name string) bool { return len(name) == 1 && name[0] >= '1' && name[0] <= '9' }

// loopState is the module's state in one loop: the handler with its open file
// caches, and one request's worth of everything, reused.
type loopState struct {
	w       *httpcore.Worker
	h       *Handler
	req     Request
	resp    Response
	scratch Response // the filter's, for responses of other modules
	vars    coreVars
	buf     []byte
	// sending: the module's own response head is in the filter chain, already
	// through expires and charset.
	sending bool
	// cur is the request being filtered, for encodesFn (st.encodes, bound once).
	cur       *httpcore.Request
	encodesFn func(*Response) bool
	// readBuf is sendRead's buffer for a part that fits, while reading is not
	// set (a subrequest's file read inside a body filter takes a pool buffer):
	// a pool buffer per small file cost a Get and a Put per request.
	readBuf [readBufSize]byte
	reading bool
	// lastModified is the last Last-Modified formatted: a loop's requests
	// mostly ask for the same few files.
	lastModified memoTime
}

// memoTime is AppendHTTPTime's last answer.
type memoTime struct {
	t    int64
	text []byte // empty: none yet
}

// appendTime is AppendHTTPTime through the memo.
func (m *memoTime) appendTime(dst []byte, t int64) []byte {
	if len(m.text) == 0 || m.t != t {
		m.t, m.text = t, AppendHTTPTime(m.text[:0], t)
	}
	return append(dst, m.text...)
}

// readBufSize is the most a loop's own sendRead buffer holds: the pool's
// smallest class, and more than the pages a small static file has.
const readBufSize = 4 << 10

func newLoop(w *httpcore.Worker) httpcore.LoopState {
	st := &loopState{w: w, h: NewHandler(), buf: make([]byte, 0, 256)}
	st.lastModified.text = make([]byte, 0, 48)
	st.resp.Reset()
	st.scratch.Reset()
	st.encodesFn = st.encodes
	return st
}

// Reload drops the open file caches of the old snapshot (descriptors in use by a
// queued response are the connection's own duplicates).
func (st *loopState) Reload(*httpcore.Snapshot) {
	old := st.h.Files
	st.h.Files = NewFiles()
	old.Close()
}

// reqState is what one request carries from the precontent phase to the content
// phase: try_files' alias flag and the regex location's captures.
type reqState struct {
	addURIToAlias bool
	caps          []int
	subject       []byte // what caps index: $uri when the location matched
}

func stateOf(r *httpcore.Request) *loopState {
	return r.Worker().State(key).(*loopState)
}

// confFor is the module's config for the request: its location's, else its
// server's.
func confFor(r *httpcore.Request) *LocConf {
	lc, _ := r.LocConf(self).(*LocConf)
	return lc
}

// UseSendfile makes r's connection send files as the location's sendfile and
// sendfile_max_chunk say (nginx sets them per request from the location; off by
// default: pread and write), not as the connection's last request left them.
func UseSendfile(r *httpcore.Request) {
	if lc := confFor(r); lc != nil {
		r.Conn().SetSendfile(lc.Sendfile, int(lc.SendfileMaxChunk))
	}
}

// coreVars gives the package's templates the core's variables and the captures
// of the request's regex location.
type coreVars struct {
	r  *httpcore.Request
	ss *snapState
	rs *reqState
}

func (v *coreVars) AppendVar(dst []byte, name string) ([]byte, bool) {
	if isCapture(name) {
		rs := v.rs
		if rs == nil {
			return dst, false
		}
		n := int(name[0] - '0')
		if 2*n+1 >= len(rs.caps) || rs.caps[2*n] < 0 {
			return dst, false
		}
		return append(dst, rs.subject[rs.caps[2*n]:rs.caps[2*n+1]]...), true
	}
	if t := v.ss.vars[name]; t != nil {
		return t.Append(dst, v.r), true
	}
	return dst, false
}

// fill makes st.req the package's view of r.
func (st *loopState) fill(r *httpcore.Request, rs *reqState) *Request {
	req := &st.req
	hd := r.Head()
	// The batch's time, as the Date header's (nginx's ngx_time() for both).
	*req = Request{Method: hd.Method(), URI: r.URI(), Internal: r.Internal(), Now: st.w.Loop().Now().Unix()}
	if r.AsGET() && !r.IsHEAD() {
		req.Method = methodGET
	}
	req.Args, _ = r.Args()
	st.vars = coreVars{r: r, ss: r.Snapshot().State(key).(*snapState)}
	if rs != nil {
		st.vars.rs = rs
		req.AddURIToAlias = rs.addURIToAlias
	}
	req.Vars = &st.vars
	req.Encodes = st.encodesFn
	return req
}

var methodGET = []byte("GET")

// conditionals reads the request fields the filters look at; false: one that
// nginx takes once is there twice (400).
func conditionals(req *Request, hd *http1.Request) bool {
	h := &hd.Headers
	for i := 0; i < h.Len(); i++ {
		name := h.Name(i)
		var dst *[]byte
		unique := true
		switch len(name) {
		case 5:
			if http1.EqualFold(name, "range") {
				dst, unique = &req.Range, false
			}
		case 8:
			if http1.EqualFold(name, "if-match") {
				dst = &req.IfMatch
			} else if http1.EqualFold(name, "if-range") {
				dst, unique = &req.IfRange, false
			}
		case 13:
			if http1.EqualFold(name, "if-none-match") {
				dst = &req.IfNoneMatch
			}
		case 17:
			if http1.EqualFold(name, "if-modified-since") {
				dst = &req.IfModifiedSince
			}
		case 19:
			if http1.EqualFold(name, "if-unmodified-since") {
				dst = &req.IfUnmodifiedSince
			}
		}
		if dst == nil {
			continue
		}
		if *dst != nil {
			if unique {
				return false
			}
			continue
		}
		if v := h.Value(i); v != nil {
			*dst = v
		} else {
			*dst = empty
		}
	}
	return true
}

var empty = []byte{}

// findConfigHandler runs once the core chose the location, as nginx's find config
// phase (the core answers a client's request for an internal location): the
// request's context starts afresh, with the captures of a regex location whose file
// templates name them (nginx takes them when the location matches).
func findConfigHandler(r *httpcore.Request) httpcore.Status {
	lc := confFor(r)
	if lc == nil {
		return httpcore.Declined
	}
	rs, _ := r.Ctx(key).(*reqState)
	if rs == nil {
		if !lc.captures && lc.TryFiles == nil {
			return httpcore.Declined
		}
		rs = &reqState{}
		r.SetCtx(key, rs)
	}
	rs.addURIToAlias, rs.caps, rs.subject = false, rs.caps[:0], rs.subject[:0]
	if loc := r.Location(); lc.captures && loc != nil && loc.Regex != nil {
		need := loc.Regex.CapLen()
		if cap(rs.caps) < need {
			rs.caps = make([]int, need)
		}
		if n, ok := loc.Regex.Exec(r.URI(), rs.caps[:need]); ok {
			rs.caps = rs.caps[:n]
			rs.subject = append(rs.subject, r.URI()...)
		}
	}
	return httpcore.Declined
}

// tryFilesHandler is nginx's try_files phase.
func tryFilesHandler(r *httpcore.Request) httpcore.Status {
	lc := confFor(r)
	if lc == nil || lc.TryFiles == nil {
		return httpcore.Declined
	}
	rs, _ := r.Ctx(key).(*reqState)
	if rs == nil {
		rs = &reqState{} // a named location reached first: nothing to carry
		r.SetCtx(key, rs)
	}
	st := stateOf(r)
	req := st.fill(r, rs)
	resp := &st.resp
	st.h.TryFiles(req, lc, resp)
	defer resp.Reset()
	switch resp.Action {
	case Continue:
		args, _ := r.Args()
		r.SetURI(resp.URI, args)
		rs.addURIToAlias = resp.AddURIToAlias
		return httpcore.Declined
	case Redirect:
		args := resp.Args
		if args == nil {
			args, _ = r.Args() // no "?" in the fallback: the request's own
		}
		r.SetURI(resp.URI, args)
		r.Rerun()
		return httpcore.Done
	case Named:
		last := lc.TryFiles[len(lc.TryFiles)-1].Name
		name := last.Raw // the usual "@name" costs no conversion
		if last.HasVars() {
			name = string(resp.URI)
		}
		r.InternalRedirect(name)
		return httpcore.Done
	case Send:
		logEntry(r, resp)
		return httpcore.Status(resp.Status)
	}
	return httpcore.Declined
}

// contentHandler is nginx's index, autoindex and static handlers for a location no
// other module serves.
func contentHandler(r *httpcore.Request) httpcore.Status {
	lc := confFor(r)
	if lc == nil {
		return httpcore.Declined
	}
	rs, _ := r.Ctx(key).(*reqState)
	st := stateOf(r)
	req := st.fill(r, rs)
	resp := &st.resp
	defer resp.Reset()
	st.h.Content(req, lc, resp)
	if resp.Action == Redirect {
		r.SetURI(resp.URI, resp.Args)
		r.Rerun()
		return httpcore.Done
	}
	return st.answer(r, lc, req, resp)
}

// answer runs the filters over a Send response of a content handler and sends it.
func (st *loopState) answer(r *httpcore.Request, lc *LocConf, req *Request, resp *Response) httpcore.Status {
	if !resp.ErrorPage && (!conditionals(req, r.Head()) || !r.DiscardRequestBody()) {
		return 400
	}
	if r.IsSubrequest() {
		// The client's conditions and ranges are the main request's: nginx's not
		// modified and range filters leave a subrequest's response alone (an
		// auth_request answered 304, 412 or 416 by them made its request 500).
		req.IfModifiedSince, req.IfUnmodifiedSince, req.IfMatch, req.IfNoneMatch = nil, nil, nil, nil
		req.IfRange, req.Range = nil, nil
		resp.allowRanges = false
	}
	if ct := r.CarriedType(); len(ct) > 0 && !resp.ErrorPage {
		// An X-Accel-Redirect's file keeps the upstream's Content-Type, as nginx's
		// ngx_http_set_content_type leaves one that is set.
		resp.ContentType = ct
	}
	if st := r.ErrorStatus(); st != 0 && !resp.ErrorPage {
		// An error_page's file: its status is the error's before the filters, so
		// no 304, no ranges, no Last-Modified, as nginx's ngx_http_send_header.
		resp.Status = st
	}
	st.cur = r
	st.h.Filter(req, lc, resp)
	st.cur = nil
	logEntry(r, resp)
	if resp.ErrorPage {
		return specialResponse(r, resp)
	}
	r.ClearErrorStatus() // resp.Status has it, through the filters
	st.sendResponse(r, lc, resp)
	return httpcore.Done
}

// ServePrecompressed is the content handler of nginx's gzip_static (and
// ngx_brotli's brotli_static) over the module's files, for the module that reads
// Accept-Encoding (compress): the file the URI maps to with suffix (".gz") added,
// sent with Content-Encoding coding and the original's Content-Type, through the
// same filters (304, expires, charset, ranges) and with sendfile. accept is asked
// once the file is found (gzip_static on sets gzip_vary there, as nginx); Declined
// when the file is missing or a folder, when accept says no, or for a method
// other than GET and HEAD.
func ServePrecompressed(r *httpcore.Request, suffix string, coding []byte, accept func(*httpcore.Request) bool) httpcore.Status {
	lc := confFor(r)
	if lc == nil {
		return httpcore.Declined
	}
	rs, _ := r.Ctx(key).(*reqState)
	st := stateOf(r)
	req := st.fill(r, rs)
	resp := &st.resp
	defer resp.Reset()
	if !st.h.OpenPrecompressed(req, lc, resp, suffix) {
		logEntry(r, resp)
		if resp.Action == Declined {
			return httpcore.Declined
		}
		return httpcore.Status(resp.Status)
	}
	if !accept(r) {
		return httpcore.Declined
	}
	st.h.SendPrecompressed(req, lc, resp, suffix, coding)
	switch {
	case resp.Action == Declined:
		return httpcore.Declined
	case resp.ErrorPage:
		logEntry(r, resp)
		return httpcore.Status(resp.Status)
	}
	return st.answer(r, lc, req, resp)
}

// encodesOnTheFly is SetEncodes' function.
var encodesOnTheFly func(*httpcore.Request) bool

// SetEncodes gives the module the check of a module whose filter encodes
// responses on the fly (compress): given the response head in r.Header(), will it
// encode it? The range filter then leaves such a response whole, as nginx's gzip
// filter clears allow_ranges before its range filter runs. Call it from init.
func SetEncodes(f func(*httpcore.Request) bool) { encodesOnTheFly = f }

// encodes is Request.Encodes for the request being filtered: the head as it will
// be sent, asked of SetEncodes' check.
func (st *loopState) encodes(resp *Response) bool {
	if encodesOnTheFly == nil || st.cur == nil {
		return false
	}
	st.buildHeader(st.cur, resp)
	return encodesOnTheFly(st.cur)
}

var (
	contentTypeName     = []byte("Content-Type")
	lastModifiedName    = []byte("Last-Modified")
	etagName            = []byte("ETag")
	contentRangeName    = []byte("Content-Range")
	acceptRangesName    = []byte("Accept-Ranges")
	contentEncodingName = []byte("Content-Encoding")
	expiresName         = []byte("Expires")
	cacheControlName    = []byte("Cache-Control")
	bytesValue          = []byte("bytes")
)

// specialResponse answers with the core's page for the status (or the location's
// error_page), with what the filters gave it: a redirect's Location, a 416's
// Content-Range, and the Expires the 200 had before the range filter made it a
// 416 (nginx's headers filter runs first). The core's filter chain adds expires
// and charset for the statuses expires is for.
func specialResponse(r *httpcore.Request, resp *Response) httpcore.Status {
	if resp.ContentRange != nil {
		r.Carry(contentRangeName, resp.ContentRange)
	}
	if resp.Expires != nil && !safeForHeaders(resp.Status) {
		r.Uncarry("Expires")
		r.Uncarry("Cache-Control")
		r.Carry(expiresName, resp.Expires)
		r.Carry(cacheControlName, resp.CacheControl)
	}
	if resp.Location != nil {
		r.SendPage(resp.Status, resp.Location)
		return httpcore.Done
	}
	return httpcore.Status(resp.Status)
}

// sendResponse sends a 200, 206 or 304 the filters shaped: the head, then the
// body's parts, files with sendfile (or read into pool buffers with sendfile off).
func (st *loopState) sendResponse(r *httpcore.Request, lc *LocConf, resp *Response) {
	st.buildHeader(r, resp)
	st.sending = true
	r.SendHeader()
	st.sending = false

	body := resp.Body
	if r.IsHEAD() || resp.Status == 304 || len(body) == 0 {
		r.SendBody(nil, true)
		r.Finish()
		return
	}
	conn := r.Conn()
	fd := conn.Fd()
	conn.SetSendfile(lc.Sendfile, int(lc.SendfileMaxChunk))
	corked := false
	if lc.TCPNoPush && lc.Sendfile && resp.ContentLength > smallSendfile {
		// nginx's tcp_nopush: the head and the file's first bytes in full packets.
		corked = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_CORK, 1) == nil
	}
	for i, p := range body {
		last := i == len(body)-1
		switch {
		case !p.IsFile():
			r.SendBody(p.Data, last)
		case p.Len <= smallFile && (!lc.Sendfile || p.Len <= smallSendfile):
			// Small enough to read now: it goes out with the head in one write
			// (with sendfile on, for a few KiB that is fewer system calls than a
			// write and a sendfile, the same bytes on the wire).
			if !st.sendRead(r, resp.File.Fd, p, last) {
				return // the connection is gone
			}
		case resp.File.IsFile:
			// The size the lookup's fstat found: the connection does not fstat
			// it again.
			r.SendFileSized(resp.File.Fd, p.Off, p.Len, resp.File.Size, last)
		default:
			r.SendFile(resp.File.Fd, p.Off, p.Len, last)
		}
		if detached(r) {
			return
		}
	}
	if corked {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_CORK, 0)
	}
	r.Finish()
}

// buildHeader makes the response head of resp.
func (st *loopState) buildHeader(r *httpcore.Request, resp *Response) {
	h := r.NewHeader()
	h.Status = resp.Status
	h.ContentLength = resp.ContentLength
	if len(resp.ContentType) > 0 {
		b := h.Buf()
		from := len(b)
		h.AddBuilt(contentTypeName, resp.AppendContentType(b), from)
	}
	if resp.LastModified >= 0 {
		b := h.Buf()
		from := len(b)
		h.AddBuilt(lastModifiedName, st.lastModified.appendTime(b, resp.LastModified), from)
	}
	add := func(name, v []byte) {
		if v != nil {
			h.Add(name, v)
		}
	}
	add(etagName, resp.ETag)
	if resp.Expires != nil {
		r.Uncarry("Expires")
		r.Uncarry("Cache-Control")
	}
	add(expiresName, resp.Expires)
	add(cacheControlName, resp.CacheControl)
	add(contentRangeName, resp.ContentRange)
	add(contentEncodingName, resp.ContentEncoding)
	if resp.AcceptRanges {
		h.Add(acceptRangesName, bytesValue)
	}
}

// smallFile is the most sendfile off reads at once rather than queueing the file;
// smallSendfile the most sendfile on does.
const (
	smallFile     = 32 << 10
	smallSendfile = 8 << 10
)

// sendRead reads a file part into a pool buffer and sends it as bytes.
func (st *loopState) sendRead(r *httpcore.Request, fd int, p Part, last bool) bool {
	var buf []byte
	if p.Len <= readBufSize && !st.reading {
		st.reading = true
		defer func() { st.reading = false }()
		buf = st.readBuf[:]
	} else {
		pool := st.w.Loop().Pool()
		buf = pool.Get(int(p.Len))
		defer pool.Put(buf)
	}
	for n := 0; int64(n) < p.Len; {
		k, err := eventloop.Pread(fd, buf[n:p.Len], p.Off+int64(n))
		if err != nil || k == 0 {
			// The file shrank or cannot be read after the head went out: the
			// response cannot be finished.
			r.Log().Error("pread() of a file being sent failed", "client", r.RemoteAddr().String())
			r.Abort()
			return false
		}
		n += k
	}
	r.SendBody(buf[:p.Len], last)
	return !detached(r)
}

// detached reports a request the core gave up (its connection failed while it was
// being answered): the core clears a request's snapshot when it takes it back.
func detached(r *httpcore.Request) bool { return r.Snapshot() == nil }

// logEntry writes the error-log line nginx would for the answer.
func logEntry(r *httpcore.Request, resp *Response) {
	e := &resp.Log
	if e.Kind == LogNone {
		return
	}
	log := r.Log()
	ctx := context.Background()
	if !log.Enabled(ctx, e.Level) {
		return
	}
	st := stateOf(r)
	st.buf = e.AppendText(st.buf[:0])
	log.Log(ctx, e.Level, string(st.buf), "client", r.RemoteAddr().String(), "request", string(requestLine(r)))
}

func requestLine(r *httpcore.Request) []byte {
	line := r.RawHead()
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = bytes.TrimRight(line[:i], "\r")
	}
	return line
}

// headerFilter is expires and charset for the responses of other modules and the
// core's pages (the module's own went through them already): nginx's headers and
// charset filters.
func headerFilter(r *httpcore.Request) {
	st := stateOf(r)
	if st.sending {
		return
	}
	lc := confFor(r)
	if lc == nil {
		return
	}
	h := r.Header()
	if lc.Expires.Mode != ExpiresOff {
		sr := &st.scratch
		sr.Reset()
		sr.Status = h.Status
		if v, ok := h.Get("Last-Modified"); ok {
			if t := ParseHTTPTime(v); t >= 0 {
				sr.LastModified = t
			}
		}
		ExpiresFilter(lc, sr, st.w.Loop().Now().Unix())
		if sr.Expires != nil {
			h.Del("Expires")
			h.Del("Cache-Control")
			r.Uncarry("Expires")
			r.Uncarry("Cache-Control")
			b := h.Buf()
			from := len(b)
			h.AddBuilt(expiresName, append(b, sr.Expires...), from)
			b = h.Buf()
			from = len(b)
			h.AddBuilt(cacheControlName, append(b, sr.CacheControl...), from)
		}
	}
	if lc.Charset != "" && h.Status != 301 && h.Status != 302 {
		ct, ok := h.Get("Content-Type")
		if !ok || len(ct) == 0 || containsFold(ct, "charset=") || !lc.CharsetTypes.Has(ct, st.buf[:0]) {
			return
		}
		b := h.Buf()
		from := len(b)
		b = append(append(append(b, ct...), "; charset="...), lc.Charset...)
		h.Del("Content-Type")
		h.AddBuilt(contentTypeName, b, from)
	}
}

func containsFold(s []byte, sub string) bool { return indexFold(s, sub) >= 0 }

// noDelayHandler gives the connection the location's tcp_nodelay before its
// response goes out, whoever sends it. Client connections have TCP_NODELAY from
// the accept on (nginx sets it once a connection is kept alive, so there only its
// first response waits for Nagle's algorithm); tcp_nodelay off clears it.
func noDelayHandler(r *httpcore.Request) httpcore.Status {
	if lc := confFor(r); lc != nil {
		on := 0
		if lc.TCPNoDelay {
			on = 1
		}
		unix.SetsockoptInt(r.Conn().Fd(), unix.IPPROTO_TCP, unix.TCP_NODELAY, on)
	}
	return httpcore.Declined
}

// variables are the module's: $document_root, $realpath_root, $request_filename.
var variables = []httpcore.Variable{
	{Name: "document_root", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		lc := confFor(r)
		if lc == nil {
			return dst
		}
		rs, _ := r.Ctx(key).(*reqState)
		return DocumentRoot(dst, lc, &coreVars{r: r, ss: r.Snapshot().State(key).(*snapState), rs: rs})
	}},
	{Name: "realpath_root", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		lc := confFor(r)
		if lc == nil {
			return dst
		}
		rs, _ := r.Ctx(key).(*reqState)
		root := string(DocumentRoot(nil, lc, &coreVars{r: r, ss: r.Snapshot().State(key).(*snapState), rs: rs}))
		if real, err := filepath.EvalSymlinks(root); err == nil {
			return append(dst, real...)
		}
		return dst
	}},
	{Name: "request_filename", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		lc := confFor(r)
		if lc == nil {
			return dst
		}
		rs, _ := r.Ctx(key).(*reqState)
		add := rs != nil && rs.addURIToAlias
		path, _, err := MapURI(dst, lc, r.URI(), &coreVars{r: r, ss: r.Snapshot().State(key).(*snapState), rs: rs}, add)
		if err != nil {
			return dst
		}
		return path
	}},
}

// checkVars refuses a template that names a variable the configuration's modules
// do not have, where it is written.
func checkVars(c *conf.Cursor, s *conf.Stmt, a conf.Token, t *Template) error {
	if !t.HasVars() {
		return nil
	}
	v, err := httpcore.VariablesOf(c.Config.Registry())
	if err != nil {
		return err
	}
	for _, name := range t.VarNames() {
		if isCapture(name) {
			continue
		}
		if _, err := v.Compile("${" + name + "}"); err != nil {
			return s.InvalidValue(a, err.Error())
		}
	}
	return nil
}
