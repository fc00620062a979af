package httpcore

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// Answers the client must be able to read although it is still sending. Closing a
// socket with unread input makes the kernel reset the connection, and a reset
// destroys what the client had not read yet of the answer. As nginx: the body of a
// request answered without it is read and dropped (ngx_http_discard_request_body),
// so the connection can even carry the next request; and a connection closed while
// input may still come closes lingering (ngx_http_set_lingering_close): sending is
// shut down, then input is read and dropped until the client ends, lingering_timeout
// passes without input, or lingering_time is over.

// bodyUnread reports a request body announced in a parsed head and not (wholly)
// read: still on the wire, or cut short while it was read.
func (c *conn) bodyUnread() bool {
	if c.state == csBody {
		return true
	}
	return c.headLen > 0 && c.bodyFate <= bodyRefused && (c.req.Chunked() || c.req.ContentLength() > 0)
}

// discardBody starts dropping the body of a request answered without it, before
// the answer is sent. When the body is all here already the state is csWait (the
// request can finish); else csDiscard: the connection reads on and the request
// finishes when the body ends. It reports false for invalid chunked framing (the
// state is csWait, nothing more is dropped).
func (c *conn) discardBody() bool {
	r := &c.req
	c.bodyFate = bodyTaken
	if r.Chunked() {
		c.body = BodyChunked
		c.chunks.Reset()
		c.chunks.MaxOverhead = c.lcf.LargeHeaderBuffers * c.lcf.LargeHeaderBufferSize
	} else {
		c.body = BodyLength
		c.bodyLen = http1.NewLengthBody(r.ContentLength())
	}
	pending := c.in[c.headLen:]
	c.in = c.in[:c.headLen]
	c.state = csDiscard
	c.lingerUntil = monoNow() + c.lcf.LingeringTime
	c.setLingerTimer(c.lcf.LingeringTimeout)
	c.paused = false
	c.conn.ResumeRead() // also after a pause for a pending's backpressure (PauseBody)
	if _, err := c.dropBody(pending); err != nil {
		c.state = csWait
		c.conn.SetTimeout(0)
		return false
	}
	return true
}

// bufferedChunksValid reports whether the part of a chunked body that came with the
// head is valid framing so far (a body with a length always is).
func (c *conn) bufferedChunksValid() bool {
	if !c.req.Chunked() {
		return true
	}
	d := http1.ChunkedDecoder{MaxOverhead: c.lcf.LargeHeaderBuffers * c.lcf.LargeHeaderBufferSize}
	for data := c.in[c.headLen:]; len(data) > 0 && !d.Done(); {
		n, _, err := d.Decode(data)
		if err != nil {
			return false
		}
		data = data[n:]
	}
	return true
}

// discardMore drops body bytes that arrived in csDiscard. nginx gives up (closes)
// when the body stops coming for lingering_timeout or is not over by lingering_time.
func (c *conn) discardMore(data []byte) {
	done, err := c.dropBody(data)
	switch {
	case err != nil:
		c.closeAfterFlush()
	case done:
		c.finish()
	default:
		if left := c.lingerUntil - monoNow(); left > 0 {
			c.setLingerTimer(min(c.lcf.LingeringTimeout, left))
		} else {
			c.closeAfterFlush()
		}
	}
}

// dropBody drops data up to the end of the body; what follows is the next request's
// and is kept. It reports whether the body ended, or invalid chunked framing.
func (c *conn) dropBody(data []byte) (bool, error) {
	done := false
	for len(data) > 0 && !done {
		switch c.body {
		case BodyLength:
			data = data[len(c.bodyLen.Take(data)):]
			done = c.bodyLen.Done()
		case BodyChunked:
			n, _, err := c.chunks.Decode(data)
			if err != nil {
				return false, err
			}
			data = data[n:]
			done = c.chunks.Done()
		}
	}
	if !done {
		return false, nil
	}
	c.bodyFate = bodyDropped
	c.state = csWait
	c.conn.SetTimeout(0)
	if len(data) > 0 {
		c.keep(data)
	}
	return true, nil
}

// monoStart is the origin of monoNow, the monotonic clock as a Duration: a
// connection keeps the end of lingering_time in 8 bytes rather than a 24-byte
// time.Time.
var monoStart = time.Now()

func monoNow() time.Duration { return time.Since(monoStart) }

// msecNow is the loop's cached time in milliseconds of monoNow's clock, cut to 32
// bits (conn.opened): as nginx's ngx_current_msec, read once per event batch.
func (w *Worker) msecNow() uint32 { return uint32(w.loop.Now().Sub(monoStart).Milliseconds()) }

// setLingerTimer arms the read timer for d; 0 means at once, as for nginx.
func (c *conn) setLingerTimer(d time.Duration) {
	c.conn.SetTimeout(max(d, time.Nanosecond))
}

// shouldLinger reports whether closing after the current request lingers: with
// lingering_close on, when input may still come (a body not read or dropped whole,
// pipelined bytes, bytes waiting in the socket); always, after any request; never with
// off. A connection that timed out (408) closes at once.
func (c *conn) shouldLinger() bool {
	if c.Request == nil || c.state == csTunnel || c.status == 408 {
		return false
	}
	switch c.lcf.LingeringClose {
	case LingeringOff:
		return false
	case LingeringAlways:
		return true
	}
	if c.state == csBody || c.headLen > 0 && len(c.in) > int(c.headLen) {
		return true
	}
	// nginx's r->lingering_close: set for a request with a body until it is dropped
	// whole; not after a 400 for a request that had not started reading it.
	if c.headLen > 0 && c.bodyFate != bodyDropped && c.status != 400 && (c.req.Chunked() || c.req.ContentLength() > 0) {
		return true
	}
	// nginx's rev->ready: known without a system call on a plain connection
	// (one ioctl per closed connection otherwise); FIONREAD when it is not.
	if ir, ok := c.conn.(eventloop.InputReadier); ok {
		if ready, known := ir.InputReady(); known {
			return ready
		}
	}
	n, err := unix.IoctlGetInt(c.conn.Fd(), unix.TIOCINQ)
	return err == nil && n > 0
}

// closesAfter reports whether the connection closes once the current response is
// complete (finish) because the client asked for it ("Connection: close", HTTP/1.0
// without keep-alive): such a client sends nothing more (RFC 9112 §9.6), so the
// response's last bytes can wait for the FIN and go out with it (a close the server
// chooses may meet input still coming, whose reset would drop them).
func (c *conn) closesAfter() bool {
	return c.sub == nil && !c.keepAlive && !c.req.KeepAlive()
}

// linger closes the way nginx's lingering close does: sending is shut down once the
// answer is out, and input read and dropped until the client ends.
func (c *conn) linger() {
	c.state = csLinger
	c.release()
	c.paused = false
	c.conn.ResumeRead()
	c.conn.CloseWrite()
	c.lingerUntil = monoNow() + c.lcf.LingeringTime
	c.setLingerTimer(c.lcf.LingeringTimeout)
}

// lingerRead: input arrived while lingering; it was dropped.
func (c *conn) lingerRead() {
	if c.conn.Queued() > 0 {
		// lingering_time runs from the end of the answer, whose sending the write
		// timeout bounds.
		c.lingerUntil = monoNow() + c.lcf.LingeringTime
	}
	left := c.lingerUntil - monoNow()
	if left <= 0 {
		c.closeAfterFlush()
		return
	}
	c.setLingerTimer(min(c.lcf.LingeringTimeout, left))
}

// lingerTimedOut: no input for lingering_timeout (or lingering_time is over).
func (c *conn) lingerTimedOut() {
	if c.conn.Queued() > 0 {
		c.lingerRead() // still sending the answer: lingering has not begun
		return
	}
	c.closeAfterFlush()
}
