package authbasic

import (
	"log/slog"
	"strconv"
	"syscall"

	"github.com/numaproxy/numaproxy/errorlog"
)

// Outcome is what auth_basic decides for a request, in the terms of nginx's access
// phase.
type Outcome uint8

const (
	Declined      Outcome = iota // auth_basic is off here: other access handlers decide
	Allowed                      // user and password match (NGX_OK)
	Unauthorized                 // 401 with WWW-Authenticate: LocConf.Challenge
	Forbidden                    // 403: the user file does not exist
	InternalError                // 500: the user file cannot be read
	Unavailable                  // 503: the verifier's queue is full (nginx would block the worker instead)
	Pending                      // the answer comes later: the Attempt's done runs on the loop
)

var outcomeNames = [...]string{"declined", "allowed", "401", "403", "500", "503", "pending"}

func (o Outcome) String() string { return outcomeNames[o] }

// Status is the HTTP status the access phase answers with (0: go on).
func (o Outcome) Status() int {
	return [...]int{0, 0, 401, 403, 500, 503, 0}[o]
}

// Checker runs auth_basic for the requests of one event loop.
type Checker struct {
	loop     Runner
	verifier *Verifier
}

// NewChecker makes the checker of a loop. Slow hashes go to v (the verifier of the
// loop's NUMA domain); with v nil they are checked on the loop, as nginx does.
func NewChecker(loop Runner, v *Verifier) *Checker {
	return &Checker{loop: loop, verifier: v}
}

// Attempt is one request's pass through auth_basic. The core keeps one per request
// and reuses it; while an Attempt is Pending it belongs to the checker until done
// has run. Its fields are valid until the next Check with it.
type Attempt struct {
	Outcome Outcome

	c        *Checker
	lc       *LocConf
	done     func(*Attempt)
	buf      []byte // the decoded "user:password"
	user     []byte
	password []byte
	log      logKind
	errno    syscall.Errno
	problem  string
	job      Job
	resumeFn func() // a.resume and a.verified, bound once
	jobFn    func()
}

type logKind uint8

const (
	logNone logKind = iota
	logNoCredentials
	logOpen
	logRead
	logNotFound
	logMismatch
	logUnsupported
	logBusy
	logClosed
)

// Check runs auth_basic for a request whose location has configuration lc, with
// authorization the value of its Authorization header (nil without one). Any
// outcome but Pending is final and done is not called; after Pending, done runs
// once on the checker's loop with the final outcome in a.Outcome.
//
// Fast schemes ({PLAIN}, {SHA}, {SSHA}, DES) are checked on the spot; the iterated
// ones go to the verifier. The first request after RecheckInterval waits for a
// check of the user file, made off the loop.
func (c *Checker) Check(a *Attempt, lc *LocConf, authorization []byte, done func(*Attempt)) Outcome {
	if a.c != c {
		a.c, a.resumeFn, a.jobFn = c, a.resume, a.verified
	}
	a.lc, a.done, a.log, a.errno, a.problem = lc, done, logNone, 0, ""
	a.user, a.password = nil, nil
	if !lc.Enabled() {
		return a.set(Declined, logNone)
	}
	var ok bool
	a.user, a.password, a.buf, ok = ParseBasic(a.buf[:0], authorization)
	if !ok {
		return a.set(Unauthorized, logNoCredentials)
	}
	st := lc.File.state(waiter{c.loop, a.resumeFn})
	if st == nil {
		return a.set(Pending, logNone)
	}
	return a.withFile(st)
}

// User returns the user name the request sent ($remote_user), nil without one.
func (a *Attempt) User() []byte { return a.user }

func (a *Attempt) set(o Outcome, l logKind) Outcome {
	a.Outcome, a.log = o, l
	return o
}

func (a *Attempt) withFile(st *fileState) Outcome {
	if st.errno != 0 {
		a.errno = st.errno
		if st.op == "open" && st.errno == syscall.ENOENT {
			return a.set(Forbidden, logOpen)
		}
		if st.op == "open" {
			return a.set(InternalError, logOpen)
		}
		return a.set(InternalError, logRead)
	}
	h := st.table.Lookup(a.user)
	switch {
	case h == nil:
		return a.set(Unauthorized, logNotFound)
	case h.scheme == SchemeUnsupported:
		a.problem = h.problem
		return a.set(Unauthorized, logUnsupported)
	case !h.Slow() || a.c.verifier == nil:
		if h.Verify(a.password) {
			return a.set(Allowed, logNone)
		}
		return a.set(Unauthorized, logMismatch)
	}
	a.job = Job{Hash: h, Password: a.password, Loop: a.c.loop, Done: a.jobFn}
	switch err := a.c.verifier.Submit(&a.job); err {
	case nil:
		return a.set(Pending, logNone)
	case ErrBusy:
		return a.set(Unavailable, logBusy)
	default:
		return a.set(InternalError, logClosed)
	}
}

// resume continues on the loop once the user file has been checked.
func (a *Attempt) resume() {
	if a.withFile(a.lc.File.cur.Load()) != Pending {
		a.done(a)
	}
}

// verified runs on the loop with the verifier's answer.
func (a *Attempt) verified() {
	switch {
	case a.job.Err != nil:
		a.set(InternalError, logClosed)
	case a.job.Match:
		a.set(Allowed, logNone)
	default:
		a.set(Unauthorized, logMismatch)
	}
	a.job.Hash, a.job.Password = nil, nil
	a.done(a)
}

// LogLevel returns the level of the error-log line nginx writes for the outcome,
// and false when it writes none.
func (a *Attempt) LogLevel() (slog.Level, bool) {
	switch a.log {
	case logNone:
		return 0, false
	case logNoCredentials:
		return errorlog.LevelInfo, true
	case logOpen:
		if a.errno == syscall.ENOENT {
			return errorlog.LevelError, true
		}
		return errorlog.LevelCrit, true
	case logRead:
		return errorlog.LevelCrit, true
	}
	return errorlog.LevelError, true
}

// AppendLog appends the text of the error-log line (nginx's words, where nginx has
// the case); the core adds the client, server and request as for any line.
func (a *Attempt) AppendLog(dst []byte) []byte {
	user := func(dst []byte) []byte {
		dst = append(dst, `user "`...)
		dst = append(dst, a.user...)
		return append(dst, '"')
	}
	switch a.log {
	case logNoCredentials:
		dst = append(dst, "no user/password was provided for basic authentication"...)
	case logOpen, logRead:
		op := "open"
		if a.log == logRead {
			op = "pread"
		}
		dst = append(dst, op...)
		dst = append(dst, `() "`...)
		dst = append(dst, a.lc.File.Path...)
		dst = append(dst, `" failed (`...)
		dst = strconv.AppendInt(dst, int64(a.errno), 10)
		dst = append(dst, ": "...)
		dst = appendStrerror(dst, a.errno)
		dst = append(dst, ')')
	case logNotFound:
		dst = user(dst)
		dst = append(dst, ` was not found in "`...)
		dst = append(dst, a.lc.File.Path...)
		dst = append(dst, '"')
	case logMismatch:
		dst = append(user(dst), ": password mismatch"...)
	case logUnsupported:
		dst = append(user(dst), ": "...)
		dst = append(dst, a.problem...)
	case logBusy:
		dst = append(user(dst), ": password verification queue full"...)
	case logClosed:
		dst = append(user(dst), ": password verifier stopped"...)
	}
	return dst
}

// appendStrerror writes the errno's text as strerror does (capitalised).
func appendStrerror(dst []byte, e syscall.Errno) []byte {
	s := e.Error()
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		dst = append(dst, s[0]-'a'+'A')
		s = s[1:]
	}
	return append(dst, s...)
}
