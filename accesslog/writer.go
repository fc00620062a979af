package accesslog

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/numa"
	"golang.org/x/sys/unix"
)

// chunk is a loop's buffer of whole lines (records for syslog and variable paths)
// handed to its domain's writer. The buffer goes back to the loop (back) once
// written.
type chunk struct {
	s     *sink
	buf   []byte
	lines int
	gzip  int           // compress the buffer as a gzip member of this level
	poll  bool          // lines of a log without buffer=: more will follow soon
	ls    *loopState    // where the buffer goes back
	sync  chan struct{} // a marker, not lines: closed once what came before is written
}

// queueLen is how many chunks a domain's writer may have waiting. A loop also
// bounds its own chunks in flight (maxInflight); when either is full, the lines
// of the chunk are dropped and counted rather than the loop waiting for the disk.
const queueLen = 1024

// writer writes the chunks of one NUMA domain's loops, off the loops, on a
// thread kept on the domain's CPUs, so that a slow or full disk stalls no loop.
type writer struct {
	domain int
	in     chan chunk
	log    *slog.Logger
	naps   atomic.Uint64 // polls: tests count them
	tid    atomic.Int32  // the writer's thread

	// napSeq is the futex word of the writer's naps (see pollInterval): a loop
	// that finds wakeBacklog chunks queued while napping is set bumps it and wakes
	// the writer.
	napSeq  atomic.Uint32
	napping atomic.Bool

	cpuMu  sync.Mutex
	cpus   numa.CPUSet
	cpusUp atomic.Bool // cpus changed: apply them

	gz      [10]*flate.Writer // by level
	gzBuf   bytes.Buffer
	iov     [][]byte
	batch   []chunk
	dyn     dynCache
	dynDrop atomic.Bool // Reopen: close the cached descriptors
	lastErr time.Time
}

var writers struct {
	mu sync.Mutex
	by map[int]*writer
}

// writerFor is domain d's writer, started on first use; cpu is a CPU of one of
// its loops (the writer's thread stays on the domain's CPUs).
func writerFor(d, cpu int, log *slog.Logger) *writer {
	writers.mu.Lock()
	defer writers.mu.Unlock()
	if writers.by == nil {
		writers.by = map[int]*writer{}
	}
	w := writers.by[d]
	if w == nil {
		w = &writer{domain: d, in: make(chan chunk, queueLen), log: log}
		writers.by[d] = w
		eventloop.ReserveP() // see pollInterval
		go w.run()
	}
	if cpu >= 0 {
		w.cpuMu.Lock()
		w.cpus.Set(cpu)
		w.cpuMu.Unlock()
		w.cpusUp.Store(true)
	}
	return w
}

// pollInterval and pollIdle: once lines of a log without buffer= come, the writer
// looks for more every pollInterval instead of sleeping until a hand-off wakes it,
// until it found none pollIdle times in a row. A wake-up for every hand-off (every
// event batch) would cost a context switch on the loop's CPU per batch, and a Go
// wake-up of a thread locked to its OS thread goes through the scheduler
// (futexes on three threads); a poll takes what came in the meantime. Each poll
// costs the process about 25 µs of CPU (the wake-up of the thread, the writev),
// whatever it finds: polling every millisecond was 0.35 to 0.6 µs per line at
// 50,000 lines a second, more than the formatting; every 5 ms a fifth of it, and
// a line still reaches the kernel within about 10 ms of its batch (5 ms to be
// handed on while the writer holds the loop's previous buffer, 5 to be taken). A
// log with buffer= hands on a full buffer now and then (every few hundred lines):
// the send on in wakes the writer parked on it. A send while the writer polls
// wakes nothing, unless wakeBacklog chunks wait: then the loop that sent the
// last one wakes the writer's nap (a futex), so that a fast loop does not run out
// of buffers (maxInflight) between polls.
//
// The poll is a futex wait the scheduler does not see (as a HoldP loop's
// epoll_wait), not time.Sleep: with the goroutine locked to its thread, each
// time.Sleep handed its P to another thread, which ran the timer and handed the
// P back (futexes both ways): 13% of the process's CPU under a keep-alive load
// with an unbuffered log. A visible system call instead (unix.Nanosleep) had
// sysmon take the P away during the naps and wake every 20 µs (14%). So the
// writer holds a P of its own (eventloop.ReserveP). Unlike a loop it does not
// yield: sysmon preempts it every 10 ms or so (a signal, then the P handed
// between threads), and a nap or a write it interrupts waits for nothing; a
// runtime.Gosched every 6 naps, as a loop does, cost more (process CPU per nap
// on a locked thread, this machine: time.Sleep 42-74 µs, raw nanosleep 23-30
// µs, with a Gosched every 6 naps 30-33 µs).
//
// Without HoldP loops (tests on an eventloop.Loop of their own), the writer
// sleeps with time.Sleep: holding one of GOMAXPROCS's Ps in naps, it made a
// keep-alive round trip of BenchmarkLoggedRequest take 300 µs instead of 20
// (GOMAXPROCS 2 or 3; with 4, 14 µs).
const (
	pollInterval = 5 * time.Millisecond
	pollIdle     = 20
	wakeBacklog  = 16
)

// Linux futex operations (golang.org/x/sys/unix has the call, not these).
const (
	futexWaitPrivate = 0 | 128
	futexWakePrivate = 1 | 128
)

func (w *writer) run() {
	runtime.LockOSThread()
	w.tid.Store(int32(unix.Gettid()))
	for c := range w.in {
		if !w.write(c) {
			continue
		}
		for idle := 0; idle < pollIdle; {
			w.nap()
			select {
			case c := <-w.in:
				if w.write(c) {
					idle = 0
				} else {
					idle++
				}
			default:
				idle++
			}
		}
	}
}

// nap sleeps pollInterval in a system call the scheduler does not see (see
// pollInterval), or until a loop wakes it (wakeIfBehind).
func (w *writer) nap() { w.napFor(pollInterval) }

func (w *writer) napFor(d time.Duration) {
	w.naps.Add(1)
	if !eventloop.ReservedP() {
		time.Sleep(d)
		return
	}
	seq := w.napSeq.Load()
	w.napping.Store(true)
	if len(w.in) < wakeBacklog {
		// Returns at once if a loop bumped napSeq since it was read.
		ts := unix.NsecToTimespec(d.Nanoseconds())
		unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&w.napSeq)), futexWaitPrivate, uintptr(seq),
			uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
	w.napping.Store(false)
}

// wakeIfBehind runs on a loop after it queued a chunk: when wakeBacklog chunks
// wait and the writer naps, it wakes it (one futex wake, which never blocks).
func (w *writer) wakeIfBehind() {
	if len(w.in) >= wakeBacklog && w.napping.CompareAndSwap(true, false) {
		w.napSeq.Add(1)
		unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&w.napSeq)), futexWakePrivate, 1, 0, 0, 0)
	}
}

// write writes c and what else is queued, each file's chunks with one writev; it
// reports whether lines of a log without buffer= were among them (poll).
func (w *writer) write(c chunk) bool {
	w.pin()
	if w.dynDrop.Swap(false) {
		w.dyn.closeAll()
	}
	w.batch = append(w.batch[:0], c)
gather:
	for len(w.batch) < 256 {
		select {
		case c := <-w.in:
			w.batch = append(w.batch, c)
		default:
			break gather
		}
	}
	poll := false
	for i := range w.batch {
		poll = poll || w.batch[i].poll
	}
	w.writeBatch()
	return poll
}

// pin moves the writer's thread to its domain's CPUs when loops of the domain
// were added.
func (w *writer) pin() {
	if !w.cpusUp.Load() {
		return
	}
	w.cpusUp.Store(false)
	w.cpuMu.Lock()
	set := w.cpus
	w.cpuMu.Unlock()
	if err := numa.SetThreadAffinity(0, set); err != nil {
		w.log.Warn("access log writer: sched_setaffinity failed", "domain", w.domain, "error", err.Error())
	}
}

// writeBatch writes the gathered chunks, those of one file together, in order.
func (w *writer) writeBatch() {
	b := w.batch
	for i := 0; i < len(b); i++ {
		c := &b[i]
		if c.sync != nil {
			close(c.sync)
			continue
		}
		if c.s == nil {
			continue // done with the file ones below
		}
		switch c.s.kind {
		case sinkFile:
			w.writeFile(b[i:])
		case sinkSyslog:
			w.writeSyslog(c)
			w.done(c, nil)
		case sinkDynamic:
			w.writeDynamic(c)
			w.done(c, nil)
		}
	}
}

// writeFile writes the chunks of b for b[0]'s file (b[0] and the later ones of the
// same file, until a sync marker) and marks them written.
func (w *writer) writeFile(b []chunk) {
	s := b[0].s
	w.iov = w.iov[:0]
	w.gzBuf.Reset()
	for i := range b {
		c := &b[i]
		if c.sync != nil {
			break
		}
		if c.s != s {
			continue
		}
		if c.gzip > 0 {
			// One member per chunk, as nginx writes one per buffer. (Plain and
			// gzip chunks of one file meet only after a reload switched it.)
			w.gzipMember(c.buf, c.gzip)
		} else {
			w.iov = append(w.iov, c.buf)
		}
	}
	if w.gzBuf.Len() > 0 {
		w.iov = append(w.iov, w.gzBuf.Bytes())
	}
	err := s.write(w.iov)
	clear(w.iov)
	for i := range b {
		c := &b[i]
		if c.sync != nil {
			break
		}
		if c.s != s {
			continue
		}
		w.done(c, err)
		c.s = nil
	}
	if err != nil {
		w.logError(err)
	}
}

// gzipMember appends p to gzBuf as one gzip member, as nginx writes a buffer of a
// gzip log: its own header (no name, no time, OS Unix), deflate, CRC-32 and length.
func (w *writer) gzipMember(p []byte, level int) {
	w.gzBuf.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3})
	z := w.gz[level]
	if z == nil {
		z, _ = flate.NewWriter(&w.gzBuf, level)
		w.gz[level] = z
	} else {
		z.Reset(&w.gzBuf)
	}
	z.Write(p)
	z.Close()
	var tail [8]byte
	binary.LittleEndian.PutUint32(tail[:4], crc32.ChecksumIEEE(p))
	binary.LittleEndian.PutUint32(tail[4:], uint32(len(p)))
	w.gzBuf.Write(tail[:])
}

// done counts a chunk's lines as written (or lost to err) and gives its buffer back
// to its loop.
func (w *writer) done(c *chunk, err error) {
	ls := c.ls
	if err != nil {
		ls.stats.failed.Add(uint64(c.lines))
	} else {
		ls.stats.written.Add(uint64(c.lines))
	}
	ls.back <- c.buf // never blocks: back holds as many as the loop lets out
	if ls.deferred.Load() && ls.deferred.CompareAndSwap(true, false) {
		ls.loop.Run(ls.wake) // lines wait for this buffer to come back
	}
}

func (w *writer) logError(err error) {
	// At most one report a second: a full disk fails every write.
	if now := time.Now(); now.Sub(w.lastErr) >= time.Second {
		w.lastErr = now
		w.log.Error("access log: " + err.Error())
	}
}

// writeSyslog sends each message of a syslog chunk: records of a 4-byte length and
// the message.
func (w *writer) writeSyslog(c *chunk) {
	p := c.s.peer
	failed := 0
	for rec := c.buf; len(rec) >= 4; {
		n := int(binary.LittleEndian.Uint32(rec))
		msg := rec[4 : 4+n]
		rec = rec[4+n:]
		if err := p.send(msg); err != nil {
			failed++
			w.logError(err)
		}
	}
	c.ls.stats.failed.Add(uint64(failed))
	c.lines -= failed
}

// syncWait bounds how long syncWriters waits for a writer (a stuck disk must not
// hold a reopen or the exit for ever).
const syncWait = 5 * time.Second

// syncWriters waits until every writer has written what was queued before, or
// syncWait.
func syncWriters() {
	writers.mu.Lock()
	var all []*writer
	for _, w := range writers.by {
		all = append(all, w)
	}
	writers.mu.Unlock()
	deadline := time.After(syncWait)
	for _, w := range all {
		done := make(chan struct{})
		select {
		case w.in <- chunk{sync: done}:
		case <-deadline:
			return
		}
		select {
		case <-done:
		case <-deadline:
			return
		}
	}
}
