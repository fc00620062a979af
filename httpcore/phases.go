package httpcore

import (
	"context"
	"log/slog"
)

// RunPhases runs the request through the phases from where it stands, as
// ngx_http_core_run_phases: each handler of a phase in turn until one takes the
// request, answers it or waits. A handler that returned Again calls it to go on.
func (r *Request) RunPhases() {
	c := r.c
	e := r.snap.engine
	for r.phase < len(e) {
		ph := &e[r.phase]
		if ph.step == stepNone {
			// A module's handler: left out where its module does not work.
			if ph.bit != 0 && c.modules(r.snap).idle&ph.bit != 0 {
				r.phase++
				continue
			}
		} else {
			switch ph.step {
			case stepFindConfig:
				if !c.findConfig() {
					return // answered (413, the 301 to "/dir/")
				}
				r.phase++
				continue
			case stepPostRewrite:
				if !r.rewritten {
					r.phase++
					continue
				}
				// A rewrite changed $uri: the location is looked for again, at most
				// 10 times a request with the internal redirects (nginx's uri_changes).
				r.rewritten = false
				r.redirects++
				if r.redirects > maxURIChanges {
					c.w.log.Error("rewrite or internal redirection cycle while processing \""+string(r.uriBuf)+"\"", "client", c.remoteAddr().String())
					r.phase = len(e)
					c.serverError()
					return
				}
				r.phase = r.snap.rewriteIndex - 1 // find config
				continue
			case stepContent:
				// The location's content handler (nginx's clcf->handler), which a
				// module's directive set; when it declines, the phase's handlers run.
				c.armSendTimeout()
				next := r.phase + 1
				if h := c.lcf.handler; h != nil && r.loc != nil {
					r.phase = len(e) // the handler may finish the request before it returns
					if rc := h(r); rc != Declined {
						r.finalize(rc)
						return
					}
				}
				r.phase = next
				continue
			case stepPostAccess:
				r.phase++
				if code := int(r.accessCode); code != 0 {
					// satisfy any, and no handler allowed: the 401 if one asked for
					// credentials, else the 403 (nginx's post-access phase).
					r.accessCode = 0
					if code == 403 && c.w.log.Enabled(context.Background(), slog.LevelError) {
						c.w.log.Error("access forbidden by rule", "client", r.RemoteAddr().String())
					}
					r.phase = len(e)
					r.finalize(Status(code))
					return
				}
				continue
			case stepNotFound:
				r.phase = len(e)
				r.finalize(404) // nothing serves this location
				return
			}
		}
		i := r.phase
		if ph.phase == AccessPhase && c.sub != nil {
			r.phase = ph.next // a subrequest is not checked (nginx's access checker)
			continue
		}
		r.met |= ph.bit
		rc := ph.h(r)
		if ph.phase == AccessPhase {
			if rc = r.access(rc); rc == Declined {
				r.phase = i + 1
				continue
			}
		}
		switch {
		case rc == Declined:
			r.phase = i + 1
		case rc == OK && ph.phase != ContentPhase:
			if ph.phase == ServerRewritePhase || ph.phase == RewritePhase {
				r.phase = i + 1 // nginx's rewrite checker goes on with the phase
			} else {
				r.phase = ph.next
			}
		case rc == Again || rc == Done:
			r.finalize(rc)
			return
		default:
			r.phase = len(e)
			r.finalize(rc)
			return
		}
	}
}

// access is nginx's access phase checker between an access handler's rc and the
// engine: with satisfy all a handler that allows lets the next one check (Declined
// here); with satisfy any it ends the phase, and a 401 or 403 is kept (a 401 over a
// 403) while the next handler checks, for the post-access step to answer.
func (r *Request) access(rc Status) Status {
	if !r.c.lcf.SatisfyAny {
		if rc == OK {
			return Declined
		}
		return rc
	}
	switch rc {
	case OK:
		// A check that allows wins: the challenge of one that asked for
		// credentials is not sent (nginx hides headers_out.www_authenticate).
		r.accessCode = 0
		r.Uncarry("www-authenticate")
		return OK
	case 401, 403:
		if r.accessCode != 401 {
			r.accessCode = int16(rc)
		}
		return Declined
	}
	return rc
}

// finalize ends a phase with rc, as ngx_http_finalize_request: a status is answered
// with its page (or error_page); OK means the handler sent a whole response.
func (r *Request) finalize(rc Status) {
	switch {
	case rc == Done || rc == Again || rc == Declined:
		if c := r.c; c != nil && c.Request == r && !r.done && c.state == csHead {
			// The handler answers later: the request is being served, and input
			// that arrives meanwhile is the next request's, kept for it.
			c.state = csWait
		}
	case rc == OK:
		r.c.finish()
	case rc >= 100 && rc <= 999:
		r.c.respondStatus(int(rc))
	default:
		r.c.serverError()
	}
}

// findConfig finds the location for the current $uri (nginx's find config phase),
// then checks the body's length against it and answers a request for "/dir" of a
// location "/dir/" that wants it with a 301. It reports false when it answered.
func (c *conn) findConfig() bool {
	r := c.Request
	r.loc, r.prefix, c.lcf, r.rewritten = nil, "", c.srvConf, false
	if r.srv != nil {
		locs := c.w.locations(r.snap, r.srv)
		if l := locs.AutoRedirect(r.uriBuf); l != nil && LocationConf(l).autoRedirect {
			r.loc, c.lcf = l, LocationConf(l)
			if !c.refuseBodyLength() {
				c.respondAutoRedirect()
			}
			return false
		}
		if m := locs.Find(r.uriBuf, r); m.Location != nil {
			r.loc, r.prefix, c.lcf = m.Location, m.Prefix, LocationConf(m.Location)
			if c.lcf.internal && c.sub == nil && r.redirects == 0 {
				c.respondStatus(404) // an internal location, asked for by a client
				return false
			}
			c.limitExcept()
		}
	}
	return !c.refuseBodyLength()
}

// refuseBodyLength answers 413 to a Content-Length over the location's
// client_max_body_size. nginx checks it as soon as the location is chosen, before
// any of its handlers (return included; a server-level return ran before), and then
// drops the body; once a request, not again after an error_page redirect.
func (c *conn) refuseBodyLength() bool {
	max := c.lcf.ClientMaxBodySize
	if max == 0 || c.bodyFate != bodyOnWire || c.req.ContentLength() <= max {
		return false
	}
	c.bodyFate = bodyRefused
	c.keepAlive = false
	c.respondStatus(413)
	return true
}

// logRequest runs the log phase once for a request that started.
func (c *conn) logRequest() {
	r := c.Request
	if r == nil || r.logged || r.snap == nil {
		return
	}
	r.logged = true
	for _, h := range r.snap.logHandlers {
		if h.bit == 0 || r.met&h.bit != 0 {
			h.h(r)
		}
	}
	c.endBodyFile() // client_body_in_file_only clean: when the request ends
}
