package proxyproto

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

type connState uint8

const (
	stateHeader connState = iota // waiting for the header; the inner handler has not seen the conn
	stateOpen                    // the inner handler has it
	stateClosed
)

// Conn is a connection whose PROXY protocol header has been read, as the inner
// handler sees it: RemoteAddr is the header's source (the real peer's address
// when the header carries none, or with Options.KeepPeerAddr), Header holds the
// rest. Everything else is the underlying connection's. Its methods must be
// called on the loop's thread.
type Conn struct {
	raw     eventloop.Conn
	layer   *Layer
	state   connState
	paused  bool // the inner handler's PauseRead
	closing bool // the inner handler's Close: no more input for it
	remote  netip.AddrPort
	hdr     Header
	ctx     any

	pending  []byte // a header split across reads, so far
	held     []byte // input after the header, kept while the inner handler pauses
	kick     eventloop.Timer
	kickInit bool
}

var _ eventloop.Conn = (*Conn)(nil)

// onHeaderData reads the header from the input; what follows it goes to the
// inner handler, which gets the connection once the header is whole.
func (c *Conn) onHeaderData(data []byte) {
	if c.state != stateHeader {
		return
	}
	limit := c.layer.opts.MaxHeader
	in, old := data, len(c.pending)
	if old > 0 {
		// Never more than a header can hold: the rest is still in data.
		take := min(len(data), max(limit, MaxV1Header)-old)
		c.pending = append(c.pending, data[:take]...)
		in = c.pending
	}
	h, n, err := Parse(in, limit)
	switch {
	case err == ErrIncomplete:
		if old == 0 {
			c.pending = append(make([]byte, 0, max(2*len(data), 128)), data...)
		}
		return
	case err != nil:
		c.log(slog.LevelError, Describe(err, in))
		c.fail()
		return
	}
	switch {
	case !h.retained():
		h.b = nil
	case old == 0:
		h = h.Clone() // out of the loop's read buffer
	}
	c.pending = nil // h keeps what it needs of it
	c.open(h, data[n-old:])
}

// open hands the connection to the inner handler, then what came after the header.
func (c *Conn) open(h Header, rest []byte) {
	c.hdr = h
	c.remote = c.raw.RemoteAddr()
	if h.addrs && !c.layer.opts.KeepPeerAddr {
		c.remote = h.Source
	}
	c.raw.SetTimeout(0)
	c.state = stateOpen
	c.layer.inner.OnOpen(c)
	if len(rest) == 0 || c.state != stateOpen || c.closing {
		return
	}
	if c.paused {
		c.held = append([]byte(nil), rest...)
		return
	}
	c.layer.inner.OnData(c, rest)
}

// fail closes a connection without a valid header.
func (c *Conn) fail() {
	c.pending = nil
	c.state = stateClosed
	_ = c.raw.Close()
}

func (c *Conn) log(level slog.Level, msg string) {
	if l := c.raw.Loop(); l != nil {
		l.Logger().Log(context.Background(), level, msg, "client", c.raw.RemoteAddr().String())
	}
}

// onKick gives the inner handler the input it paused before taking, once it
// resumed (not from inside its ResumeRead call).
func (c *Conn) onKick(*eventloop.Timer) {
	if c.state != stateOpen || c.paused || c.closing || len(c.held) == 0 {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			_ = c.raw.Close()
			_ = c.raw.Close() // the second closes at once
			panic(r)
		}
	}()
	data := c.held
	c.held = nil
	c.layer.inner.OnData(c, data)
	if c.state == stateOpen && !c.paused {
		c.raw.ResumeRead()
	}
}

// Header returns the connection's PROXY protocol header.
func (c *Conn) Header() *Header { return &c.hdr }

// Raw returns the underlying connection (its RemoteAddr is the real peer's).
func (c *Conn) Raw() eventloop.Conn { return c.raw }

// HeaderOf returns the PROXY protocol header under c, looking through layers
// above this one that expose Raw() (TLS), or nil.
func HeaderOf(c eventloop.Conn) *Header {
	for c != nil {
		if pc, ok := c.(*Conn); ok {
			return &pc.hdr
		}
		r, ok := c.(interface{ Raw() eventloop.Conn })
		if !ok {
			return nil
		}
		c = r.Raw()
	}
	return nil
}

// RemoteAddr implements eventloop.Conn: the header's source, unless KeepPeerAddr.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// LocalAddr implements eventloop.Conn: the socket's own address, as nginx's
// $server_addr (the listen address routing looks up); the header's destination
// is Header().Destination.
func (c *Conn) LocalAddr() netip.AddrPort { return c.raw.LocalAddr() }

// Write implements eventloop.Conn.
func (c *Conn) Write(p []byte) (int, error) { return c.raw.Write(p) }

// Writev implements eventloop.Conn.
func (c *Conn) Writev(bufs [][]byte) (int, error) { return c.raw.Writev(bufs) }

// CloseWrite implements eventloop.Conn.
func (c *Conn) CloseWrite() { c.raw.CloseWrite() }

// WriteFile implements eventloop.Conn.
func (c *Conn) WriteFile(fd int, off, n int64) error { return c.raw.WriteFile(fd, off, n) }

// WritevFileSized is the raw connection's WritevFileSized (bytes and a file's
// first bytes in one writev, the file's size from the caller's fstat) when it
// has one, else Writev then WriteFile.
func (c *Conn) WritevFileSized(bufs [][]byte, fd int, off, n, size int64) error {
	if fw, ok := c.raw.(interface {
		WritevFileSized(bufs [][]byte, fd int, off, n, size int64) error
	}); ok {
		return fw.WritevFileSized(bufs, fd, off, n, size)
	}
	if _, err := c.raw.Writev(bufs); err != nil {
		return err
	}
	return c.raw.WriteFile(fd, off, n)
}

// SetSendfile implements eventloop.Conn.
func (c *Conn) SetSendfile(on bool, maxChunk int) { c.raw.SetSendfile(on, maxChunk) }

// Close implements eventloop.Conn.
func (c *Conn) Close() error {
	c.closing = true
	c.held = nil
	return c.raw.Close()
}

// PauseRead implements eventloop.Conn.
func (c *Conn) PauseRead() {
	c.paused = true
	c.raw.PauseRead()
}

// ResumeRead implements eventloop.Conn.
func (c *Conn) ResumeRead() {
	c.paused = false
	if len(c.held) > 0 {
		// The socket stays paused until the kick delivered what is held.
		if !c.kickInit {
			c.raw.Loop().InitTimer(&c.kick, c.onKick)
			c.kickInit = true
		}
		c.kick.Reset(0)
		return
	}
	c.raw.ResumeRead()
}

// SetIdle implements eventloop.Conn.
func (c *Conn) SetIdle(idle bool) { c.raw.SetIdle(idle) }

// SetTimeout implements eventloop.Conn.
func (c *Conn) SetTimeout(d time.Duration) { c.raw.SetTimeout(d) }

// Queued implements eventloop.Conn.
func (c *Conn) Queued() int { return c.raw.Queued() }

// SetWriteTimeout implements eventloop.Conn.
func (c *Conn) SetWriteTimeout(d time.Duration) { c.raw.SetWriteTimeout(d) }

// SetResetOnWriteTimeout implements eventloop.Conn.
func (c *Conn) SetResetOnWriteTimeout(on bool) { c.raw.SetResetOnWriteTimeout(on) }

// SetRateLimit implements eventloop.Conn (on the bytes on the wire).
func (c *Conn) SetRateLimit(rate, after int64) { c.raw.SetRateLimit(rate, after) }

// Reset implements eventloop.Conn: no close_notify, as nginx after a timeout.
func (c *Conn) Reset() { c.raw.Reset() }

// SetWriteWatermarks implements eventloop.Conn.
func (c *Conn) SetWriteWatermarks(high, low int) { c.raw.SetWriteWatermarks(high, low) }

// Fd implements eventloop.Conn.
func (c *Conn) Fd() int { return c.raw.Fd() }

// Context implements eventloop.Conn.
func (c *Conn) Context() any { return c.ctx }

// SetContext implements eventloop.Conn.
func (c *Conn) SetContext(v any) { c.ctx = v }

// Loop implements eventloop.Conn.
func (c *Conn) Loop() *eventloop.Loop { return c.raw.Loop() }
