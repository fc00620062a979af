package eventloop

import (
	"fmt"

	gio "github.com/panjf2000/gnet/v2/pkg/io"
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
	if c.state == connOpen && c.q.size == 0 {
		n, err := unix.Write(c.fd, p)
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
	c.q.append(c.loop.pool, c.loop.cfg.ChunkSize, rest)
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
	if c.state == connOpen && c.q.size == 0 {
		n, err := gio.Writev(c.fd, bufs[:min(len(bufs), maxIovecs)])
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
		c.q.append(c.loop.pool, c.loop.cfg.ChunkSize, b[skip:])
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
	if c.wtimeout > 0 && !c.wtimer.Pending() {
		c.wtimer.Reset(c.wtimeout)
	}
	if !c.blocked && c.q.size > c.highWater() {
		c.blocked = true
		c.h.OnWriteBlocked(c)
	}
}

// flush writes queued output until the socket is full or the queue empty.
func (c *conn) flush() error {
	l := c.loop
	before := c.q.size
	for c.q.size > 0 {
		iov := c.q.iovecs(l.iov[:0], maxIovecs)
		want := 0
		for _, b := range iov {
			want += len(b)
		}
		n, err := gio.Writev(c.fd, iov)
		clear(iov) // drop references to pool buffers
		if err == unix.EAGAIN {
			break
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("writev: %w", err)
		}
		c.q.consume(n, l.pool)
		if n < want {
			break
		}
	}
	if c.q.size == 0 && c.state == connClosing {
		c.closeNow(c.closeErr)
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

// outQueue holds output the socket did not take yet, in pool chunks.
type outQueue struct {
	chunks []chunk
	size   int
}

type chunk struct {
	buf  []byte
	r, w int
}

func (q *outQueue) append(pool BufferPool, chunkSize int, p []byte) {
	for len(p) > 0 {
		if n := len(q.chunks); n > 0 {
			if last := &q.chunks[n-1]; last.w < len(last.buf) {
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

func (q *outQueue) iovecs(dst [][]byte, limit int) [][]byte {
	for i := 0; i < len(q.chunks) && len(dst) < limit; i++ {
		ch := &q.chunks[i]
		dst = append(dst, ch.buf[ch.r:ch.w])
	}
	return dst
}

// consume drops n sent bytes, returning emptied chunks to the pool.
func (q *outQueue) consume(n int, pool BufferPool) {
	q.size -= n
	done := 0
	for n > 0 {
		ch := &q.chunks[done]
		k := min(n, ch.w-ch.r)
		ch.r += k
		n -= k
		if ch.r < ch.w {
			break
		}
		pool.Put(ch.buf)
		done++
	}
	if done > 0 {
		kept := copy(q.chunks, q.chunks[done:])
		clear(q.chunks[kept:])
		q.chunks = q.chunks[:kept]
	}
}

// release returns every chunk to the pool, dropping the queued bytes.
func (q *outQueue) release(pool BufferPool) {
	for i := range q.chunks {
		pool.Put(q.chunks[i].buf)
	}
	clear(q.chunks)
	q.chunks = q.chunks[:0]
	q.size = 0
}
