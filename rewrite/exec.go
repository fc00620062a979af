package rewrite

import (
	"bytes"
	"context"
	"os"

	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/httpcore"
)

// exec runs a level's directives in order, as nginx's rewrite handler runs its
// script codes: stop reports that one ended them (return, break, a rewrite with a
// flag), with the status the phase handler returns.
func exec(r *httpcore.Request, st *loopState, lc *LocConf, ops []op) (rc httpcore.Status, stop bool) {
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opSet:
			v := o.set.static
			if !o.set.isStatic {
				st.a = o.set.value.Append(st.a[:0], r)
				v = st.a
			}
			if o.set.owned != nil {
				o.set.owned.Set(r, v)
			} else {
				r.SetVariable(o.set.v, v)
			}
		case opReturn:
			return doReturn(r, st, o.ret), true
		case opBreak:
			r.SetRewritten(false)
			return httpcore.Declined, true
		case opRewrite:
			if rc, stop := doRewrite(r, st, lc, o.rw); stop {
				return rc, true
			}
		case opIf:
			if !o.cond.holds(r, st, lc) {
				continue
			}
			if o.cond.loc != nil {
				r.EnterIf(o.cond.loc)
			}
			if rc, stop := exec(r, st, lc, o.cond.body); stop {
				return rc, true
			}
		}
	}
	return httpcore.Declined, false
}

// doReturn answers a return directive.
func doReturn(r *httpcore.Request, st *loopState, ret *Return) httpcore.Status {
	code := ret.Code
	if code < 400 || ret.Text != nil {
		// nginx's return answers through ngx_http_send_response, which first drops
		// the request body: an invalid chunked body already here answers 400.
		if !r.DiscardRequestBody() {
			return 400
		}
	}
	if ret.Text == nil {
		if code >= 400 {
			return httpcore.Status(code) // nginx's special response, as for its own errors
		}
		r.SendPage(code, nil)
		return httpcore.Done
	}
	r.SetResponseStatus(code) // $status in the text, as nginx's ngx_http_send_response
	text := ret.Text.Append(st.b[:0], r)
	st.b = text[:0] // keep a grown buffer; the answer copies text before it returns
	if isRedirect(code) {
		r.SendPage(code, text)
		return httpcore.Done
	}
	// A status with a text is sent as it is: error_page does not apply (nginx sends
	// it with ngx_http_send_response, not as a special response). Its type is
	// text/plain unless an X-Accel-Redirect response passed one on.
	r.SendText(code, r.CarriedType(), text)
	return httpcore.Done
}

// isRedirect is the codes return treats as "code URL".
func isRedirect(code int) bool {
	return code == 301 || code == 302 || code == 303 || code == 307 || code == 308
}

// doRewrite runs one rewrite directive, as nginx's regex start and end codes.
func doRewrite(r *httpcore.Request, st *loopState, lc *LocConf, rw *rewriteOp) (httpcore.Status, bool) {
	uri := r.URI()
	if !r.Regex(rw.re, uri) {
		if lc.Log {
			notice(r, "\""+rw.re.String()+"\" does not match \""+string(uri)+"\"")
		}
		r.ClearCaptures()
		return httpcore.Declined, false
	}
	if lc.Log {
		notice(r, "\""+rw.re.String()+"\" matches \""+string(uri)+"\"")
	}
	args, _ := r.Args()
	quoted := quotedPath(r.Head().Path())
	if rw.flag == flagRedirect {
		var loc []byte
		if quoted {
			loc = rw.path.AppendEscapingCaptures(st.b[:0], r)
		} else {
			loc = rw.path.Append(st.b[:0], r)
		}
		loc = unescapeRedirect(loc)
		if rw.addArgs && len(args) > 0 {
			loc = append(append(loc, '?'), args...)
		}
		st.b = loc[:0]
		if lc.Log {
			notice(r, "rewritten redirect: \""+string(loc)+"\"")
		}
		if !r.DiscardRequestBody() {
			return 400, true
		}
		r.SendPage(rw.status, loc)
		return httpcore.Done, true
	}
	// The new $uri and $args side by side in one buffer: a, then b.
	path := rw.path.Append(st.a[:0], r)
	st.a = path[:0]
	newArgs := st.b[:0]
	switch {
	case rw.args != nil && quoted:
		newArgs = rw.args.AppendEscapingCaptures(newArgs, r)
		if rw.addArgs && len(args) > 0 {
			newArgs = append(append(newArgs, '&'), args...)
		}
	case rw.args != nil:
		newArgs = rw.args.Append(newArgs, r)
		if rw.addArgs && len(args) > 0 {
			newArgs = append(append(newArgs, '&'), args...)
		}
	case rw.addArgs:
		newArgs = append(newArgs, args...)
	}
	st.b = newArgs[:0]
	if lc.Log {
		notice(r, "rewritten data: \""+string(path)+"\", args: \""+string(newArgs)+"\"")
	}
	if len(path) == 0 {
		r.Log().Error("the rewritten URI has a zero length", "client", r.RemoteAddr().String())
		return 500, true
	}
	r.SetURI(path, newArgs)
	switch rw.flag {
	case flagBreak:
		r.SetRewritten(false)
		return httpcore.Declined, true
	case flagLast:
		r.SetRewritten(true)
		return httpcore.Declined, true
	}
	r.SetRewritten(true)
	return httpcore.Declined, false
}

// notice logs a rewrite_log line at nginx's notice level.
func notice(r *httpcore.Request, msg string) {
	r.Log().Log(context.Background(), errorlog.LevelNotice, msg, "client", r.RemoteAddr().String())
}

// quotedPath reports a client path with "%" or "+", nginx's r->quoted_uri and
// r->plus_in_uri: then captures in a redirect or in new arguments are escaped.
func quotedPath(p []byte) bool {
	return bytes.IndexByte(p, '%') >= 0 || bytes.IndexByte(p, '+') >= 0
}

// unescapeRedirect decodes, in place, the escapes of a redirect's URL up to its
// "?" that stand for the characters between "%" and DEL, as nginx's
// ngx_unescape_uri(NGX_UNESCAPE_REDIRECT): what a capture's escaping encoded and
// a URL may hold as it is comes back.
func unescapeRedirect(b []byte) []byte {
	d := 0
	for s := 0; s < len(b); s++ {
		c := b[s]
		if c == '?' {
			return append(b[:d], b[s:]...)
		}
		if c != '%' {
			b[d] = c
			d++
			continue
		}
		if s+1 >= len(b) {
			break // a lone "%" at the end is dropped, as nginx
		}
		h1, ok1 := unhex(b[s+1])
		if !ok1 {
			b[d] = b[s+1] // "%" and an invalid character: the character stays
			d++
			s++
			continue
		}
		if s+2 >= len(b) {
			break
		}
		h2, ok2 := unhex(b[s+2])
		if !ok2 {
			s += 2 // the invalid escape is dropped
			continue
		}
		ch := h1<<4 | h2
		switch {
		case ch == '?':
			b[d] = ch
			return append(b[:d+1], b[s+3:]...)
		case ch > '%' && ch < 0x7f:
			b[d] = ch
			d++
		default:
			b[d], b[d+1], b[d+2] = '%', b[s+1], b[s+2]
			d += 3
		}
		s += 2
	}
	return b[:d]
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		return c | 0x20 - 'a' + 10, true
	}
	return 0, false
}

// fileTest stats a path for -f -d -e -x. nginx's open_file_cache is not there: the
// stat of a local file system does not wait on the network.
func fileTest(op condOp, path []byte) bool {
	fi, err := os.Stat(string(path))
	switch op {
	case condFile:
		return err == nil && fi.Mode().IsRegular()
	case condNotFile:
		return !(err == nil && fi.Mode().IsRegular())
	case condDir:
		return err == nil && fi.IsDir()
	case condNotDir:
		return !(err == nil && fi.IsDir())
	case condExists:
		return err == nil
	case condNotExists:
		return err != nil
	case condExec: // nginx's ngx_is_exec: the owner's execute bit, of any file
		return err == nil && fi.Mode()&0o100 != 0
	case condNotExec:
		return !(err == nil && fi.Mode()&0o100 != 0)
	}
	return false
}
