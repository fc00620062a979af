package proxy

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/cache"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/static"
)

// The proxy cache (nginx's proxy_cache on ngx_http_file_cache): a request of a
// location with proxy_cache looks its key up in the zone (cache/) before it goes
// upstream. A fresh entry is answered from its file: the stored response head goes
// through the same rewriting as an upstream's, the body with sendfile. Otherwise the
// request goes upstream, and a response that may be cached is written to the
// entry's temporary file as it streams to the client, then renamed into place when
// it is whole. An expired entry may stand in for a failed upstream
// (proxy_cache_use_stale). proxy_cache_lock makes the other requests for a new
// entry wait, polling the zone every lockPoll, as nginx polls every 500 ms. With
// proxy_cache_background_update the request that takes an expired entry's
// updating flag answers with the entry (STALE) and hands the flag to a background
// request (httpcore's StartBackground) that fetches it as a miss would; an error
// leaves the expired entry and ends the flag.

// cacheStatus is $upstream_cache_status.
type cacheStatus uint8

const (
	csNone cacheStatus = iota
	csMiss
	csBypass
	csExpired
	csStale
	csUpdating
	csRevalidated
	csHit
)

var cacheStatusNames = [...]string{"", "MISS", "BYPASS", "EXPIRED", "STALE", "UPDATING", "REVALIDATED", "HIT"}

const lockPoll = 50 * time.Millisecond

// cacheCtx is an exchange's cache state; it is kept with the exchange across the
// requests it serves, so its buffers and timer are made once.
type cacheCtx struct {
	ex          *exchange
	started     time.Time // the request's start: status belongs to that request
	zone        *cache.Zone
	key         cache.Key // the entry's: main, or the variant its Vary picks
	main        cache.Key // the MD5 of the key
	variant     []byte    // scratch for the variant's key
	text        []byte    // the key
	path        []byte    // scratch for the file name
	status      cacheStatus
	store       bool // the response may be stored
	locked      bool // the request holds the entry's updating flag
	stale       bool // an expired file exists
	staleError  bool // its stale-if-error (or stale-while-revalidate) covers now
	convertHead bool // a HEAD request goes upstream as GET
	// proxy_cache_revalidate: the expired entry's validators, sent upstream, and
	// its status.
	revalidate   bool
	lastModified []byte
	etag         []byte
	storedStatus int
	gen          uint64 // the entry's file generation the lookup saw; 0: open it by name
	waitUntil    time.Time
	timer        eventloop.Timer
	timerInit    bool
	w            cache.Writer
}

// cacheStart looks the request up in its location's cache: it reports true when it
// answered (a hit) or waits (proxy_cache_lock).
func (ex *exchange) cacheStart() bool {
	r, cc := ex.r, &ex.lc.Cache
	m := r.Head().Method()
	if r.AsGET() {
		m = []byte("GET")
	}
	var bit cacheMethods
	switch string(m) {
	case "GET":
		bit = cacheGET
	case "HEAD":
		bit = cacheHEAD
	case "POST":
		bit = cachePOST
	}
	if cc.Methods&bit == 0 {
		return false
	}
	c := ex.ck
	if c == nil {
		c = &cacheCtx{}
		ex.ck = c
	}
	c.started = r.Started()
	c.ex, c.zone, c.status, c.store, c.locked, c.stale = ex, cc.Zone.target.zone, csNone, false, false, false
	c.staleError = false
	c.revalidate = false
	c.waitUntil = time.Time{}
	c.convertHead = bit == cacheHEAD && cc.ConvertHead
	k := cc.Key
	if k == nil {
		k = ex.snapState().cacheKey
	}
	if from := ex.st.bgFrom; from != nil && r.IsBackground() {
		// The background update of an expired entry: the key and its updating flag
		// are the request's that started it; it goes upstream and stores as a miss.
		ex.st.bgFrom = nil
		c.text = append(c.text[:0], from.text...)
		c.main, c.key = from.main, from.key
		c.locked, c.stale, c.status, c.store = true, true, csExpired, !ex.conditions(cc.NoCache)
		if cc.Revalidate {
			ex.loadValidators()
		}
		return false
	}
	c.text = k.Append(c.text[:0], r)
	c.main = cache.KeyOf(c.text)
	c.key = c.main
	if ex.conditions(cc.Bypass) {
		c.status, c.store = csBypass, !ex.conditions(cc.NoCache)
		return false
	}
	return ex.cacheLookup()
}

// conditions reports a value of proxy_cache_bypass or proxy_no_cache that is set.
func (ex *exchange) conditions(ts []*httpcore.Template) bool {
	for _, t := range ts {
		v := t.Append(ex.st.scratch[:0], ex.r)
		ex.st.scratch = v[:0]
		if len(v) > 0 && !(len(v) == 1 && v[0] == '0') {
			return true
		}
	}
	return false
}

// cacheLookup decides from the entry's state: a hit, waiting for the lock, or a
// trip upstream (false).
func (ex *exchange) cacheLookup() bool {
	c, cc := ex.ck, &ex.lc.Cache
	now := ex.st.w.Loop().Now() // the batch's time, as nginx's ngx_time()
	c.key = c.main
	st := c.zone.Acquire(c.key, now.UnixNano())
	if len(st.Vary) > 0 {
		// The key's responses vary: the request's fields pick the entry.
		c.key, c.variant = cache.VariantOf(c.main, st.Vary, c.variant, ex.requestFields)
		st = c.zone.Acquire(c.key, now.UnixNano())
	}
	c.gen = st.Gen
	noStore := ex.conditions(cc.NoCache)
	lockAge := int64(1 << 62) // an expired entry's fetch holds it until it ends
	if cc.Lock {
		lockAge = int64(cc.LockAge)
	}
	if st.Exists {
		if st.ValidSec >= now.Unix() {
			if ex.serveCached(csHit) {
				return true
			}
		} else {
			c.stale = true
			// Cache-Control's stale-while-revalidate and stale-if-error of the
			// stored response stand for use_stale updating and for any error.
			updating := cc.UseStale&UseStaleUpdating != 0 || st.ValidSec+st.UpdatingSec >= now.Unix()
			c.staleError = st.ValidSec+st.ErrorSec >= now.Unix()
			if c.zone.Lock(c.key, now.UnixNano(), lockAge) {
				c.locked = true
				if cc.BackgroundUpdate && updating && ex.backgroundUpdate() && ex.serveCached(csStale) {
					return true
				}
			} else if updating && ex.serveCached(csUpdating) {
				return true
			}
			c.status, c.store = csExpired, !noStore
			if cc.Revalidate {
				ex.loadValidators()
			}
			return false
		}
	}
	c.status = csMiss
	if st.Uses < cc.MinUses || noStore {
		return false
	}
	if !cc.Lock {
		c.store = true
		return false
	}
	if c.zone.Lock(c.key, now.UnixNano(), lockAge) {
		c.locked, c.store = true, true
		return false
	}
	if c.waitUntil.IsZero() {
		c.waitUntil = now.Add(cc.LockTimeout)
	}
	if !now.Before(c.waitUntil) {
		return false // nginx: past proxy_cache_lock_timeout the response is not cached
	}
	if !c.timerInit {
		ex.st.w.Loop().InitTimer(&c.timer, c.lockWait)
		c.timerInit = true
	}
	c.timer.Reset(lockPoll)
	return true
}

// backgroundUpdate starts the background request that fetches the expired entry
// the request holds the updating flag of, and hands the flag to it (nginx's
// ngx_http_upstream_cache_background_update). It has no body: a request with one
// goes upstream itself.
func (ex *exchange) backgroundUpdate() bool {
	r := ex.r
	if r.IsSubrequest() || !r.AsGET() && r.Head().Framing() != http1.BodyNone {
		return false
	}
	ex.st.bgFrom = ex.ck
	r.StartBackground(httpcore.SubrequestHooks{})
	took := ex.st.bgFrom == nil
	ex.st.bgFrom = nil
	if took {
		ex.ck.locked = false // the background request's now; it ends it
	}
	return took
}

// lockWait looks at the entry again for a request waiting on proxy_cache_lock.
func (c *cacheCtx) lockWait(*eventloop.Timer) {
	ex := c.ex
	if ex.state == exDone || ex.r.Pending() != httpcore.Pending(ex) {
		return
	}
	if !ex.cacheLookup() {
		ex.forward()
	}
}

// serveCached answers from the entry's file; false when it cannot be read (the
// entry is forgotten, the request goes on as a miss).
func (ex *exchange) serveCached(status cacheStatus) bool {
	c, r := ex.ck, ex.r
	pool := ex.st.pool()
	ex.releaseResponseBuffer()
	buf := pool.Get(4096)
	e, err := ex.openEntry(buf)
	if short, ok := err.(*cache.ErrShort); ok {
		pool.Put(buf)
		buf = pool.Get(short.Needed)
		e, err = ex.openEntry(buf)
	}
	if err != nil {
		pool.Put(buf)
		if !errors.Is(err, unix.ENOENT) {
			ex.st.log.Error("cache file cannot be read: "+err.Error(), "path", string(c.zone.Path(nil, c.key)))
		}
		ex.st.hits.drop(c.zone, c.key)
		c.zone.Remove(c.key)
		return false
	}
	ex.rbuf = buf
	ex.resp.Reset()
	ex.upHead = nil // a revalidation's 304 kept before (keepHead) is replaced by the entry's
	ex.resp.HeadRequest = r.IsHEAD()
	ex.resp.Limits = http1.Limits{MaxLineSize: len(e.Head) + 1, MaxHeadSize: len(e.Head) + 1}
	if _, err := ex.resp.Parse(e.Head); err != nil {
		ex.closeEntry(e.Fd)
		ex.st.hits.drop(c.zone, c.key)
		ex.releaseResponseBuffer()
		c.zone.Remove(c.key)
		return false
	}
	ex.upHead = e.Head // nginx's $upstream_http_* of a hit: the entry's fields
	c.status = status
	if c.locked {
		c.zone.Unlock(c.key)
		c.locked = false
	}
	ex.state = exBody
	ex.responseHeader()
	h := r.Header()
	h.ContentLength = e.BodyLen
	switch ex.notModified(h.Status) {
	case 304:
		h.Status, h.Reason = 304, nil
		r.SendHeader()
		r.SendBody(nil, true)
		ex.closeEntry(e.Fd)
		ex.end()
		r.Finish()
		return true
	case 412:
		ex.closeEntry(e.Fd)
		ex.end()
		r.SendStatus(412)
		return true
	}
	off, n := e.BodyStart, e.BodyLen
	if _, ranges := ex.resp.Headers.Get("accept-ranges"); ranges && h.Status == 200 {
		// nginx's range filter, which a cached response that came with
		// Accept-Ranges goes through: one range of a Range that If-Range allows is
		// a 206.
		rng, ok := r.Head().Headers.Get("range")
		if ok && ex.ifRangeAllows() {
			if start, end, one, _ := static.SingleRange(rng, e.BodyLen); one {
				h.Status, h.Reason = 206, nil
				h.Del("accept-ranges") // as nginx's 206
				b := h.Buf()
				from := len(b)
				b = append(b, "bytes "...)
				b = strconv.AppendInt(b, start, 10)
				b = append(b, '-')
				b = strconv.AppendInt(b, end-1, 10)
				b = append(b, '/')
				b = strconv.AppendInt(b, e.BodyLen, 10)
				h.AddBuilt(contentRangeName, b, from)
				off, n = off+start, end-start
				h.ContentLength = n
			}
		}
	}
	r.SendHeader()
	switch {
	case n > 0 && off+n <= e.Read:
		r.SendBody(ex.rbuf[off:off+n], true) // read with the head already
	case n > 0:
		static.UseSendfile(r)
		r.SendFileSized(e.Fd, off, n, e.Size, true) // Size from Open's fstat: none again
	default:
		r.SendBody(nil, true)
	}
	ex.closeEntry(e.Fd)
	ex.end()
	r.Finish()
	return true
}

// openEntry opens the entry's file and reads its head into buf, with the
// descriptor the loop kept for the same file when there is one (hitfiles.go); a
// descriptor it opens is kept. An ErrShort leaves it kept.
func (ex *exchange) openEntry(buf []byte) (cache.Entry, error) {
	c, h := ex.ck, &ex.st.hits
	now := ex.st.w.Loop().Now().UnixNano()
	if c.gen != 0 {
		if fd := h.get(c.zone, c.key, c.gen, now); fd >= 0 {
			return cache.Reread(fd, c.text, buf)
		}
	}
	e, path, err := c.zone.Open(c.key, c.text, c.path, buf)
	c.path = path[:0]
	if err == nil && c.gen != 0 {
		h.put(ex.st.w.Loop(), c.zone, c.key, c.gen, e.Fd, now)
	}
	return e, err
}

// closeEntry closes the descriptor of a served entry unless the loop keeps it.
func (ex *exchange) closeEntry(fd int) {
	c := ex.ck
	if c.gen == 0 || !ex.st.hits.keeps(c.zone, c.key, c.gen, fd) {
		unix.Close(fd)
	}
}

// loadValidators reads the expired entry's Last-Modified and ETag for a
// conditional request upstream.
func (ex *exchange) loadValidators() {
	c := ex.ck
	pool := ex.st.pool()
	buf := pool.Get(4096)
	defer pool.Put(buf)
	e, path, err := c.zone.Open(c.key, c.text, c.path, buf)
	c.path = path[:0]
	if err != nil {
		return
	}
	unix.Close(e.Fd)
	ex.resp.Reset()
	ex.resp.Limits = http1.Limits{MaxLineSize: len(e.Head) + 1, MaxHeadSize: len(e.Head) + 1}
	if _, err := ex.resp.Parse(e.Head); err == nil {
		lm, hasLM := ex.resp.Headers.Get("last-modified")
		et, hasET := ex.resp.Headers.Get("etag")
		c.lastModified = append(c.lastModified[:0], lm...)
		c.etag = append(c.etag[:0], et...)
		c.storedStatus = ex.resp.StatusCode()
		c.revalidate = hasLM || hasET
		if !hasLM {
			c.lastModified = c.lastModified[:0]
		}
	}
	ex.resp.Reset()
}

// appendValidators adds the conditional fields of a revalidation to the upstream
// request head.
func (ex *exchange) appendValidators(h []byte) []byte {
	c := ex.ck
	if c == nil || !c.revalidate || c.zone == nil {
		return h
	}
	if len(c.lastModified) > 0 {
		h = append(h, "If-Modified-Since: "...)
		h = append(h, c.lastModified...)
		h = append(h, "\r\n"...)
	}
	if len(c.etag) > 0 {
		h = append(h, "If-None-Match: "...)
		h = append(h, c.etag...)
		h = append(h, "\r\n"...)
	}
	return h
}

// revalidated answers a 304 to a revalidation: the entry is fresh again and is
// served (REVALIDATED).
func (ex *exchange) revalidated(headLen int) bool {
	c := ex.ck
	now := time.Now()
	v, ok := ex.cacheValidity(c.storedStatus, now)
	if !ok {
		return false
	}
	if err := c.zone.Revalidate(c.key, v.ValidSec, now.UnixNano()); err != nil {
		ex.st.log.Error("cache: "+err.Error(), "path", c.zone.Dir)
		return false
	}
	c.locked = false
	c.gen = 0 // its header was rewritten: a descriptor kept is not this generation's
	ex.bal.Done(ex.peer, now, false)
	ex.keepClean(headLen)
	ex.dropConn()
	return ex.serveCached(csRevalidated)
}

// staleFor answers a failure of kind cond with the expired entry when
// proxy_cache_use_stale allows it, or the entry's stale-if-error.
func (ex *exchange) staleFor(cond NextUpstream) bool {
	c := ex.ck
	if c == nil || c.zone == nil || !c.stale || ex.lc.Cache.UseStale&cond == 0 && !c.staleError || ex.r.HeaderSent() {
		return false
	}
	if ex.peer != nil && ex.conn != nil {
		ex.bal.Done(ex.peer, time.Now(), false)
	}
	ex.dropConn()
	c.w.Abort()
	c.gen = 0 // the entry may have changed since the lookup: open it by name
	return ex.serveCached(csStale)
}

// cacheResponse decides, with the upstream's response head, whether an expired
// entry stands in for it, and whether it is stored: it reports true when the
// client was answered from the cache.
func (ex *exchange) cacheResponse(code, headLen int) bool {
	c := ex.ck
	if c == nil || c.zone == nil {
		return false
	}
	// stale-if-error does not cover an upstream's status (nginx 1.22's
	// ngx_http_upstream_test_next looks at proxy_cache_use_stale only).
	if cond := ex.lc.Cache.UseStale.ForStatus(code); cond != 0 && ex.staleFor(cond) {
		return true
	}
	if code == 304 && c.revalidate && ex.revalidated(headLen) {
		return true
	}
	if !c.store || ex.r.IsHEAD() && !c.convertHead {
		return false
	}
	now := time.Now()
	v, ok := ex.cacheValidity(code, now)
	if !ok {
		return false
	}
	vary, varies := ex.resp.Headers.Get("vary")
	if ex.lc.IgnoreHeaders&IgnoreVary != 0 {
		varies = false
	}
	if varies && (len(vary) > 128 || bytes.IndexByte(vary, '*') >= 0) {
		return false // as nginx
	}
	key := c.main
	if varies {
		key, c.variant = cache.VariantOf(c.main, vary, c.variant, ex.requestFields)
		c.zone.SetVary(c.main, vary)
	} else if c.key != c.main {
		c.zone.SetVary(c.main, nil) // no longer varies
	}
	if key != c.key {
		if c.locked {
			c.zone.Unlock(c.key)
			c.locked = false
		}
		c.key = key
	}
	if err := c.zone.Create(&c.w, c.key, c.text, ex.rbuf[:headLen], v, now.Unix()); err != nil {
		ex.st.log.Error("cache: "+err.Error(), "path", c.zone.Dir)
	}
	return false
}

// cacheValidity is nginx's reading of the response's caching fields: until when it
// is fresh (and may stand in past that: stale-while-revalidate, stale-if-error),
// and whether it may be stored at all.
func (ex *exchange) cacheValidity(code int, now time.Time) (cache.Validity, bool) {
	lc, h := ex.lc, &ex.resp.Headers
	ign := lc.IgnoreHeaders
	var valid, updating, errSec int64
	accel := false
	for i := 0; i < h.Len(); i++ {
		name, v := h.Name(i), h.Value(i)
		switch {
		case ign&IgnoreXAccelExpires == 0 && http1.EqualFold(name, "x-accel-expires"):
			if len(v) > 0 && v[0] == '@' {
				n, ok := parseDecimal(v[1:])
				if !ok {
					continue
				}
				valid = n
			} else {
				n, ok := parseDecimal(v)
				if !ok {
					continue
				}
				if n == 0 {
					return cache.Validity{}, false
				}
				valid = now.Unix() + n
			}
			accel = true
		case ign&IgnoreCacheControl == 0 && http1.EqualFold(name, "cache-control"):
			if accel {
				continue
			}
			lv := bytes.ToLower(v)
			if bytes.Contains(lv, []byte("no-cache")) || bytes.Contains(lv, []byte("no-store")) || bytes.Contains(lv, []byte("private")) {
				return cache.Validity{}, false
			}
			if n, ok := directiveSeconds(lv, "s-maxage="); ok {
				if n == 0 {
					return cache.Validity{}, false
				}
				valid = now.Unix() + n
			} else if n, ok := directiveSeconds(lv, "max-age="); ok {
				if n == 0 {
					return cache.Validity{}, false
				}
				valid = now.Unix() + n
			}
			if n, ok := directiveSeconds(lv, "stale-while-revalidate="); ok {
				updating, errSec = n, n
			}
			if n, ok := directiveSeconds(lv, "stale-if-error="); ok {
				errSec = n
			}
		case ign&IgnoreExpires == 0 && http1.EqualFold(name, "expires"):
			if valid != 0 {
				continue
			}
			t := static.ParseHTTPTime(v)
			if t < 0 || t <= now.Unix() {
				return cache.Validity{}, false
			}
			valid = t
		case ign&IgnoreSetCookie == 0 && http1.EqualFold(name, "set-cookie"):
			return cache.Validity{}, false
		}
	}
	if valid == 0 {
		d := lc.Cache.validFor(code)
		if d == 0 {
			return cache.Validity{}, false
		}
		valid = now.Add(d).Unix()
	}
	return cache.Validity{ValidSec: valid, UpdatingSec: updating, ErrorSec: errSec}, true
}

// directiveSeconds finds "name=N" in a lower-case Cache-Control value.
func directiveSeconds(v []byte, name string) (int64, bool) {
	i := bytes.Index(v, []byte(name))
	if i < 0 || i > 0 && v[i-1] != ' ' && v[i-1] != ',' {
		return 0, false
	}
	v = v[i+len(name):]
	j := 0
	for j < len(v) && v[j] >= '0' && v[j] <= '9' {
		j++
	}
	return parseDecimal(v[:j])
}

// requestFields appends the values of the request's fields called name, for a
// variant's key.
func (ex *exchange) requestFields(dst, name []byte) []byte {
	h := &ex.r.Head().Headers
	first := true
	for i := 0; i < h.Len(); i++ {
		if bytes.EqualFold(h.Name(i), name) {
			if !first {
				dst = append(dst, ',')
			}
			dst = append(dst, h.Value(i)...)
			first = false
		}
	}
	return dst
}

// cacheWrite stores body bytes of a response being cached.
func (ex *exchange) cacheWrite(p []byte) {
	if c := ex.ck; c != nil && c.w.Active() {
		if err := c.w.Write(p); err != nil {
			ex.st.log.Error("cache: "+err.Error(), "path", c.zone.Dir)
		}
	}
}

// cacheCommit puts a stored response whose body arrived whole in place.
func (ex *exchange) cacheCommit() {
	if c := ex.ck; c != nil && c.w.Active() {
		if err := c.w.Commit(time.Now().UnixNano()); err != nil {
			ex.st.log.Error("cache: "+err.Error(), "path", c.zone.Dir)
		}
		c.locked = false
	}
}

// cacheEnd drops what a request that ends left of its cache state: a file not
// complete, the entry's updating flag, the lock's timer.
func (ex *exchange) cacheEnd() {
	c := ex.ck
	c.w.Abort()
	if c.locked {
		c.zone.Unlock(c.key)
		c.locked = false
	}
	if c.timerInit {
		c.timer.Stop()
	}
}

// notModified is nginx's not-modified filter, which a cached response (a hit, or
// one being stored) goes through, with the location's if_modified_since: 304, 412,
// or 0 to send it.
func (ex *exchange) notModified(status int) int {
	hs := &ex.r.Head().Headers
	var req static.Request
	req.IfModifiedSince = present(hs, "if-modified-since")
	req.IfNoneMatch = present(hs, "if-none-match")
	req.IfUnmodifiedSince = present(hs, "if-unmodified-since")
	req.IfMatch = present(hs, "if-match")
	if status != 200 || req.IfModifiedSince == nil && req.IfNoneMatch == nil && req.IfUnmodifiedSince == nil && req.IfMatch == nil {
		return 0
	}
	lc, _ := ex.r.LocConf(static.Module).(*static.LocConf)
	if lc == nil {
		return 0
	}
	resp := static.Response{Status: 200, LastModified: -1}
	if lm, ok := ex.resp.Headers.Get("last-modified"); ok {
		resp.LastModified = static.ParseHTTPTime(lm)
	}
	resp.ETag = present(&ex.resp.Headers, "etag")
	return static.NotModified(&req, lc, &resp)
}

// present is a field's value, nil when absent.
func present(h *http1.Headers, name string) []byte {
	if v, ok := h.Get(name); ok {
		if v == nil {
			return []byte{}
		}
		return v
	}
	return nil
}

// cacheClears reports a client's field that does not go upstream from a location
// with proxy_cache, as nginx's ngx_http_proxy_cache_headers: the response must be
// whole and unconditional to be stored.
func cacheClears(name []byte) bool {
	switch len(name) {
	case 5:
		return http1.EqualFold(name, "range")
	case 8:
		return http1.EqualFold(name, "if-match") || http1.EqualFold(name, "if-range")
	case 13:
		return http1.EqualFold(name, "if-none-match")
	case 17:
		return http1.EqualFold(name, "if-modified-since")
	case 19:
		return http1.EqualFold(name, "if-unmodified-since")
	}
	return false
}

// upstreamCacheStatus is $upstream_cache_status.
func upstreamCacheStatus(dst []byte, r *httpcore.Request, _ string) []byte {
	// The exchange's state outlives it (the error page of a failed request shows
	// it): the request's start tells whether it is this request's.
	if ex, _ := r.Ctx(key).(*exchange); ex != nil && ex.r == r && ex.ck != nil && ex.ck.started.Equal(r.Started()) {
		return append(dst, cacheStatusNames[ex.ck.status]...)
	}
	return dst
}

// convertHead: a HEAD request goes upstream as GET for the cache.
func (ex *exchange) convertHead() bool { return ex.ck != nil && ex.ck.zone != nil && ex.ck.convertHead }

var (
	contentRangeName = []byte("Content-Range")
)

// ifRangeAllows is the If-Range test against the cached response: an entity tag
// must equal its ETag, a date its Last-Modified.
func (ex *exchange) ifRangeAllows() bool {
	v, ok := ex.r.Head().Headers.Get("if-range")
	if !ok {
		return true
	}
	if len(v) >= 2 && v[len(v)-1] == '"' {
		etag, ok := ex.resp.Headers.Get("etag")
		return ok && bytes.Equal(etag, v)
	}
	lm, ok := ex.resp.Headers.Get("last-modified")
	return ok && static.ParseHTTPTime(lm) == static.ParseHTTPTime(v) && static.ParseHTTPTime(v) >= 0
}
