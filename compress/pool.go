package compress

import (
	"io"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/httpcore"
)

// encoder is a streaming compressor: gzip's, brotli's or zstd's writer.
type encoder interface {
	io.WriteCloser
	Flush() error
	Reset(w io.Writer)
}

// maxFree bounds the idle encoders (and gunzip readers) a loop keeps per encoding
// and level: a flate writer is hundreds of KB, a brotli or zstd one more, so a burst
// of concurrent compressions does not stay in memory once it is over.
const maxFree = 4

// chunk is the most input handed to an encoder at once, so the compressed output
// waiting to go to the connection stays near gzip_buffers' bound.
const chunk = 32 << 10

// brotliWindow is ngx_brotli's brotli_window default, 512 KB (2^19).
const brotliWindow = 19

// zstdWindow bounds a zstd encoder's window (and so its memory) to 1 MB.
const zstdWindow = 1 << 20

// loopState is the module's state in one loop: the idle encoders and gunzip
// readers, and the buffers the filters work in. Responses take an encoder when
// their first body bytes come and give it back at their end, so an idle
// connection holds none.
type loopState struct {
	free      [numEncodings][23][]encoder
	inflaters []*inflater
	out       []byte // compressed (or decompressed) bytes on their way down the chain
	file      []byte // a file segment read to be compressed
}

func newLoop(*httpcore.Worker) httpcore.LoopState {
	return &loopState{out: make([]byte, 0, chunk)}
}

// Reload implements httpcore.LoopState: pooled encoders do not depend on the config.
func (*loopState) Reload(*httpcore.Snapshot) {}

// get is an encoder for e at level writing to w, from the pool or new.
func (l *loopState) get(e Encoding, level int, w io.Writer) (encoder, error) {
	free := l.free[e][level]
	if n := len(free); n > 0 {
		enc := free[n-1]
		free[n-1] = nil
		l.free[e][level] = free[:n-1]
		enc.Reset(w)
		return enc, nil
	}
	switch e {
	case Gzip:
		return gzip.NewWriterLevel(w, level)
	case Brotli:
		return brotli.NewWriterOptions(w, brotli.WriterOptions{Quality: level, LGWin: brotliWindow}), nil
	default:
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
			zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(zstdWindow), zstd.WithLowerEncoderMem(true))
	}
}

// put gives an encoder back; it is reset to write nowhere so that it holds no
// reference to the response.
func (l *loopState) put(e Encoding, level int, enc encoder) {
	enc.Reset(io.Discard)
	keep := maxFree
	if e == Zstd && level >= 10 {
		keep = 1 // 36 MB each
	}
	if len(l.free[e][level]) < keep {
		l.free[e][level] = append(l.free[e][level], enc)
	}
}

// getInflater is an idle gunzip inflater, or a new one.
func (l *loopState) getInflater() *inflater {
	if n := len(l.inflaters); n > 0 {
		f := l.inflaters[n-1]
		l.inflaters[n-1] = nil
		l.inflaters = l.inflaters[:n-1]
		return f
	}
	return &inflater{zr: new(gzip.Reader)}
}

// putInflater gives an inflater back, its coroutine stopped.
func (l *loopState) putInflater(f *inflater) {
	f.stop()
	if len(l.inflaters) < maxFree {
		l.inflaters = append(l.inflaters, f)
	}
}

// pread reads from a file at off, as much as it gives; an end of file before p is
// filled at all is an error (the file shrank under the response).
func pread(fd int, p []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(fd, p, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.ErrUnexpectedEOF
		}
		return n, nil
	}
}
