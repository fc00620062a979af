package httpcore

// RunPhases runs the request through the phases from where it stands, as
// ngx_http_core_run_phases: each handler of a phase in turn until one takes the
// request, answers it or waits. A handler that returned Again calls it to go on.
func (r *Request) RunPhases() {
	c := r.c
	e := r.snap.engine
	for r.phase < len(e) {
		ph := &e[r.phase]
		switch ph.step {
		case stepFindConfig:
			if !c.findConfig() {
				return // answered (413, the 301 to "/dir/")
			}
			r.phase++
			continue
		case stepPostRewrite:
			r.phase++ // no module changes $uri in the rewrite phase yet
			continue
		case stepContent:
			// The location's content handler (nginx's clcf->handler), which a
			// module's directive set; when it declines, the phase's handlers run.
			c.conn.SetWriteTimeout(c.lcf.SendTimeout)
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
		case stepNotFound:
			r.phase = len(e)
			r.finalize(404) // nothing serves this location
			return
		}
		i := r.phase
		rc := ph.h(r)
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
	r.loc, r.prefix, c.lcf = nil, "", c.srvConf
	if r.srv != nil {
		locs := r.snap.Routes.Locations(r.srv)
		if l := locs.AutoRedirect(r.uriBuf); l != nil && LocationConf(l).autoRedirect {
			r.loc, c.lcf = l, LocationConf(l)
			if !c.refuseBodyLength() {
				c.respondAutoRedirect()
			}
			return false
		}
		if m := locs.Find(r.uriBuf); m.Location != nil {
			r.loc, r.prefix, c.lcf = m.Location, m.Prefix, LocationConf(m.Location)
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
		h(r)
	}
}
