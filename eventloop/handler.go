package eventloop

import (
	"net/netip"
	"time"
)

// Handler is what a protocol layer implements. Every method runs on the loop
// thread that owns the connection; none may block.
type Handler interface {
	// OnOpen runs once an accepted connection is registered or an outbound
	// connect succeeded.
	OnOpen(c Conn)
	// OnData delivers received bytes. data is the loop's scratch buffer and is
	// valid only during the call: copy what must be kept, or consume it in place.
	OnData(c Conn, data []byte)
	// OnWriteBlocked runs when the outbound queue grows above the high
	// watermark (possibly from inside c.Write): stop producing for c, e.g.
	// PauseRead the connection feeding it.
	OnWriteBlocked(c Conn)
	// OnWritable runs when the outbound queue fell back to the low watermark
	// after OnWriteBlocked.
	OnWritable(c Conn)
	// OnTimeout runs when the timer armed by c.SetTimeout fires.
	OnTimeout(c Conn)
	// OnClose runs once when the connection is gone, with why: io.EOF for an
	// orderly close by the peer, nil for Close, ErrDialTimeout or a wrapped
	// errno for a failed connect (then without OnOpen before it), ErrStopped,
	// ErrDraining, ErrDrainTimeout, ErrReused, a *PanicError, or a wrapped I/O error.
	OnClose(c Conn, err error)
}

// Conn is a connection as a Handler sees it. *Loop's TCP connections
// implement it; a TLS layer can wrap one and implement it again. Methods must
// be called on the owning loop's thread.
type Conn interface {
	// Write sends p now as far as the socket takes it and queues the rest
	// (copied into pool buffers); it never blocks and accepts all of p unless
	// the connection failed or is closing.
	Write(p []byte) (int, error)
	// Writev is Write for several buffers, sent with one writev.
	Writev(bufs [][]byte) (int, error)
	// CloseWrite shuts the sending side down (the peer reads EOF) once the
	// outbound queue (file segments included) is sent; reading goes on until Close.
	// Writes then fail.
	CloseWrite()
	// WriteFile queues the n bytes of the regular file fd from offset off after
	// what is queued, and sends them now as far as the socket takes them (with
	// sendfile(2), or read into pool buffers: SetSendfile), the rest as it drains.
	// The connection keeps a duplicate of fd for the part it queues: the caller may
	// close fd as soon as WriteFile returns. A file refused (fstat failed, not a
	// regular file, a range beyond its size) is an error that leaves the
	// connection as it was; any other error (no descriptor for the duplicate, a
	// send error) fails the connection as a failed Write does. A file that shrinks
	// while queued closes the connection with an error wrapping ErrFileTruncated.
	// Queued and the watermarks count the file bytes not yet sent.
	WriteFile(fd int, off, n int64) error
	// SetSendfile says how file segments are sent from now on: with sendfile(2)
	// if on, else read with pread into pool buffers as the socket drains (a
	// wrapper that cannot hand files to the kernel reads them: FileSegment); at
	// most maxChunk file bytes per readiness event, 0 for no bound. nginx's
	// sendfile and sendfile_max_chunk; the default is the loop's Config.
	SetSendfile(on bool, maxChunk int)
	// Close flushes the outbound queue (file segments included), then closes;
	// reading stops at once. Calling it again before the queue drained closes at
	// once, dropping what is left (and the queue's file descriptors).
	Close() error
	// PauseRead stops delivering OnData (the socket is no longer polled for input).
	PauseRead()
	// ResumeRead undoes PauseRead.
	ResumeRead()
	// SetIdle marks the connection as idle (waiting for a new request, or cached
	// for reuse) or busy. Idle connections cost nothing to close: Drain closes
	// them at once and waits for busy ones, and a loop that runs out of connections
	// (MaxConns) or fds closes the oldest idle ones to make room (ErrReused).
	// Marking an idle connection idle again makes it the newest.
	SetIdle(idle bool)
	// SetTimeout arms the connection's timer to call OnTimeout after d,
	// replacing any previous deadline; d <= 0 cancels it.
	SetTimeout(d time.Duration)
	// Queued returns the number of bytes waiting in the outbound queue, file
	// bytes not yet sent included.
	Queued() int
	// SetWriteTimeout closes the connection (OnClose with ErrWriteTimeout) when
	// queued output waits d without the socket taking any of it: the timer runs
	// while output is queued, restarts whenever some is sent, and keeps running
	// through a graceful Close. d <= 0 turns it off (the default).
	SetWriteTimeout(d time.Duration)
	// SetResetOnWriteTimeout makes a write timeout reset the connection (see Reset)
	// instead of closing it with a FIN.
	SetResetOnWriteTimeout(on bool)
	// Reset closes at once with an RST (SO_LINGER 0) instead of a FIN, dropping
	// what is queued, so the kernel frees the socket's buffers at once: nginx's
	// reset_timedout_connection.
	Reset()
	// SetRateLimit limits the rate output goes out at from now on, nginx's
	// limit_rate: after bytes at once, then rate bytes per second with one second's
	// worth in advance (nginx's formula); the queue holds the rest, so the
	// watermarks push back on what feeds it. rate <= 0 lifts the limit.
	SetRateLimit(rate, after int64)
	// SetWriteWatermarks gives this connection its own watermarks: OnWriteBlocked
	// once more than high bytes are queued, OnWritable once at most low are (low is
	// capped at high-1, at least 0). high <= 0 restores the loop's
	// WriteHighWater/WriteLowWater. The new marks apply from the next write or flush.
	SetWriteWatermarks(high, low int)
	// Fd returns the socket's file descriptor.
	Fd() int
	LocalAddr() netip.AddrPort
	RemoteAddr() netip.AddrPort
	// Context returns the value stored by SetContext.
	Context() any
	// SetContext stores a value for the handler's own use.
	SetContext(v any)
	// Loop returns the loop that owns the connection.
	Loop() *Loop
}

// InputReadier is implemented by the loop's own TCP connections (not by layers
// that wrap them): whether input may be waiting in the socket, as nginx's
// rev->ready says it without a system call. ready: the last read filled the read
// buffer, so more may wait; a shorter read found the socket drained then, and
// anything that came since will be reported by the next wait. known is false
// before the first read and after PauseRead (input may have come unreported):
// ask the kernel (FIONREAD).
type InputReadier interface {
	InputReady() (ready, known bool)
}
