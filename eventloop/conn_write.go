package eventloop

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// maxIovecs bounds one writev: x/sys/unix builds up to 8 iovecs on the stack,
// so staying within that keeps flushing allocation-free.
const maxIovecs = 8

// Write implements Conn.
func (c *conn) Write(p []byte) (int, error) {
	if err := c.writable(); err != nil || len(p) == 0 {
		return 0, err
	}
	rest := p
	if c.state == connOpen && c.q.size == 0 && c.rl == nil {
		n, err := rawWrite(c.fd, p)
		if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			c.fail(fmt.Errorf("write: %w", err))
			return 0, c.failErr
		}
		if n > 0 {
			rest = p[n:]
		}
		if len(rest) == 0 {
			return len(p), nil
		}
	}
	c.queue().append(c.loop.pool, c.loop.cfg.ChunkSize, rest)
	c.queued()
	return len(p), nil
}

// Writev implements Conn.
func (c *conn) Writev(bufs [][]byte) (int, error) {
	if err := c.writable(); err != nil {
		return 0, err
	}
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total == 0 {
		return 0, nil
	}
	skip := 0
	if c.state == connOpen && c.q.size == 0 && c.rl == nil {
		n, err := c.loop.rawWritev(c.fd, bufs)
		if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			c.fail(fmt.Errorf("writev: %w", err))
			return 0, c.failErr
		}
		if n == total {
			return total, nil
		}
		skip = max(n, 0)
	}
	for _, b := range bufs {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		c.queue().append(c.loop.pool, c.loop.cfg.ChunkSize, b[skip:])
		skip = 0
	}
	c.queued()
	return total, nil
}

func (c *conn) writable() error {
	if c.failErr != nil {
		return c.failErr
	}
	if c.state == connClosed || c.state == connClosing || c.shutWr {
		return ErrClosed
	}
	return nil
}

// queued arms EPOLLOUT, the write timeout and signals the high watermark after
// output was queued.
func (c *conn) queued() {
	c.updateEvents()
	c.armWriteTimeout()
	if !c.blocked && c.q.size > c.highWater() {
		c.blocked = true
		c.h.OnWriteBlocked(c)
	}
}

// flush writes queued output until the socket is full, the queue empty or
// maxChunk file bytes went out, then settles the timeout, polling and watermarks.
func (c *conn) flush() error {
	before := c.q.size
	if err := c.send(); err != nil {
		return err
	}
	if c.q.size == 0 && c.state == connClosing {
		c.closeNow(c.closeErr())
		return nil
	}
	if c.q.size == 0 && c.shutWr {
		if err := c.shutdownWrite(); err != nil {
			return err
		}
	}
	switch {
	case c.q.size == 0:
		c.wtimer.Stop()
	case c.rl != nil && c.rl.delayed:
	case c.q.size < before && c.wtimeout > 0:
		c.wtimer.Reset(c.wtimeout) // progress: the timeout runs between two writes
	}
	c.updateEvents()
	if c.blocked && c.q.size <= c.lowWater() {
		c.blocked = false
		c.h.OnWritable(c)
	}
	return nil
}

// send writes the queue in order: bytes with writev, file segments with
// sendfile or read into a pool buffer first; it stops when the socket is full,
// the queue empty, or maxChunk file bytes went out (the socket, still writable, is
// reported again in the next round).
func (c *conn) send() error {
	if c.rl == nil {
		return c.sendUpTo(math.MaxInt)
	}
	return c.sendLimited()
}

// sendUpTo is send for at most limit bytes of any kind.
func (c *conn) sendUpTo(limit int) error {
	l := c.loop
	q := &c.q
	budget := int(c.maxChunk)
	if budget <= 0 {
		budget = math.MaxInt
	}
	var err error
loop:
	for q.size > 0 && limit > 0 {
		if head := &q.chunks[0]; head.file && head.r == head.w {
			// The next bytes are in the file.
			if budget == 0 {
				break
			}
			budget = min(budget, limit)
			if c.sendfile {
				n, all, ferr := c.sendFile(head, budget)
				budget -= n
				limit -= n
				if head.seg.off == head.seg.end {
					q.pop(l.pool)
				}
				if ferr != nil || !all {
					err = ferr
					break
				}
				continue
			}
			if head.buf == nil {
				head.buf = l.pool.Get(max(l.cfg.ChunkSize, fileReadSize))
			}
			n, rerr := head.seg.Read(head.buf[:min(len(head.buf), budget)])
			if rerr != nil {
				err = rerr
				break
			}
			head.r, head.w = 0, n
			budget -= n
		}
		iov := q.iovecs(l.iov[:0], maxIovecs)
		want := 0
		for i, b := range iov {
			if want+len(b) >= limit {
				iov[i] = b[:limit-want]
				iov = iov[:i+1]
				want = limit
				break
			}
			want += len(b)
		}
		n, werr := l.rawWritev(c.fd, iov)
		clear(iov) // drop references to pool buffers
		switch {
		case werr == unix.EAGAIN:
			break loop
		case werr == unix.EINTR:
			continue
		case werr != nil:
			err = fmt.Errorf("writev: %w", werr)
			break loop
		}
		q.consume(n, l.pool)
		limit -= n
		if n < want {
			break
		}
	}
	// A file segment waiting for the socket keeps no empty read buffer.
	if len(q.chunks) > 0 {
		if head := &q.chunks[0]; head.file && head.buf != nil && head.r == head.w {
			l.pool.Put(head.buf)
			head.buf = nil
		}
	}
	return err
}

// outQueue holds output the socket did not take yet, in order: bytes in pool
// chunks and file segments. size counts both (file bytes not yet sent included).
type outQueue struct {
	chunks []chunk
	size   int
}

// chunk is bytes in buf[r:w], or a file segment: buf[r:w] read from the file and
// not yet sent (without sendfile), then the file's [seg.off, seg.end).
type chunk struct {
	buf   []byte
	r, w  int
	file  bool
	owned bool // seg.fd is the queue's own, closed with the chunk
	seg   FileSegment
}

func (q *outQueue) append(pool BufferPool, chunkSize int, p []byte) {
	for len(p) > 0 {
		if n := len(q.chunks); n > 0 {
			if last := &q.chunks[n-1]; !last.file && last.w < len(last.buf) {
				k := copy(last.buf[last.w:], p)
				last.w += k
				q.size += k
				p = p[k:]
				continue
			}
		}
		q.chunks = append(q.chunks, chunk{buf: pool.Get(chunkSize)})
	}
}

func (q *outQueue) appendFile(seg FileSegment, owned bool) {
	q.chunks = append(q.chunks, chunk{file: true, owned: owned, seg: seg})
	q.size += int(seg.end - seg.off)
}

// iovecs lists the bytes that can go out with one writev: up to the first file
// segment with file bytes left, after what was read of it.
func (q *outQueue) iovecs(dst [][]byte, limit int) [][]byte {
	for i := 0; i < len(q.chunks) && len(dst) < limit; i++ {
		ch := &q.chunks[i]
		if ch.r < ch.w {
			dst = append(dst, ch.buf[ch.r:ch.w])
		}
		if ch.file && ch.seg.off < ch.seg.end {
			break
		}
	}
	return dst
}

// consume drops n sent bytes, releasing the chunks and segments done.
func (q *outQueue) consume(n int, pool BufferPool) {
	q.size -= n
	done := 0
	for done < len(q.chunks) {
		ch := &q.chunks[done]
		k := min(n, ch.w-ch.r)
		ch.r += k
		n -= k
		if ch.r < ch.w || ch.file && ch.seg.off < ch.seg.end {
			break
		}
		ch.release(pool)
		done++
	}
	q.drop(done)
}

// pop releases the head chunk, a segment sent whole.
func (q *outQueue) pop(pool BufferPool) {
	q.chunks[0].release(pool)
	q.drop(1)
}

func (q *outQueue) drop(done int) {
	if done > 0 {
		kept := copy(q.chunks, q.chunks[done:])
		clear(q.chunks[kept:])
		q.chunks = q.chunks[:kept]
	}
}

// release drops every chunk and segment (closing the queue's descriptors).
// maxChunkLists bounds the chunk lists a loop keeps from closed connections.
const maxChunkLists = 256

// queue is c.q, given a chunk list left by a closed connection if it has none:
// a connection that ever queues output (every upstream connection queues its
// first request before the connect completes) then allocates no list of its own.
func (c *conn) queue() *outQueue {
	if l := c.loop; c.q.chunks == nil && len(l.chunkLists) > 0 {
		n := len(l.chunkLists) - 1
		c.q.chunks, l.chunkLists[n] = l.chunkLists[n], nil
		l.chunkLists = l.chunkLists[:n]
	}
	return &c.q
}

// recycle gives a closed connection's (empty) chunk list to the loop.
func (q *outQueue) recycle(l *Loop) {
	if c := cap(q.chunks); c > 0 && c <= 16 && len(l.chunkLists) < maxChunkLists {
		l.chunkLists = append(l.chunkLists, q.chunks[:0])
	}
	q.chunks = nil
}

func (q *outQueue) release(pool BufferPool) {
	for i := range q.chunks {
		q.chunks[i].release(pool)
	}
	clear(q.chunks)
	q.chunks = q.chunks[:0]
	q.size = 0
}

func (ch *chunk) release(pool BufferPool) {
	if ch.buf != nil {
		pool.Put(ch.buf)
		ch.buf = nil
	}
	if ch.owned {
		_ = ch.seg.Close()
		ch.owned = false
	}
}
