package compress

import (
	"errors"
	"io"
	"iter"

	"github.com/klauspost/compress/gzip"

	"github.com/numaproxy/numaproxy/httpcore"
)

// inflater decompresses a gzip body pushed to it piece by piece. The gzip reader
// pulls its input, so it runs as a coroutine on the loop's thread (iter.Pull): when
// it has read all the input given, it yields for more instead of blocking, and the
// body filter resumes it with the next piece. It is resumed only from its loop.
type inflater struct {
	zr        *gzip.Reader
	in        []byte // input given and not read yet; valid during a body filter call
	eof       bool   // the body ended: no more input
	needInput bool   // it yielded for input (else it yielded output)
	output    []byte // what it yielded
	err       error
	done      bool // the gzip stream ended
	next      func() (struct{}, bool)
	cancel    func()
	yield     func(struct{}) bool // the coroutine's, for Read (set when it starts)
	buf       [chunk]byte
}

var errStopped = errors.New("gunzip stopped")

// Read implements io.Reader for the gzip reader: the input given, else a yield.
func (f *inflater) Read(p []byte) (int, error) {
	if err := f.wait(); err != nil {
		return 0, err
	}
	n := copy(p, f.in)
	f.in = f.in[n:]
	return n, nil
}

// ReadByte implements io.ByteReader, so the gzip reader reads no further than it
// needs and copies nothing into a buffer of its own.
func (f *inflater) ReadByte() (byte, error) {
	if err := f.wait(); err != nil {
		return 0, err
	}
	c := f.in[0]
	f.in = f.in[1:]
	return c, nil
}

func (f *inflater) wait() error {
	for len(f.in) == 0 {
		if f.eof {
			return io.EOF
		}
		f.needInput = true
		if !f.yield(struct{}{}) {
			return errStopped
		}
	}
	return nil
}

// run is the coroutine: decompress until the end, yielding output.
func (f *inflater) run(yield func(struct{}) bool) {
	f.yield = yield
	if err := f.zr.Reset(f); err != nil {
		f.err = err
		return
	}
	// What follows the gzip stream is ignored, as nginx's gunzip does.
	f.zr.Multistream(false)
	for {
		n, err := f.zr.Read(f.buf[:])
		if n > 0 {
			f.output = f.buf[:n]
			if !yield(struct{}{}) {
				return
			}
		}
		if err == io.EOF {
			f.done = true
			return
		}
		if err != nil {
			f.err = err
			return
		}
	}
}

// gunzip decompresses body bytes as they come: each piece is given to the
// coroutine, and what it yields goes down the chain.
func (ctx *reqCtx) gunzip(o *httpcore.Out) {
	if ctx.finished {
		if o.Flush {
			ctx.pass(nil, false, true) // nothing can follow the decoded body's end
		}
		return
	}
	ctx.busy = true
	defer ctx.endBusy()
	if len(o.Data) > 0 || o.FileN == 0 {
		last := o.Last && o.FileN == 0
		if !ctx.feed(o.Data, last, o.Flush && o.FileN == 0) {
			return
		}
	}
	l := ctx.loop
	fd, off, n := o.FileFd, o.FileOff, o.FileN
	for n > 0 {
		if l.file == nil {
			l.file = make([]byte, chunk)
		}
		m, err := pread(fd, l.file[:min(int64(len(l.file)), n)], off)
		if err != nil {
			ctx.r.Log().Error("reading a file to gunzip failed: "+err.Error(), "client", ctx.r.RemoteAddr().String())
			ctx.fail()
			return
		}
		off, n = off+int64(m), n-int64(m)
		if !ctx.feed(l.file[:m], n == 0 && o.Last, n == 0 && o.Flush) {
			return
		}
	}
}

// feed gives one piece of compressed input to the inflater and passes what comes
// out on; false: the response cannot go on (the request ended, or the gzip data
// is broken and the connection is closed).
func (ctx *reqCtx) feed(data []byte, last, flush bool) bool {
	f := ctx.inflate
	if f == nil {
		if len(data) == 0 {
			ctx.finished = last // an empty body stays empty
			ctx.pass(nil, last, flush)
			return !ctx.dead
		}
		f = ctx.loop.getInflater()
		ctx.inflate = f
		f.done, f.err = false, nil
		f.next, f.cancel = iter.Pull(f.run)
	}
	f.in, f.eof = data, last
	for !f.done && f.err == nil {
		f.needInput, f.output = false, nil
		if _, ok := f.next(); !ok {
			break
		}
		if len(f.output) > 0 {
			ctx.pass(f.output, false, false)
			if ctx.dead {
				return false
			}
		}
		if f.needInput {
			break
		}
	}
	f.in = nil
	if f.err != nil || last && !f.done {
		err := f.err
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		ctx.r.Log().Error("gunzip of the response failed: "+err.Error(), "client", ctx.r.RemoteAddr().String())
		ctx.fail()
		return false
	}
	switch {
	case last:
		ctx.finished = true
		ctx.pass(nil, true, false)
	case flush:
		ctx.pass(nil, false, true)
	}
	return !ctx.dead
}

// stop ends the coroutine (it returns from its yield with false and unwinds).
func (f *inflater) stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.next, f.cancel, f.yield = nil, nil, nil
	f.in, f.output = nil, nil
}
