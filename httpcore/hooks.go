package httpcore

import (
	"fmt"
	"sync/atomic"

	"github.com/numaproxy/numaproxy/conf"
)

// Status is what a phase handler or a content handler returns, as nginx's rc: one of
// the values below, or an HTTP status (100 to 999) the core answers with its page or
// the location's error_page, as ngx_http_finalize_request does.
type Status int

const (
	// OK: this phase is done; the request goes on with the next phase.
	OK Status = 0
	// Again: the handler waits for something; it calls Request.RunPhases when it may
	// go on, and is called again.
	Again Status = -2
	// Done: the handler took the request; it answers and finishes it itself (now or
	// later, with Request.Finish or one of the Send* answers).
	Done Status = -4
	// Declined: not for this handler; the next one of the phase runs.
	Declined Status = -5
)

// Phase is a step of a request's life, nginx's ngx_http_phases.
type Phase uint8

const (
	PostReadPhase      Phase = iota // the head is read (realip would run here)
	ServerRewritePhase              // the server level's rewrite directives
	FindConfigPhase                 // the core finds the location (no module handlers)
	RewritePhase                    // the location's rewrite directives
	PostRewritePhase                // the core: back to find config when a rewrite changed the URI (no module handlers)
	PreaccessPhase                  // limits
	AccessPhase                     // allow/deny, auth
	PrecontentPhase                 // try_files, mirror
	ContentPhase                    // the location's content handler, else these handlers, else 404
	LogPhase                        // once the request ends
	numPhases
)

var phaseNames = [...]string{"post-read", "server rewrite", "find config", "rewrite", "post-rewrite", "preaccess", "access", "precontent", "content", "log"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// Handler is a phase handler or a location's content handler.
type Handler func(r *Request) Status

// HeaderFilter is one link of the response header filter chain: it may change
// r.Header() and must call the filter that was on top before it (Setup.HeaderFilter)
// to pass the head on. The last link is the core's writer.
type HeaderFilter func(r *Request)

// BodyFilter is one link of the response body filter chain: it may change or hold
// what it gets and calls the filter that was on top before it to pass body on. The
// last link is the core's writer to the connection.
type BodyFilter func(r *Request, out *Out)

// Out is response body on its way through the body filters: bytes in memory, a file
// segment, or neither; Last marks the end of the body, Flush asks for what is held
// to be sent now. Data and the file descriptor are valid only during the call.
type Out struct {
	Data []byte
	// A file segment after Data: FileN bytes of file descriptor FileFd from FileOff.
	FileFd         int
	FileOff, FileN int64
	// FileSize, when positive, is FileFd's size as its sender's fstat found it
	// just before, a regular file (SendFileSized): the connection checks the
	// range against it rather than with an fstat of its own.
	FileSize    int64
	Last, Flush bool
}

// Hooks is what an HTTP module gives the core besides its directives and configs,
// as nginx's ngx_http_module_t: set it as its conf.Module's Ctx.
type Hooks struct {
	// Variables are the module's variables, known by name to every template.
	Variables []Variable
	// Init runs once for each configuration snapshot, after its configs are merged
	// and checked (nginx's postconfiguration): the module adds its phase handlers and
	// filters there, only when the configuration uses it, so that a module nobody
	// configured adds no work to a request.
	Init func(s *Setup) error
	// NewLoop makes the module's state in one loop (nil: none). It lives as long as
	// the loop's Worker, across reloads.
	NewLoop func(w *Worker) LoopState
	// Key is the module's slot for its per-loop state, per-snapshot state and
	// request contexts (NewKey); it may be zero when it has none.
	Key Key
}

// LoopState is a module's state in one loop (Worker.State).
type LoopState interface {
	// Reload runs on the loop when it switches to a new snapshot.
	Reload(snap *Snapshot)
}

// LoopStarter is a LoopState that hears when its loop starts: Start runs on the
// loop, before any event, with the snapshot the loop serves first (later ones come
// with Reload). A module that runs work of its own on a loop (health checks)
// begins it there.
type LoopStarter interface {
	Start(snap *Snapshot)
}

// Key is a module's slot in a request's contexts, a loop's states and a snapshot's
// states. Make one per module at package initialisation with NewKey.
type Key int

// maxKeys bounds the keys: the slots are fixed arrays, so that reaching them costs
// no allocation and no map lookup.
const maxKeys = 16

var lastKey atomic.Int32

// NewKey hands out the next module key. It panics past maxKeys.
func NewKey() Key {
	k := lastKey.Add(1)
	if k >= maxKeys {
		panic("httpcore: too many module keys")
	}
	return Key(k)
}

// Setup is what a module's Init gets for one snapshot: the configuration, and the
// places to add phase handlers, filters and per-snapshot state.
type Setup struct {
	Config *conf.Config
	snap   *Snapshot
	phases [numPhases][]setupHandler
	// The filters in the order added (the last is the top), each made on the
	// next link for every set of modules active at some level.
	headers []setupHeader
	bodies  []setupBody
	// mod is the module whose Init runs (an index of snap.hooks); active, per
	// module, its ActiveWhere (nil: everywhere).
	mod    int
	active []func(lc any) bool
}

type setupHandler struct {
	h   Handler
	mod int
}

type setupHeader struct {
	f   func(next HeaderFilter) HeaderFilter
	mod int
}

type setupBody struct {
	f   func(next BodyFilter) BodyFilter
	mod int
}

// AddHandler adds h to phase p, after the handlers added before it. Handlers of the
// find config phase run once the core chose the location (nginx checks internal
// there); the post-rewrite phase takes none.
func (s *Setup) AddHandler(p Phase, h Handler) error {
	if p == PostRewritePhase || p >= numPhases {
		return fmt.Errorf("httpcore: no handlers in the %s phase", p)
	}
	s.phases[p] = append(s.phases[p], setupHandler{h: h, mod: s.mod})
	return nil
}

// AddHeaderFilter puts a header filter on top of the chain: f makes it on next,
// the link below it, which it must call to pass the head on. The core makes the
// chain once for each set of modules active at some level (ActiveWhere).
func (s *Setup) AddHeaderFilter(f func(next HeaderFilter) HeaderFilter) {
	s.headers = append(s.headers, setupHeader{f: f, mod: s.mod})
}

// AddBodyFilter puts a body filter on top of the chain, as AddHeaderFilter.
func (s *Setup) AddBodyFilter(f func(next BodyFilter) BodyFilter) {
	s.bodies = append(s.bodies, setupBody{f: f, mod: s.mod})
}

// ActiveWhere says at which levels (the http block, each server, each location) the
// module being set up works: where active(its config of the level) is false, its
// filters and its handlers from the find config phase to the content phase are left
// out of the requests served there, decided here once rather than checked by each
// request. Its handlers of the phases before (the location is not known yet) run
// for every request, those of the log phase for a request that met one of its
// handlers or filters. Without it the module is active everywhere.
func (s *Setup) ActiveWhere(active func(lc any) bool) {
	s.active[s.mod] = active
}

// SetState keeps v as the module's state for this snapshot (Snapshot.State).
func (s *Setup) SetState(k Key, v any) { s.snap.states[k] = v }

// EnableStats asks every module to keep its figures for this snapshot (a module
// that reports them, as metrics, calls it; others check Snapshot.StatsEnabled), so
// that without one no request pays for counting.
func (s *Setup) EnableStats() { s.snap.stats = true }

// Variables is the variable registry templates compile against.
func (s *Setup) Variables() *Variables { return s.snap.vars }

// Pending is the module side of a request whose answer is produced asynchronously,
// as the proxy's exchange with its upstream (Request.SetPending): the core tells it
// what happens on the client's side.
type Pending interface {
	// BodyData takes request body data (de-chunked) as it arrives (ReadBody with
	// StreamBody). It is valid until BodyRead returns: the pieces of one read come
	// first, then BodyRead.
	BodyData(p []byte)
	// BodyRead ends the pieces of one read of the client.
	BodyRead()
	// BodyEnd: the whole body was read (a body read whole is in TakeBody), or there
	// is none. The request is then read; the answer is the pending's to give.
	BodyEnd()
	// ClientBlocked and ClientWritable: the client's output went above the loop's
	// high watermark, and back under the low one.
	ClientBlocked()
	ClientWritable()
	// TunnelData takes client bytes after Tunnel.
	TunnelData(p []byte)
	// ClientGone: the client connection closed while the request was pending. True
	// keeps the pending running (the request is released when it calls Finish);
	// false gets it aborted.
	ClientGone() bool
	// Abort ends the pending at once, the request being finalized otherwise (an
	// error, a timeout, the connection's end). It must not answer the client; the
	// core has already detached it.
	Abort()
}
