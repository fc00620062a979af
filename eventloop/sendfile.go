package eventloop

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// File segments: a range of a regular file queued on a connection in order with
// its bytes (a response head, the file, a chunk trailer), for the static files and
// cache hits of the HTTP layer.
//
// Sent with sendfile(2) (SetSendfile(true, ...), the default unless
// Config.NoSendfile), the kernel moves the pages from the page cache to the socket,
// as far as the socket takes them now; the rest waits for EPOLLOUT like queued
// bytes. Without sendfile, the segment is read with pread(2) into one pool buffer
// at a time as the socket drains, never whole. Either way at most maxChunk file
// bytes go out per readiness event (nginx's sendfile_max_chunk): the rest goes out
// in the next round of epoll_wait, which reports the still-writable socket again
// (level-triggered) after the other ready connections, so one fast reader of a
// large file does not hold the loop.
//
// What blocks: regular files have no readiness for epoll to report. A page in the
// page cache is sent without waiting; a cold page makes sendfile (or pread) wait
// for the disk inside the loop, as it does in nginx without aio threads. Only
// regular files are accepted: a pipe or a device would wait for input forever.
// The calls are raw (rawfile.go) when they cannot wait: sendfile of a range
// cachestat(2) finds all in the page cache, preadv2 with RWF_NOWAIT; otherwise
// the scheduler sees them, and can give the loop's P to another thread while one
// waits.
//
// Descriptors: the part of a segment that the socket does not take at once is
// queued with a descriptor of its own (fcntl F_DUPFD_CLOEXEC), closed when the
// segment is sent or the connection closes, so the caller may close its fd as soon
// as WriteFile returns; a segment sent whole at once costs no dup. The duplicate
// shares the open file description (its offset is never used: sendfile and pread
// take theirs) and keeps the file alive if it is unlinked or replaced meanwhile.
//
// Accounting: Queued and the watermarks count a segment's bytes not yet sent like
// queued bytes. Whatever is written after a segment waits for all of it, in memory,
// so a producer should hold off as if the file were bytes: OnWriteBlocked once the
// queue passes the high mark, OnWritable when at most the low mark is left. Not
// counting them would let a pipelining client queue any number of segments, each
// with a descriptor, behind a slow one. A handler that wants to stream a large
// file in steps can queue it in parts, the next on OnWritable.

// maxSendfile is the most one sendfile(2) moves (Linux's MAX_RW_COUNT).
const maxSendfile = 0x7ffff000

// defaultSendfileMaxChunk is nginx's sendfile_max_chunk default since 1.21.4.
const defaultSendfileMaxChunk = 2 << 20

// fileReadSize is the least a file segment is read in without sendfile, nginx's
// output_buffers default (2 32k: one pread and one writev per 32 KiB). Half as
// much costs one more write, and wakeup of the reader, per 32 KiB.
const fileReadSize = 32 << 10

// FileSegment is a range of a regular file read with pread, under a descriptor
// of its own. Connections use it for their queued file segments; it is exported
// for a Conn that cannot hand a file to the kernel, such as a userspace TLS layer
// wrapping a Conn: its WriteFile opens a FileSegment and, each time the inner Conn
// has room (at once, then on OnWritable), reads a bounded amount into pool
// buffers (a few chunks per callback, so the loop moves on to other connections),
// encrypts and writes it, and closes the segment when Remaining is 0 or the
// connection closes.
type FileSegment struct {
	fd       int
	off, end int64
}

// OpenFileSegment returns the segment [off, off+n) of the regular file fd, with a
// duplicate of fd: the caller may close fd at once, and closes the segment.
func OpenFileSegment(fd int, off, n int64) (FileSegment, error) {
	if err := checkFile(fd, off, n); err != nil {
		return FileSegment{fd: -1}, err
	}
	dup, err := dupFile(fd)
	if err != nil {
		return FileSegment{fd: -1}, err
	}
	return FileSegment{fd: dup, off: off, end: off + n}, nil
}

// Remaining returns the bytes of the segment not yet read.
func (s *FileSegment) Remaining() int64 { return s.end - s.off }

// Read reads the next bytes of the segment into p, at most Remaining; an error
// wraps ErrFileTruncated if the file ends before the segment does.
func (s *FileSegment) Read(p []byte) (int, error) {
	p = p[:min(int64(len(p)), s.end-s.off)]
	if len(p) == 0 {
		return 0, nil
	}
	n, err := Pread(s.fd, p, s.off)
	switch {
	case err != nil:
		return 0, fmt.Errorf("pread: %w", err)
	case n == 0:
		return 0, s.truncated("pread")
	}
	s.off += int64(n)
	return n, nil
}

// Close closes the segment's descriptor (that of a FileSegment OpenFileSegment returned).
func (s *FileSegment) Close() error {
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

func (s *FileSegment) truncated(call string) error {
	return fmt.Errorf("%s() reported that the file was truncated at %d, %d bytes short: %w",
		call, s.off, s.end-s.off, ErrFileTruncated)
}

// checkFile accepts [off, off+n) of a regular file that holds it now.
func checkFile(fd int, off, n int64) error {
	var st unix.Stat_t
	if e := Fstat(fd, &st); e != 0 {
		return fmt.Errorf("write file: fstat fd %d: %w", fd, e)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("write file: fd %d is not a regular file (mode %#o)", fd, st.Mode)
	}
	return checkRange(off, n, st.Size)
}

// checkRange accepts [off, off+n) of a file of size bytes.
func checkRange(off, n, size int64) error {
	if off < 0 || n < 0 || n > size-off || n > math.MaxInt {
		return fmt.Errorf("write file: range %d+%d outside the file's %d bytes", off, n, size)
	}
	return nil
}

func dupFile(fd int) (int, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("write file: dup fd %d: %w", fd, err)
	}
	return dup, nil
}

// WriteFile implements Conn.
func (c *conn) WriteFile(fd int, off, n int64) error {
	if err := c.writable(); err != nil {
		return err
	}
	if err := checkFile(fd, off, n); err != nil {
		return err
	}
	return c.writeFile(fd, off, n)
}

// writeFile is WriteFile for a range checkFile accepted.
func (c *conn) writeFile(fd int, off, n int64) error {
	if n == 0 {
		return nil
	}
	if c.state != connOpen || c.q.size > 0 || c.rl != nil {
		dup, err := dupFile(fd)
		if err != nil {
			c.fail(err) // what was queued before cannot be followed
			return err
		}
		c.queue().appendFile(FileSegment{fd: dup, off: off, end: off + n}, true)
		c.queued()
		return nil
	}
	// Nothing queued: send now what the socket takes, under the caller's fd, and
	// dup only for a rest.
	c.queue().appendFile(FileSegment{fd: fd, off: off, end: off + n}, false)
	return c.keepFile(fd, c.send())
}

// keepFile ends a write that queued a segment under the caller's fd and then
// sent what the socket took (send's error is err): the segment left queued, the
// last chunk if any, gets a descriptor of its own if file bytes are still to be
// read from it, none if they are all in its buffer.
func (c *conn) keepFile(fd int, err error) error {
	if c.q.size == 0 && err == nil {
		return nil
	}
	if c.q.size > 0 {
		last := &c.q.chunks[len(c.q.chunks)-1] // what is left is this segment's
		switch {
		case err != nil:
		case last.seg.off == last.seg.end:
			last.seg.fd = -1 // read whole: no descriptor needed
			c.queued()
			return nil
		default:
			last.seg.fd, err = dupFile(fd)
		}
		if err != nil {
			last.seg.fd = -1 // never the caller's
		} else {
			last.owned = true
			c.queued()
			return nil
		}
	}
	c.fail(err)
	return err
}

// smallFileRead is the largest file range WritevFile reads rather than hands
// to sendfile(2) when sendfile is on: for a few KiB, pread and one writev of the
// bytes before and the file are as many system calls as a writev and a
// sendfile, and one TCP segment fewer (the static module's measure, which reads
// such files itself).
const smallFileRead = 8 << 10

// WritevFile is Writev(bufs) then WriteFile(fd, off, n), the file's first bytes
// sent with bufs in one writev (nginx's writev of a response head and its first
// output buffer) rather than bufs on their own first: without sendfile the
// file's first fileReadSize bytes are read with pread into a pool buffer for
// that (as the queue would read them next), with sendfile a range of at most
// smallFileRead bytes is. When output is queued already, a larger range with
// sendfile, or more than maxIovecs-1 buffers, it is Writev and WriteFile. Errors
// are WriteFile's; a range refused leaves the connection as it was (bufs not
// sent either).
func (c *conn) WritevFile(bufs [][]byte, fd int, off, n int64) error {
	return c.WritevFileSized(bufs, fd, off, n, -1)
}

// WritevFileSized is WritevFile for a caller that has just fstat'ed fd (Fstat)
// and found a regular file of size bytes, as the static module's and the
// cache's opens do: the range is checked against size, without checkFile's
// fstat again (nginx's one fstat per file). A file that shrinks after the
// caller's fstat ends the connection as one that shrinks while queued does
// (ErrFileTruncated: sendfile or pread finds the end early). size < 0 is
// WritevFile.
func (c *conn) WritevFileSized(bufs [][]byte, fd int, off, n, size int64) error {
	if err := c.writable(); err != nil {
		return err
	}
	var err error
	if size < 0 {
		err = checkFile(fd, off, n)
	} else {
		err = checkRange(off, n, size)
	}
	if err != nil {
		return err
	}
	total, nbufs := 0, 0
	for _, b := range bufs {
		if len(b) > 0 {
			total += len(b)
			nbufs++
		}
	}
	if n == 0 || total == 0 || nbufs >= maxIovecs || c.state != connOpen || c.q.size > 0 || c.rl != nil ||
		c.sendfile && n > smallFileRead {
		if _, err := c.Writev(bufs); err != nil {
			return err
		}
		return c.writeFile(fd, off, n)
	}
	l := c.loop
	buf := l.pool.Get(max(l.cfg.ChunkSize, fileReadSize))
	piece := buf[:min(int64(len(buf)), n)]
	if c.maxChunk > 0 {
		piece = piece[:min(len(piece), int(c.maxChunk))]
	}
	seg := FileSegment{fd: fd, off: off, end: off + n}
	k, err := seg.Read(piece)
	if err != nil {
		l.pool.Put(buf)
		err = fmt.Errorf("write file: %w", err)
		c.fail(err) // the bytes before it cannot be followed
		return err
	}
	iov := l.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			iov = append(iov, b)
		}
	}
	iov = append(iov, buf[:k])
	w, werr := l.rawWritev(c.fd, iov)
	clear(iov) // drop references to the caller's and the pool's buffers
	if werr != nil && werr != unix.EAGAIN && werr != unix.EINTR {
		l.pool.Put(buf)
		c.fail(fmt.Errorf("writev: %w", werr))
		return c.failErr
	}
	w = max(w, 0)
	if w == total+k && seg.off == seg.end {
		l.pool.Put(buf)
		return nil
	}
	// Queue the rest in order: what bufs has left, the piece's unsent bytes, the
	// file after it (under the caller's fd until keepFile).
	skip := w
	for _, b := range bufs {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		c.queue().append(l.pool, l.cfg.ChunkSize, b[skip:])
		skip = 0
	}
	q := c.queue()
	sent := max(w-total, 0)
	ch := chunk{file: true, seg: seg, buf: buf, r: sent, w: k}
	if sent == k {
		l.pool.Put(buf)
		ch.buf, ch.r, ch.w = nil, 0, 0
	}
	q.chunks = append(q.chunks, ch)
	q.size += k - sent + int(seg.end-seg.off)
	if w < total+k || c.maxChunk > 0 && k >= int(c.maxChunk) {
		// The socket is full, or this event's file bytes went out: the rest
		// waits for the next round, as in send.
		return c.keepFile(fd, nil)
	}
	return c.keepFile(fd, c.send()) // the rest of the file, as WriteFile
}

// SetSendfile implements Conn.
func (c *conn) SetSendfile(on bool, maxChunk int) {
	c.sendfile, c.maxChunk = on, clamp32(maxChunk)
}

// sendFile sends the head segment with sendfile(2), at most budget bytes; it
// reports how many went out and whether the socket took all it was offered.
func (c *conn) sendFile(ch *chunk, budget int) (int, bool, error) {
	want := int(min(ch.seg.end-ch.seg.off, int64(budget), maxSendfile))
	// Raw when the pages are in the page cache: then sendfile waits for no
	// device (the socket is non-blocking).
	raw := resident(ch.seg.fd, ch.seg.off, int64(want))
	for {
		// The kernel advances ch.seg.off by what it sent.
		var n int
		var err error
		if raw {
			n, err = rawSendfile(c.fd, ch.seg.fd, &ch.seg.off, want)
		} else {
			n, err = unix.Sendfile(c.fd, ch.seg.fd, &ch.seg.off, want)
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, false, nil
		case err != nil:
			return 0, false, fmt.Errorf("sendfile: %w", err)
		case n == 0:
			return 0, false, ch.seg.truncated("sendfile")
		}
		c.q.size -= n
		return n, n == want, nil
	}
}
