package proxyproto

import (
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// Options tune a Layer; zero values take the defaults noted.
type Options struct {
	// Timeout bounds the wait for the header from the accept (nginx's
	// proxy_protocol_timeout); default 30s.
	Timeout time.Duration
	// MaxHeader bounds a version 2 header, TLVs included; default
	// DefaultMaxHeader. Version 1 headers are at most MaxV1Header bytes.
	MaxHeader int
	// Expect says whether connections to a local address start with a header
	// (the listen sockets marked proxy_protocol); nil: every connection.
	// The others go to the inner handler untouched.
	Expect func(local netip.AddrPort) bool
	// TimeoutFor, when set, gives the timeout for connections to a local address
	// (0: Timeout).
	TimeoutFor func(local netip.AddrPort) time.Duration
	// KeepPeerAddr leaves the Conn's RemoteAddr the real peer's (the load
	// balancer's), as nginx's $remote_addr is without the realip module's
	// "real_ip_header proxy_protocol"; the header's source is then only in Header.
	KeepPeerAddr bool
}

// Layer reads the PROXY protocol header of each connection of one loop before
// its inner handler sees the connection: it is the loop's Handler (or the
// handler under a TLS layer: the header comes before the TLS handshake) and
// hands the inner handler a *Conn. Everything in it runs on its loop.
type Layer struct {
	inner eventloop.Handler
	opts  Options
}

var _ eventloop.Handler = (*Layer)(nil)

// NewLayer makes the layer of one loop around inner.
func NewLayer(inner eventloop.Handler, opts Options) *Layer {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxHeader <= 0 {
		opts.MaxHeader = DefaultMaxHeader
	}
	return &Layer{inner: inner, opts: opts}
}

// OnOpen implements eventloop.Handler.
func (l *Layer) OnOpen(raw eventloop.Conn) {
	if l.opts.Expect != nil && !l.opts.Expect(raw.LocalAddr()) {
		l.inner.OnOpen(raw)
		return
	}
	c := &Conn{raw: raw, layer: l}
	raw.SetContext(c)
	timeout := l.opts.Timeout
	if l.opts.TimeoutFor != nil {
		if d := l.opts.TimeoutFor(raw.LocalAddr()); d > 0 {
			timeout = d
		}
	}
	raw.SetTimeout(timeout)
}

// OnData implements eventloop.Handler. Once the header is read this is the
// whole cost of the layer for each read: a type assertion and a call.
func (l *Layer) OnData(raw eventloop.Conn, data []byte) {
	if c, ok := raw.Context().(*Conn); ok {
		if c.state == stateOpen {
			l.inner.OnData(c, data)
			return
		}
		c.onHeaderData(data)
		return
	}
	l.inner.OnData(raw, data)
}

// OnWriteBlocked implements eventloop.Handler.
func (l *Layer) OnWriteBlocked(raw eventloop.Conn) {
	if c, ok := raw.Context().(*Conn); ok {
		if c.state == stateOpen {
			l.inner.OnWriteBlocked(c)
		}
		return
	}
	l.inner.OnWriteBlocked(raw)
}

// OnWritable implements eventloop.Handler.
func (l *Layer) OnWritable(raw eventloop.Conn) {
	if c, ok := raw.Context().(*Conn); ok {
		if c.state == stateOpen {
			l.inner.OnWritable(c)
		}
		return
	}
	l.inner.OnWritable(raw)
}

// OnTimeout implements eventloop.Handler.
func (l *Layer) OnTimeout(raw eventloop.Conn) {
	if c, ok := raw.Context().(*Conn); ok {
		if c.state == stateOpen {
			l.inner.OnTimeout(c)
			return
		}
		// nginx's stream module words it so (proxy_protocol_timeout).
		c.log(slog.LevelInfo, "client timed out (110: Connection timed out) while reading PROXY protocol")
		c.fail()
		return
	}
	l.inner.OnTimeout(raw)
}

// OnClose implements eventloop.Handler.
func (l *Layer) OnClose(raw eventloop.Conn, err error) {
	if c, ok := raw.Context().(*Conn); ok {
		c.onClose(err)
		return
	}
	l.inner.OnClose(raw, err)
}

// onClose ends c; the inner handler hears of it only if it had the connection.
func (c *Conn) onClose(err error) {
	state, pending := c.state, c.pending
	c.state = stateClosed
	c.pending, c.held = nil, nil
	if c.kickInit {
		c.kick.Stop()
	}
	switch state {
	case stateOpen:
		c.layer.inner.OnClose(c, err)
	case stateHeader:
		if err == io.EOF && len(pending) > 0 {
			c.log(slog.LevelError, Describe(ErrBroken, pending)) // a truncated header
		}
	}
}
