package authbasic

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/numa"
)

// The HTTP core's side of the module: an access phase handler added when some level
// has auth_basic on, one Checker per loop, one Verifier per NUMA node.

var key = httpcore.NewKey()

// self is Module, for the handler (Module's own initialiser cannot name it).
var self *conf.Module

func init() {
	self = Module
	Module.Ctx = &httpcore.Hooks{Init: initHTTP, NewLoop: newLoop, Key: key}
}

// errLog is the error log, known once a loop exists; user files log their reads to
// it.
var errLog atomic.Pointer[slog.Logger]

// initHTTP adds the handler when some level asks for credentials, and reads the
// snapshot's user files (off the loops: a snapshot is built before they switch to
// it). The first snapshot is built before the loops and their log exist: its files
// are read by the first request that needs them.
func initHTTP(s *httpcore.Setup) error {
	used := false
	httpcore.Walk(s.Config, self, func(lc any) { used = used || lc.(*LocConf).Enabled() })
	if !used {
		return nil
	}
	startVerifiers()
	if log := errLog.Load(); log != nil {
		for _, f := range MainConfOf(s.Config).Files() {
			f.Load(log)
		}
	}
	return s.AddHandler(httpcore.AccessPhase, handle)
}

// verifiers are the process's password verifiers, one per NUMA node, started
// the first time a configuration uses auth_basic; they outlive reloads.
var verifiers struct {
	once   sync.Once
	topo   *numa.Topology
	byNode map[int]*Verifier
}

// startVerifiers starts a Verifier on each node's CPUs (those the process may use),
// whose workers yield to the loops sharing them (nice 10). Where that fails, slow
// hashes are checked on the loops, as nginx does.
func startVerifiers() {
	verifiers.once.Do(func() {
		verifiers.byNode = map[int]*Verifier{}
		topo, err := numa.ReadTopology("")
		if err != nil {
			return
		}
		allowed, err := numa.AllowedCPUs()
		if err != nil {
			allowed = topo.CPUs()
		}
		verifiers.topo = topo
		for _, n := range topo.Nodes {
			cpus := n.CPUs.And(allowed)
			if cpus.IsEmpty() {
				continue
			}
			if v, err := NewVerifier(VerifierConfig{CPUs: cpus, Nice: 10, Logger: errLog.Load()}); err == nil {
				verifiers.byNode[n.ID] = v
			}
		}
	})
}

// verifierFor is the verifier of cpu's node, nil when there is none.
func verifierFor(cpu int) *Verifier {
	if verifiers.topo == nil {
		return nil
	}
	return verifiers.byNode[verifiers.topo.NodeOf(cpu)]
}

// loopState is the module's state in one loop: its Checker, made when the first
// request needs it (the loop is not known when the state is).
type loopState struct {
	w       *httpcore.Worker
	checker *Checker
}

func newLoop(w *httpcore.Worker) httpcore.LoopState {
	errLog.CompareAndSwap(nil, w.Log())
	return &loopState{w: w}
}

func (st *loopState) Reload(*httpcore.Snapshot) {}

func (st *loopState) check() *Checker {
	if st.checker == nil {
		startVerifiers()
		st.checker = NewChecker(st.w.Loop(), verifierFor(st.w.Loop().CPU()))
	}
	return st.checker
}

// attempt is a request's pass through auth_basic, kept in its context and reused.
// While a check is pending it is the request's httpcore.Pending, so that the core
// tells it when the request goes away before the answer.
type attempt struct {
	a       Attempt
	r       *httpcore.Request
	state   attemptState
	aborted bool
	doneFn  func(*Attempt)

	// With variables: the request's configuration and the buffers it is made in.
	dyn                             LocConf
	realm, challenge, path, scratch []byte
}

type attemptState uint8

const (
	idle    attemptState = iota
	waiting              // the Checker has the Attempt until doneFn runs
	ready                // the answer came: the handler, called again, returns it
)

// handle is ngx_http_auth_basic_handler, in the access phase.
func handle(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if !lc.Enabled() {
		return httpcore.Declined
	}
	at, _ := r.Ctx(key).(*attempt)
	switch {
	case at != nil && at.state == ready && at.r == r:
		at.state = idle
		return at.status(at.a.lc) // the configuration it was checked with
	case at == nil || at.state != idle:
		// The first, or the last one is still with a checker for a request that
		// went away: it keeps it until its answer.
		at = &attempt{}
		at.doneFn = at.done
		r.SetCtx(key, at)
	}
	at.r, at.aborted = r, false
	if lc.RealmVar != nil || lc.FileVar != nil {
		var st httpcore.Status
		if lc, st = at.evaluate(lc); lc == nil {
			return st
		}
	}
	if lc.File.logger() == nil {
		lc.File.log.CompareAndSwap(nil, r.Log())
	}
	authz, _ := r.Head().Headers.Get("authorization")
	if at.r.Worker().State(key).(*loopState).check().Check(&at.a, lc, authz, at.doneFn) == Pending {
		at.state = waiting
		r.SetPending(at)
		return httpcore.Again
	}
	return at.status(lc)
}

// evaluate makes the request's own configuration from auth_basic and
// auth_basic_user_file with variables, in the attempt (where it stays while the
// check is pending). A realm that comes out "off" declines; a path past
// maxDynamicFiles is 500.
func (at *attempt) evaluate(lc *LocConf) (*LocConf, httpcore.Status) {
	r := at.r
	at.dyn = *lc
	if lc.RealmVar != nil {
		at.realm = lc.RealmVar.Append(at.realm[:0], r)
		if string(at.realm) == "off" {
			return nil, httpcore.Declined
		}
		// A realm from variables may hold what a client sent: control characters
		// are escaped so that it cannot end the header (nginx copies it as it is).
		b := append(at.challenge[:0], `Basic realm="`...)
		b = httpcore.EscapeControls(append(b, at.realm...), len(`Basic realm="`))
		at.challenge = append(b, '"')
		at.dyn.Challenge = at.challenge
	}
	if lc.FileVar != nil {
		at.scratch = lc.FileVar.Append(at.scratch[:0], r)
		at.path = at.path[:0]
		if v := at.scratch; len(v) == 0 || v[0] != '/' {
			at.path = append(at.path, lc.fileDir...) // relative: from the configuration's folder
		}
		at.path = append(at.path, at.scratch...)
		f := MainConfOf(r.Snapshot().Config).dynamicFile(at.path)
		if f == nil {
			r.Log().Error("auth_basic_user_file: too many user files named by variables", "client", r.RemoteAddr().String())
			return nil, 500
		}
		at.dyn.File = f
	}
	return &at.dyn, 0
}

// done runs on the loop with the answer of a pending check.
func (at *attempt) done(*Attempt) {
	if at.aborted {
		at.state = idle
		return
	}
	at.state = ready
	at.r.SetPending(nil)
	at.r.RunPhases()
}

// status logs the outcome as nginx does and turns it into the handler's answer.
func (at *attempt) status(lc *LocConf) httpcore.Status {
	a, r := &at.a, at.r
	if lvl, ok := a.LogLevel(); ok {
		r.Log().Log(context.Background(), lvl, string(a.AppendLog(nil)), "client", r.RemoteAddr().String())
	}
	switch a.Outcome {
	case Declined:
		return httpcore.Declined
	case Allowed:
		return httpcore.OK
	case Unauthorized:
		r.Carry(wwwAuthenticate, lc.Challenge)
	}
	return httpcore.Status(a.Outcome.Status())
}

var wwwAuthenticate = []byte("WWW-Authenticate")

// The httpcore.Pending side, while a check is pending: the request waits in the
// access phase, its body unread; only its end matters.

func (at *attempt) BodyData([]byte)   {}
func (at *attempt) BodyRead()         {}
func (at *attempt) BodyEnd()          {}
func (at *attempt) ClientBlocked()    {}
func (at *attempt) ClientWritable()   {}
func (at *attempt) TunnelData([]byte) {}
func (at *attempt) ClientGone() bool  { return false }
func (at *attempt) Abort()            { at.aborted = true }
