package httpcore

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// BodyMode is how ReadBody reads a request body.
type BodyMode uint8

const (
	// StreamBody hands the data to the pending's BodyData as it arrives.
	StreamBody BodyMode = iota
	// BufferBody reads the body whole first, as nginx buffers request bodies: in
	// memory up to client_body_buffer_size, beyond it in an unlinked temporary file
	// in client_body_temp_path (TakeBody); then BodyEnd, BodyLength its length.
	BufferBody
	// CountBody reads the body whole and drops it, counting its bytes (BodyLength).
	CountBody
)

// BodyFraming sets up reading the request body and reports its framing: none (also
// for a request that goes on as GET), a Content-Length (BodyLength), or chunked. Its
// Content-Length was checked against client_max_body_size when the location was
// chosen; a chunked body is checked as it arrives.
func (r *Request) BodyFraming() BodyKind {
	req := &r.req
	r.bodyTotal, r.contentLength = 0, 0
	switch {
	case r.internalGET, r.c.sub != nil: // a subrequest has no body, as nginx's auth_request
		r.body = BodyNone
	case req.Chunked():
		r.body = BodyChunked
		r.chunks.Reset()
	case req.ContentLength() > 0:
		r.body = BodyLength
		r.bodyLen = http1.NewLengthBody(req.ContentLength())
		r.contentLength = req.ContentLength()
	default:
		r.body = BodyNone
	}
	return r.body
}

// Body is the body's framing as BodyFraming found it; BodyLength once a body read
// whole ended.
func (r *Request) Body() BodyKind { return r.body }

// BodyLength is the body's length: its Content-Length, or once a body read whole
// (BufferBody, CountBody) ended, the length read.
func (r *Request) BodyLength() int64 { return r.contentLength }

// ReadBody reads the request body framed by BodyFraming for p, which becomes the
// request's pending: the data goes to p.BodyData (StreamBody), or is read whole
// first; p.BodyEnd follows the last byte, or comes at once without a body. A client
// that asked for it gets 100 Continue first. An invalid or too large body is
// answered (400, 413) after p is aborted; a client that stops sending for
// client_body_timeout is closed.
func (r *Request) ReadBody(p Pending, mode BodyMode) {
	c := r.c
	r.pending = p
	if r.body == BodyNone {
		if r.req.ContentLength() == 0 && !r.internalGET && c.sub == nil && c.lcf.ClientBodyInFileOnly != BodyInFileOff {
			// Content-Length: 0 still gets its (empty) file, as nginx's.
			r.countOnly, r.inFileOnly = mode == CountBody, c.lcf.ClientBodyInFileOnly
			if !c.spill(nil) {
				return
			}
		}
		c.state = csWait
		p.BodyEnd()
		return
	}
	if r.req.ExpectContinue() && r.req.ProtoMinor() == 1 {
		c.conn.Write(continue100)
	}
	r.buffering, r.countOnly = mode != StreamBody, mode == CountBody
	r.inFileOnly, r.bodyDropped = 0, false
	if r.buffering {
		r.inFileOnly = c.lcf.ClientBodyInFileOnly
	}
	c.state = csBody
	c.bodyFate = bodyTaken
	// Chunk extensions and trailers are not passed on, but they are read: bound them
	// as the head is bounded (nginx skips any amount).
	c.chunks.MaxOverhead = c.lcf.LargeHeaderBuffers * c.lcf.LargeHeaderBufferSize
	c.conn.SetTimeout(c.lcf.ClientBodyTimeout)
	pending := c.in[c.headLen:]
	c.in = c.in[:c.headLen]
	c.takeBody(pending)
}

// BodyInFileOnly reports client_body_in_file_only on or clean for the request's
// location: a body read whole goes to a named file (read it whole, BufferBody or
// CountBody, to honour it).
func (r *Request) BodyInFileOnly() bool { return r.c.lcf.ClientBodyInFileOnly != BodyInFileOff }

// TakeBody hands over a body read whole (BufferBody): the part in memory, lent
// until the request ends (the core keeps it for $request_body, which nginx logs,
// and puts it back), and the part in a temporary file, which the caller closes.
// Either may be empty; both are after CountBody (a body client_body_in_file_only
// wrote stays with the request).
func (r *Request) TakeBody() ([]byte, BodyFile) {
	if r.countOnly {
		return nil, BodyFile{}
	}
	var b []byte
	if len(r.bodyBuf) > 0 {
		b = r.bodyBuf[:len(r.bodyBuf):len(r.bodyBuf)]
	}
	f := r.spool
	r.spool = BodyFile{}
	return b, f
}

// BodyUnread reports a request body announced in the head and not (wholly) read:
// still on the wire, or cut short while it was read.
func (r *Request) BodyUnread() bool { return r.c.bodyUnread() }

// ReadingBody reports that the request body is being read (ReadBody, not ended).
func (r *Request) ReadingBody() bool { return r.c.state == csBody }

// takeBody passes request body bytes on; what follows the body is the next
// pipelined request and is kept.
func (c *conn) takeBody(data []byte) {
	for len(data) > 0 && c.state == csBody {
		switch c.body {
		case BodyLength:
			part := c.bodyLen.Take(data)
			data = data[len(part):]
			c.bodyTotal += int64(len(part))
			c.bodyWire += int64(len(part))
			if c.buffering {
				if !c.bufferChunk(part) {
					return
				}
			} else if len(part) > 0 {
				c.pending.BodyData(part)
			}
			if c.bodyLen.Done() {
				c.endBody()
			}
		case BodyChunked:
			n, chunk, err := c.chunks.Decode(data)
			if err != nil {
				c.abortBody()
				c.keepAlive = false
				c.failRequest(400)
				return
			}
			c.bodyTotal += int64(len(chunk))
			c.bodyWire += int64(n)
			if c.bodyTooLarge() {
				c.abortBody()
				c.keepAlive = false
				c.failRequest(413)
				return
			}
			if c.buffering {
				if !c.bufferChunk(chunk) {
					return
				}
			} else if len(chunk) > 0 {
				c.pending.BodyData(chunk)
			}
			data = data[n:]
			if c.chunks.Done() {
				c.endBody()
			}
		}
	}
	if c.state == csBody && !c.buffering {
		c.pending.BodyRead() // the pieces are in the loop's read buffer
	}
	if len(data) > 0 {
		c.keep(data)
		c.paused = true
		c.conn.PauseRead()
	}
}

// endBody: the whole body was read.
func (c *conn) endBody() {
	if c.buffering {
		c.bufferedDone()
		return
	}
	c.bodyDone()
}

// bodyTooLarge checks client_max_body_size, which counts data bytes only.
func (c *conn) bodyTooLarge() bool {
	max := c.lcf.ClientMaxBodySize
	return max > 0 && c.bodyTotal > max
}

// abortBody drops the pending answer, if there is one, and a body read so far.
func (c *conn) abortBody() {
	if c.Request == nil {
		return
	}
	c.abortPending()
	c.releaseBodyBuf()
}

// bodyDone: the whole request is read.
func (c *conn) bodyDone() {
	c.state = csWait
	c.conn.SetTimeout(0)
	c.pending.BodyEnd()
}

// bufferChunk keeps data of a body read whole: in memory up to
// client_body_buffer_size, in a temp file beyond. It reports false when it failed and
// answered the client.
func (c *conn) bufferChunk(data []byte) bool {
	if c.inFileOnly != BodyInFileOff {
		return len(data) == 0 || c.spill(data) // every byte to the file, none in memory
	}
	limit := c.lcf.ClientBodyBufferSize
	if c.countOnly {
		// Counted (bodyTotal); kept only while it fits in memory, for
		// $request_body (nginx reads it all the same, to a file beyond).
		if c.bodyDropped || c.bodyBuf != nil && len(c.bodyBuf)+len(data) > limit || len(data) > limit {
			c.bodyDropped = true
			c.putBodyBuf()
			return true
		}
		if c.bodyBuf == nil {
			c.bodyBuf = c.conn.Loop().Pool().Get(limit)[:0]
		}
		c.bodyBuf = append(c.bodyBuf, data...)
		return true
	}
	for len(data) > 0 {
		if c.bodyBuf == nil {
			c.bodyBuf = c.conn.Loop().Pool().Get(limit)[:0]
		}
		if len(c.bodyBuf) == limit {
			if !c.spill(c.bodyBuf) {
				return false
			}
			c.bodyBuf = c.bodyBuf[:0]
		}
		if len(c.bodyBuf) == 0 && len(data) > limit && c.spool.open {
			return c.spill(data) // no copy through the buffer
		}
		k := min(limit-len(c.bodyBuf), len(data))
		c.bodyBuf = append(c.bodyBuf, data[:k]...)
		data = data[k:]
	}
	return true
}

// spill appends p to the body's temp file, creating it first. It reports false when
// it failed and answered the client (500, as nginx).
func (c *conn) spill(p []byte) bool {
	if !c.spool.open {
		tp := c.lcf.ClientBodyTemp
		var f BodyFile
		var err error
		if c.inFileOnly != BodyInFileOff {
			f, c.bodyFileName, err = openNamedBodyFile(tp, c.bodyFileName[:0])
		} else {
			f, err = openBodyFile(tp.Dir)
		}
		if err != nil {
			c.w.log.Error(err.Error(), "client", c.RemoteAddr().String())
			return c.bodyFailed()
		}
		c.spool = f
		if c.inFileOnly != BodyInFileOff {
			// nginx logs its persistent body files at notice level.
			c.w.log.Log(context.Background(), errorlog.LevelNotice, "a client request body is buffered to a temporary file "+string(c.bodyFileName), "client", c.RemoteAddr().String())
		} else {
			c.w.log.Warn("a client request body is buffered to a temporary file", "path", tp.Dir, "client", c.RemoteAddr().String())
		}
	}
	if err := c.spool.write(p); err != nil {
		c.w.log.Error(err.Error(), "path", c.lcf.ClientBodyTemp.Dir, "client", c.RemoteAddr().String())
		return c.bodyFailed()
	}
	return true
}

// bodyFailed answers 500 to a request whose body could not be kept.
func (c *conn) bodyFailed() bool {
	c.abortBody()
	c.keepAlive = false
	c.failRequest(500)
	return false
}

// bufferedDone: a body read whole ended; its length is known now.
func (c *conn) bufferedDone() {
	c.buffering = false
	c.body = BodyLength
	if c.inFileOnly != BodyInFileOff && !c.spool.open && !c.spill(nil) {
		return // a body of no bytes still gets its file, as nginx's
	}
	if c.spool.open {
		if len(c.bodyBuf) > 0 && !c.spill(c.bodyBuf) {
			return
		}
		c.putBodyBuf()
	}
	c.contentLength = c.spool.size + int64(len(c.bodyBuf))
	if c.countOnly {
		c.contentLength = c.bodyTotal
	}
	c.bodyDone()
}

// releaseBodyBuf returns the body buffer to the pool and closes the body's temp file.
func (c *conn) releaseBodyBuf() {
	if c.Request == nil {
		return
	}
	c.putBodyBuf()
	c.spool.Close()
	c.endBodyFile()
}

// endBodyFile forgets the request's named body file, unlinked first under
// client_body_in_file_only clean (on keeps it for whoever reads it).
func (c *conn) endBodyFile() {
	if len(c.bodyFileName) == 0 {
		return
	}
	if c.inFileOnly == BodyInFileClean {
		if err := unix.Unlink(string(c.bodyFileName)); err != nil && err != unix.ENOENT {
			c.w.log.Error("unlink() \""+string(c.bodyFileName)+"\" failed: "+err.Error(), "client", c.RemoteAddr().String())
		}
	}
	c.bodyFileName = c.bodyFileName[:0]
}

// requestBodyInMemory is the body read whole when all of it is in memory (nginx's
// $request_body): nil once it went to a file, before it was read, or when the
// content handler took it (TakeBody).
func (r *Request) requestBodyInMemory() []byte {
	if r.spool.open || r.bodyDropped || r.buffering || r.body != BodyLength {
		return nil
	}
	return r.bodyBuf
}

func (c *conn) putBodyBuf() {
	if c.bodyBuf != nil {
		c.conn.Loop().Pool().Put(c.bodyBuf[:cap(c.bodyBuf)])
		c.bodyBuf = nil
	}
}
