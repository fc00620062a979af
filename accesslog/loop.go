package accesslog

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
)

// maxInflight bounds the buffers a loop has handed to its writer and not got back:
// past it the writer is behind, and lines are dropped (and counted) rather than
// the loop waiting for it or holding more memory.
const maxInflight = 64

// lineBufSize is the buffer of a log without buffer=: the lines of one batch.
const lineBufSize = 16 << 10

// loopStats are a loop's counters; the loop writes lines and dropped, its writer
// written and failed; anyone reads them.
type loopStats struct {
	lines   atomic.Uint64 // formatted
	written atomic.Uint64 // written to their file or sent to syslog
	dropped atomic.Uint64 // dropped on the loop: the writer was behind
	failed  atomic.Uint64 // lost to a failed write or send
}

// loopState is the module's state in one loop: a buffer per sink, the lines it
// holds, and the buffers out with the writer.
type loopState struct {
	w      *httpcore.Worker
	loop   *eventloop.Loop
	wr     *writer
	domain int
	back   chan []byte // buffers the writer wrote, coming home
	out    int         // buffers with the writer

	pend  []*pending // by sink id
	dirty []*pending // unbuffered logs with lines, handed on at the end of the batch
	batch eventloop.BatchEnd

	line, val, path []byte // scratch, reused
	// room: a line of a file log is formatted in the file's buffer when this
	// much is left in it (1 KiB, or twice the longest line yet: a line that
	// outgrows the buffer is moved to the heap by append), else in line and
	// copied.
	room int
	// $remote_addr of the last line, formatted: consecutive lines are often from
	// one client (a keep-alive connection's requests). addrPlain: nothing in it
	// to escape.
	addr      netip.Addr
	addrText  []byte
	addrPlain bool
	stats     loopStats
	// lines counts the lines formatted; stats.lines gets it at the end of the
	// batch (an atomic store per line, an xchg, was a tenth of the log's cost).
	lines uint64
	// deferred: lines wait for the writer to give a buffer back (endBatch); it
	// then runs wake on the loop.
	deferred atomic.Bool
	wake     func()
	exited   bool // the loop is gone; its buffers went back to its pool
}

// exitWait bounds how long an exiting loop waits for its writer to give its
// buffers back before its pool may be closed.
const exitWait = 30 * time.Second

// exit runs on the loop's thread as it exits: everything buffered goes to the
// writer, and the loop waits until the writer gave every buffer back (they are
// its pool's, which closes after the loop).
func (ls *loopState) exit() {
	ls.flushAll()
	deadline := time.After(exitWait)
	for ls.out > 0 {
		select {
		case b := <-ls.back:
			ls.out--
			ls.loop.Pool().Put(b[:cap(b)])
		case <-deadline:
			ls.w.Log().Error("access log: the writer kept buffers of an exiting loop", "buffers", ls.out)
			ls.out = 0
		}
	}
	for _, p := range ls.pend {
		if p != nil && p.buf != nil {
			ls.loop.Pool().Put(p.buf[:cap(p.buf)])
			p.buf = nil
		}
	}
	ls.exited = true
}

// pending is a loop's buffer for one sink.
type pending struct {
	ls      *loopState
	s       *sink
	buf     []byte // pooled
	lines   int
	gzip    int  // the level its log asks for (0: none)
	poll    bool // its log has no buffer=: the writer polls for the next lines
	dirty   bool
	timer   eventloop.Timer // flush=
	timerOn bool
}

var loops struct {
	mu  sync.Mutex
	all []*loopState
}

func newLoop(w *httpcore.Worker) httpcore.LoopState { return &loopState{w: w, domain: -1} }

// Reload hands on what the loop buffered: a file the new configuration no longer
// names gets its lines before it is closed.
func (ls *loopState) Reload(*httpcore.Snapshot) {
	if ls.loop != nil {
		ls.flushAll()
	}
}

// start binds the state to its loop on the first line (the loop is not known when
// the worker makes its states).
func (ls *loopState) start() {
	ls.loop = ls.w.Loop()
	ls.domain = ls.w.Domain()
	ls.wr = writerFor(ls.domain, ls.loop.CPU(), ls.w.Log())
	ls.back = make(chan []byte, maxInflight)
	ls.loop.InitBatchEnd(&ls.batch, ls.endBatch)
	ls.loop.AtExit(ls.exit)
	ls.wake = ls.endBatch
	ls.line = make([]byte, 0, 1024)
	ls.room = 1024
	ls.val = make([]byte, 0, 256)
	loops.mu.Lock()
	loops.all = append(loops.all, ls)
	loops.mu.Unlock()
}

// logHandler is the log phase handler: a line for each access_log of the
// location the request ended in.
func logHandler(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil || lc.Off {
		return httpcore.OK
	}
	ls := r.Worker().State(key).(*loopState)
	if ls.loop == nil {
		ls.start()
	}
	for _, lg := range lc.Logs {
		ls.write(r, lg)
	}
	return httpcore.OK
}

// write formats the line of lg for r into the sink's buffer.
func (ls *loopState) write(r *httpcore.Request, lg *Log) {
	if lg.If != nil {
		ls.val = lg.If.Append(ls.val[:0], r)
		if len(ls.val) == 0 || len(ls.val) == 1 && ls.val[0] == '0' {
			return
		}
	}
	s := lg.sink
	p := ls.pendingFor(s)
	p.gzip, p.poll = lg.Gzip, lg.Buffer == 0
	if s.kind == sinkFile && cap(p.buf)-len(p.buf) >= ls.room {
		// As nginx, into the buffer itself, rather than formatted apart and
		// copied (the copy was a sixth of the line's cost).
		n := len(p.buf)
		avail := cap(p.buf) - n
		line := lg.Format.appendLine(ls, p.buf[n:n:cap(p.buf)], r)
		line = append(line, '\n')
		if cap(line) == avail { // append never shrinks a capacity, and moves to more
			p.buf = p.buf[:n+len(line)]
			ls.room = max(ls.room, 2*len(line))
			ls.added(p, lg)
			return
		}
		// Longer than what was left: append moved it to the heap (as it grows
		// the scratch line for a line longer than any before). It goes the long
		// way, after the buffer.
		ls.room = max(ls.room, 2*len(line))
		if cap(line) > cap(ls.line) {
			ls.line = line
		} else {
			ls.line = append(ls.line[:0], line...)
		}
		ls.put(p, lg, nil)
		return
	}
	line := ls.line[:0]
	if s.kind == sinkSyslog {
		line = s.peer.appendHeader(line, time.Now())
	}
	line = lg.Format.appendLine(ls, line, r)
	if s.kind != sinkSyslog {
		line = append(line, '\n')
	}
	ls.line = line
	if s.kind == sinkFile {
		ls.room = max(ls.room, 2*len(line))
	}
	ls.put(p, lg, r)
}

// put copies the line in ls.line into p's buffer, handing the buffer on first
// when the line does not fit.
func (ls *loopState) put(p *pending, lg *Log, r *httpcore.Request) {
	s := p.s
	line := ls.line
	size := len(line)
	switch s.kind {
	case sinkSyslog:
		size += 4
	case sinkDynamic:
		ls.path = lg.path.Append(ls.path[:0], r)
		if len(ls.path) == 0 || ls.path[0] != '/' {
			ls.path = append(ls.path[:0], lg.prefix...)
			ls.path = append(ls.path, '/')
			ls.path = lg.path.Append(ls.path, r)
		}
		if len(ls.path) > 4096 {
			ls.stats.dropped.Add(1) // no file has such a name
			return
		}
		size += 6 + len(ls.path)
	}
	if p.buf != nil && len(p.buf)+size > cap(p.buf) {
		ls.handOff(p)
	}
	if p.buf == nil {
		p.buf = ls.loop.Pool().Get(max(lg.Buffer, lineBufSize, size))[:0]
	}
	switch s.kind {
	case sinkFile:
		p.buf = append(p.buf, line...)
	case sinkSyslog:
		p.buf = append(p.buf, byte(len(line)), byte(len(line)>>8), byte(len(line)>>16), byte(len(line)>>24))
		p.buf = append(p.buf, line...)
	case sinkDynamic:
		p.buf = appendDynRecord(p.buf, ls.path, line)
	}
	ls.added(p, lg)
}

// added counts a line put in p's buffer and arranges for the buffer to go.
func (ls *loopState) added(p *pending, lg *Log) {
	p.lines++
	ls.lines++
	ls.batch.Arm() // publishes lines
	switch {
	case lg.Buffer == 0:
		if !p.dirty {
			p.dirty = true
			ls.dirty = append(ls.dirty, p)
		}
	case lg.Flush > 0 && !p.timerOn:
		p.timerOn = true
		p.timer.Reset(lg.Flush)
	}
}

// appendRemoteAddr appends $remote_addr and reports whether it holds nothing to
// escape.
func (ls *loopState) appendRemoteAddr(dst []byte, r *httpcore.Request) ([]byte, bool) {
	if a := r.RemoteAddr().Addr(); a != ls.addr || ls.addrText == nil {
		ls.addr = a
		ls.addrText = httpcore.AppendAddr(ls.addrText[:0], r.RemoteAddr())
		ls.addrPlain = indexEscaped(ls.addrText) < 0
	}
	return append(dst, ls.addrText...), ls.addrPlain
}

// pendingFor is the loop's buffer for s.
func (ls *loopState) pendingFor(s *sink) *pending {
	for len(ls.pend) <= s.id {
		ls.pend = append(ls.pend, nil)
	}
	p := ls.pend[s.id]
	if p == nil {
		p = &pending{ls: ls, s: s}
		ls.loop.InitTimer(&p.timer, func(*eventloop.Timer) {
			p.timerOn = false
			ls.handOff(p)
		})
		ls.pend[s.id] = p
	}
	return p
}

// endBatch publishes the count of lines and hands on the lines of unbuffered logs
// written during the batch. While
// the writer still has a buffer of this loop, the lines of the next batches join
// the buffer they are in (until it is half full) rather than going in one of their
// own: the writer takes them when it is done, and the loop hands out one buffer per
// write rather than one per batch, which it would soon run out of.
func (ls *loopState) endBatch() {
	ls.stats.lines.Store(ls.lines)
	ls.takeBack()
	kept := ls.dirty[:0]
	for _, p := range ls.dirty {
		if ls.out > 0 && len(p.buf) <= cap(p.buf)/2 {
			kept = append(kept, p)
			continue
		}
		p.dirty = false
		ls.handOff(p)
	}
	clear(ls.dirty[len(kept):])
	ls.dirty = kept
	if len(kept) == 0 {
		return
	}
	// The writer wakes the loop when it gives a buffer back (writer.done); a
	// buffer that came back before the flag was up is seen here.
	ls.deferred.Store(true)
	ls.takeBack()
	if ls.out == 0 {
		ls.deferred.Store(false)
		ls.flushDirty()
	}
}

// flushDirty hands on every unbuffered log's lines.
func (ls *loopState) flushDirty() {
	for i, p := range ls.dirty {
		p.dirty = false
		ls.handOff(p)
		ls.dirty[i] = nil
	}
	ls.dirty = ls.dirty[:0]
}

// handOff gives p's buffer to the writer, or drops its lines (counting them) when
// the writer is behind.
func (ls *loopState) handOff(p *pending) {
	ls.takeBack()
	if p.buf == nil || p.lines == 0 {
		return
	}
	if p.timerOn {
		p.timer.Stop()
		p.timerOn = false
	}
	if ls.out < maxInflight {
		select {
		case ls.wr.in <- chunk{s: p.s, buf: p.buf, lines: p.lines, gzip: p.gzip, poll: p.poll, ls: ls}:
			ls.out++
			p.buf, p.lines = nil, 0
			ls.wr.wakeIfBehind()
			return
		default:
		}
	}
	ls.stats.dropped.Store(ls.stats.dropped.Load() + uint64(p.lines))
	p.buf, p.lines = p.buf[:0], 0
}

// takeBack returns the buffers the writer is done with to the loop's pool.
func (ls *loopState) takeBack() {
	// Only the loop receives: a buffer counted is there (len, unlike a select,
	// takes no lock).
	for len(ls.back) > 0 {
		b := <-ls.back
		ls.out--
		ls.loop.Pool().Put(b[:cap(b)])
	}
}

// flushAll hands on every buffer (reload, reopen, stop).
func (ls *loopState) flushAll() {
	ls.stats.lines.Store(ls.lines)
	ls.flushDirty()
	for _, p := range ls.pend {
		if p != nil {
			ls.handOff(p)
		}
	}
}

// flushLoops has every loop hand on what it buffered, on its own thread (or here,
// for a loop that exited), and waits for it.
func flushLoops() {
	loops.mu.Lock()
	all := append([]*loopState(nil), loops.all...)
	loops.mu.Unlock()
	for _, ls := range all {
		// A loop that exited handed everything on as it did (exit).
		done := make(chan struct{})
		if ls.loop.Run(func() { ls.flushAll(); close(done) }) != nil {
			continue
		}
		select {
		case <-done:
		case <-ls.loop.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

// Flush writes out everything the loops buffered and waits until the writers
// wrote it: at exit, after the loops stopped or drained.
func Flush() {
	flushLoops()
	syncWriters()
}

// Stats are the access log's counters of one NUMA domain, summed over its loops.
// Lines were formatted; each then was Written, Dropped (its loop's writer was
// behind: a slow or full disk) or Failed (the write or send failed), or is still
// on its way.
type Stats struct {
	Domain                          int
	Lines, Written, Dropped, Failed uint64
}

// DomainStats returns the counters per domain, for metrics; it takes no lock the
// loops take.
func DomainStats() []Stats {
	loops.mu.Lock()
	defer loops.mu.Unlock()
	var out []Stats
	for _, ls := range loops.all {
		i := 0
		for i < len(out) && out[i].Domain != ls.domain {
			i++
		}
		if i == len(out) {
			out = append(out, Stats{Domain: ls.domain})
		}
		st := &out[i]
		st.Lines += ls.stats.lines.Load()
		st.Written += ls.stats.written.Load()
		st.Dropped += ls.stats.dropped.Load()
		st.Failed += ls.stats.failed.Load()
	}
	return out
}

// LogStats writes the counters of each domain to log, as the instance does for the
// other per-domain counters at exit and on USR1.
func LogStats(log *slog.Logger) {
	for _, st := range DomainStats() {
		level := slog.LevelInfo
		if st.Dropped > 0 || st.Failed > 0 {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "access log", "domain", st.Domain, "lines", st.Lines, "written", st.Written,
			"dropped", st.Dropped, "failed", st.Failed)
	}
}
