package compress

import (
	"strconv"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

var (
	contentEncodingName = []byte("Content-Encoding")
	varyName            = []byte("Vary")
	acceptEncoding      = []byte("Accept-Encoding")
	etagName            = []byte("ETag")
	codingValues        = [numEncodings][]byte{[]byte("gzip"), []byte("br"), []byte("zstd")}
)

// mode is what the filters do to a response.
type mode uint8

const (
	passThrough mode = iota
	encoding         // compressed as it streams
	gunzipping       // decompressed as it streams
)

// reqCtx is the module's state for one response; it lives in the request state
// (Request.Ctx) and is reset by the header filter for each response.
type reqCtx struct {
	mode       mode
	enc        Encoding
	level      int
	limit      int // gzip_buffers: the output held before it is passed on
	headerOnly bool
	// busy: the body filter is running; an end of the request meanwhile (the
	// connection failed under it) leaves the encoder for it to give back (dead).
	busy, dead bool
	w          encoder
	inflate    *inflater
	in, out    int64 // body bytes in and out, for $gzip_ratio
	finished   bool  // the compressed body ended
	// gzipVary: the response varies with Accept-Encoding whatever is sent
	// (nginx's r->gzip_vary, kept for the request): gzip_static (brotli_static,
	// zstd_static) on found the file, or the checks looked at the 200 that the
	// range filter made a 206.
	gzipVary bool
	// staticOK, staticOn: the precompressed handler's check, for staticAccept.
	staticOK, staticOn bool
	failed             bool // the body cannot be encoded or decoded: what follows is dropped
	// seq is the request (Request.Seq) the header filter decided for: a
	// response at a level without the filters leaves the state of an earlier
	// request, which is not its own.
	seq uint64

	r    *httpcore.Request
	next httpcore.BodyFilter
	loop *loopState
	o    httpcore.Out // what is passed on (a local would escape to the heap)
}

func ctxOf(r *httpcore.Request) *reqCtx {
	ctx, _ := r.Ctx(key).(*reqCtx)
	if ctx == nil {
		ctx = &reqCtx{}
		r.SetCtx(key, ctx)
	}
	return ctx
}

// initModule puts the filters and the log-phase release in the chains when some
// level compresses or gunzips.
func initModule(s *httpcore.Setup) error {
	used, precompressed := false, false
	httpcore.Walk(s.Config, self, func(c any) {
		lc := c.(*LocConf)
		used = used || lc.Gunzip || lc.Coders[Gzip].On || lc.Coders[Brotli].On || lc.Coders[Zstd].On
		precompressed = precompressed || lc.Static != [numEncodings]StaticMode{}
	})
	if precompressed {
		// Before static's handler (registered after this module), as in nginx.
		if err := s.AddHandler(httpcore.ContentPhase, staticHandler); err != nil {
			return err
		}
	}
	if !used && !precompressed {
		return nil
	}
	// The filters work where a level compresses or gunzips, where it serves
	// precompressed files, and, when some level does, where gzip_vary may add the
	// Vary that one of them asked for before an internal redirect (nginx's
	// r->gzip_vary, which its core header filter honours under any gzip setting).
	// Elsewhere a response does not meet them, as nginx's gzip filter returns at
	// once under gzip off; the state an earlier response left is not the
	// request's (reqCtx.seq).
	s.ActiveWhere(func(c any) bool {
		lc := c.(*LocConf)
		return !lc.idle || lc.Static != [numEncodings]StaticMode{} || precompressed && lc.Vary
	})
	s.AddHeaderFilter(func(next httpcore.HeaderFilter) httpcore.HeaderFilter {
		return func(r *httpcore.Request) {
			headerFilter(r)
			next(r)
		}
	})
	s.AddBodyFilter(func(next httpcore.BodyFilter) httpcore.BodyFilter {
		return func(r *httpcore.Request, o *httpcore.Out) {
			ctx, _ := r.Ctx(key).(*reqCtx)
			if ctx == nil || ctx.mode == passThrough || ctx.headerOnly || ctx.seq != r.Seq() {
				next(r, o)
				return
			}
			if ctx.failed {
				return
			}
			ctx.r, ctx.next = r, next
			if ctx.loop == nil {
				ctx.loop = r.Worker().State(key).(*loopState)
			}
			if ctx.mode == encoding {
				ctx.encode(o)
			} else {
				ctx.gunzip(o)
			}
			ctx.r, ctx.next = nil, nil
		}
	})
	return s.AddHandler(httpcore.LogPhase, func(r *httpcore.Request) httpcore.Status {
		if ctx, _ := r.Ctx(key).(*reqCtx); ctx != nil {
			ctx.release()
			ctx.gzipVary = false // the context is the next request's too
		}
		return httpcore.OK
	})
}

// headerFilter decides what happens to the response, as nginx's gzip and gunzip
// header filters with ngx_http_gzip_ok, and for brotli and zstd the same way.
func headerFilter(r *httpcore.Request) {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || lc.idle {
		// Nothing to do here unless an earlier response on the request left its
		// state (its mode, or gzip_static's Vary): no state made, none reset.
		if ctx, _ := r.Ctx(key).(*reqCtx); ctx == nil || ctx.mode == passThrough && !ctx.gzipVary {
			return
		}
	}
	ctx := ctxOf(r)
	ctx.release()
	*ctx = reqCtx{loop: ctx.loop, gzipVary: ctx.gzipVary, seq: r.Seq()}
	if lc == nil {
		return
	}
	h := r.Header()
	m, best, vary := choose(r, lc, h)
	if vary || ctx.gzipVary {
		// One Vary, as nginx's flag r->gzip_vary (gzip_static on sets it too).
		addVary(h, lc)
	}
	switch m {
	case gunzipping:
		h.Del("Content-Encoding")
		clearForCoding(h)
		ctx.mode, ctx.headerOnly = gunzipping, r.IsHEAD()
	case encoding:
		h.Add(contentEncodingName, codingValues[best])
		clearForCoding(h)
		c := &lc.Coders[best]
		ctx.mode, ctx.enc, ctx.level = encoding, best, c.Level
		ctx.limit = lc.BufNum * lc.BufSize
		ctx.headerOnly = r.IsHEAD()
	}
}

// encodes reports whether the header filter will encode the head in r.Header()
// on the fly (static's range filter then leaves the response whole).
func encodes(r *httpcore.Request) bool {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || lc.idle {
		return false
	}
	m, _, vary := choose(r, lc, r.Header())
	if vary {
		// The 200 the checks looked at varies, and so does the 206 it becomes.
		ctxOf(r).gzipVary = true
	}
	return m == encoding
}

// choose is the header filters' decision for the head h: pass it through, gunzip
// it or encode it with best; vary: the checks looked at it (gzip_vary's Vary).
func choose(r *httpcore.Request, lc *LocConf, h *httpcore.Header) (m mode, best Encoding, vary bool) {
	if !lc.Gunzip && !lc.Coders[Gzip].On && !lc.Coders[Brotli].On && !lc.Coders[Zstd].On {
		return passThrough, 0, false
	}
	ae, hasAE := r.Head().Headers.Get("Accept-Encoding")
	if ce, ok := h.Get("Content-Encoding"); ok && len(ce) > 0 {
		// Already encoded: gunzip's, when it is gzip and gzip is not for this client.
		if lc.Gunzip && len(ce) == 4 && http1.EqualFold(ce, "gzip") {
			if !(hasAE && gzipAccepted(ae) && allowed(r, lc, true)) {
				return gunzipping, 0, true
			}
			return passThrough, 0, true
		}
		return passThrough, 0, false
	}
	if st := h.Status; st != 200 && st != 403 && st != 404 {
		return passThrough, 0, false
	}
	bestQ, eligible := -1, false
	for _, e := range preference {
		c := &lc.Coders[e]
		if !c.On || (h.ContentLength >= 0 && h.ContentLength < c.MinLength) {
			continue
		}
		ct, _ := h.Get("Content-Type")
		if !c.Types.match(ct) {
			continue
		}
		eligible = true
		if !hasAE {
			continue
		}
		q := -1
		if e == Gzip {
			if gzipAccepted(ae) {
				q = max(quality(ae, "gzip"), 1) // nginx took it: never below the others' zero
			}
		} else if q = quality(ae, e.String()); q == 0 {
			q = -1
		}
		if q >= 0 && q >= bestQ {
			best, bestQ = e, q
		}
	}
	if !eligible {
		return passThrough, 0, false
	}
	if bestQ < 0 || !allowed(r, lc, true) {
		return passThrough, 0, true
	}
	return encoding, best, true
}

// preference orders the encodings from the least preferred: at equal q-values the
// later one wins, so brotli (the smallest output for text), then zstd (faster at a
// similar size), then gzip.
var preference = [numEncodings]Encoding{Gzip, Zstd, Brotli}

// addVary adds Vary: Accept-Encoding under gzip_vary, as nginx's header writer does
// for a response the gzip modules looked at.
func addVary(h *httpcore.Header, lc *LocConf) {
	if lc.Vary {
		h.Add(varyName, acceptEncoding)
	}
}

// clearForCoding makes the head fit a body whose encoding changes: no length (the
// core frames it chunked, or until the close for HTTP/1.0), no ranges, a weak ETag
// (nginx's ngx_http_clear_content_length, ngx_http_clear_accept_ranges,
// ngx_http_weak_etag).
func clearForCoding(h *httpcore.Header) {
	h.ContentLength = -1
	h.Del("Accept-Ranges")
	v, ok := lastValue(h, "ETag")
	if !ok || len(v) > 2 && v[0] == 'W' && v[1] == '/' {
		return
	}
	h.Del("ETag")
	if len(v) < 1 || v[0] != '"' {
		return // not an entity tag: dropped, as nginx does
	}
	b := h.Buf()
	from := len(b)
	b = append(append(b, "W/"...), v...)
	h.AddBuilt(etagName, b, from)
}

// Write takes the encoder's output: it is passed down the chain once it reaches
// gzip_buffers' bound, else at the end of the body filter call.
func (ctx *reqCtx) Write(p []byte) (int, error) {
	l := ctx.loop
	l.out = append(l.out, p...)
	ctx.out += int64(len(p))
	if len(l.out) >= ctx.limit {
		ctx.passOut(false, false)
	}
	return len(p), nil
}

// passOut sends the output held down the chain.
func (ctx *reqCtx) passOut(last, flush bool) {
	l := ctx.loop
	if len(l.out) == 0 && !last && !flush {
		return
	}
	ctx.pass(l.out, last, flush)
	l.out = l.out[:0]
}

// pass sends data down the chain.
func (ctx *reqCtx) pass(data []byte, last, flush bool) {
	ctx.o = httpcore.Out{Data: data, Last: last, Flush: flush}
	ctx.next(ctx.r, &ctx.o)
}

// encode compresses body bytes as they come.
func (ctx *reqCtx) encode(o *httpcore.Out) {
	if ctx.finished {
		if o.Flush {
			ctx.pass(nil, false, true) // nothing can follow the encoded body's end
		}
		return
	}
	if ctx.w == nil {
		if len(o.Data) == 0 && o.FileN == 0 && !o.Last {
			ctx.next(ctx.r, o) // a flush of the head: nothing compressed yet
			return
		}
		w, err := ctx.loop.get(ctx.enc, ctx.level, ctx)
		if err != nil {
			ctx.r.Log().Error("creating the "+ctx.enc.String()+" encoder failed: "+err.Error(), "client", ctx.r.RemoteAddr().String())
			ctx.fail()
			return
		}
		ctx.w = w
	}
	last, flush := o.Last, o.Flush
	data, fd, off, n := o.Data, o.FileFd, o.FileOff, o.FileN
	ctx.busy = true
	defer ctx.endBusy()
	for len(data) > 0 && !ctx.dead {
		p := data[:min(len(data), chunk)]
		data = data[len(p):]
		ctx.in += int64(len(p))
		ctx.w.Write(p) // our own Write never fails, nor do the encoders but through it
	}
	for n > 0 && !ctx.dead {
		l := ctx.loop
		if l.file == nil {
			l.file = make([]byte, chunk)
		}
		m, err := pread(fd, l.file[:min(int64(len(l.file)), n)], off)
		if err != nil {
			ctx.r.Log().Error("reading a file to compress failed: "+err.Error(), "client", ctx.r.RemoteAddr().String())
			ctx.fail()
			return
		}
		off, n = off+int64(m), n-int64(m)
		ctx.in += int64(m)
		ctx.w.Write(l.file[:m])
	}
	if ctx.dead {
		return
	}
	switch {
	case last:
		ctx.w.Close()
		ctx.loop.put(ctx.enc, ctx.level, ctx.w)
		ctx.w, ctx.finished = nil, true
	case flush:
		ctx.w.Flush()
	}
	ctx.passOut(last, flush)
}

// fail ends the response short: the rest of the body is dropped and never its end,
// so a chunked response stays incomplete for the client, and the connection closes
// when the request finishes. The request is not aborted here: whoever is sending the
// body is in the middle of a call that expects the request to outlive it.
func (ctx *reqCtx) fail() {
	ctx.failed = true
	ctx.r.DisableKeepAlive()
	ctx.release()
}

// endBusy gives the encoder back when the request ended while it was in use.
func (ctx *reqCtx) endBusy() {
	ctx.busy = false
	if ctx.dead {
		ctx.dead = false
		ctx.release()
	}
}

// release gives the response's encoder (or inflater) back: at its end, or when the
// request ends before it (a client gone, an upstream error).
func (ctx *reqCtx) release() {
	if ctx.busy {
		ctx.dead = true
		return
	}
	if ctx.w != nil {
		ctx.loop.put(ctx.enc, ctx.level, ctx.w)
		ctx.w = nil
	}
	if ctx.inflate != nil {
		ctx.loop.putInflater(ctx.inflate)
		ctx.inflate = nil
	}
}

// gzipRatio is $gzip_ratio: the gzip response's uncompressed size over its
// compressed size, two decimals rounded as nginx rounds them, once it is complete.
func gzipRatio(dst []byte, r *httpcore.Request, _ string) []byte {
	ctx, _ := r.Ctx(key).(*reqCtx)
	if ctx == nil || ctx.seq != r.Seq() || !r.HeaderSent() || ctx.mode != encoding || ctx.enc != Gzip || !ctx.finished || ctx.out == 0 {
		return dst
	}
	return appendRatio(dst, ctx.in, ctx.out)
}

// appendRatio appends zin/zout with two decimals, rounded as nginx does.
func appendRatio(dst []byte, zin, zout int64) []byte {
	i, frac := zin/zout, zin*100/zout%100
	if zin*1000/zout%10 > 4 {
		if frac++; frac > 99 {
			i, frac = i+1, 0
		}
	}
	dst = strconv.AppendInt(dst, i, 10)
	dst = append(dst, '.')
	if frac < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, frac, 10)
}
