package httpcore

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A request body that must be read whole before it goes upstream (a chunked body
// for an HTTP/1.0 upstream, as nginx buffers request bodies) is kept in memory up to
// client_body_buffer_size; beyond it, the body goes on to a temporary file in
// client_body_temp_path, as nginx does, and is sent from there with its length. The
// file stays open until the exchange ends, so a retry on the next server resends the
// whole body from it. It is created unlinked (O_TMPFILE, else open and unlink at
// once): a crash leaves nothing behind.
//
// What blocks the loop: regular files have no readiness for epoll to report, so
// their I/O runs inline. Creating the file is a metadata operation in the temp
// directory. A write copies into the page cache and returns without waiting for the
// disk unless the kernel throttles a task that dirties pages faster than they are
// written back (balance_dirty_pages) or memory is short. Reading back (pread into a
// pool buffer, when the upstream socket has room) is served from the page cache the
// writes filled, and waits for the disk only if those pages were evicted meanwhile.
// The proxy reads it back into pool buffers as the upstream socket takes them.

// BodyFile is a request body spooled to an unlinked temporary file.
type BodyFile struct {
	fd   int
	open bool
	size int64 // bytes written
}

// tempSerial names temp files when O_TMPFILE is not available.
var tempSerial atomic.Uint64

// openBodyFile creates an unlinked temporary file in dir.
func openBodyFile(dir string) (BodyFile, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return BodyFile{fd: fd, open: true}, nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return BodyFile{}, fmt.Errorf("open() %q failed: %w", dir, err)
	}
	// The filesystem has no O_TMPFILE: a fresh name, unlinked at once.
	for {
		name := dir + "/" + strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(tempSerial.Add(1), 10)
		fd, err = unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return BodyFile{}, fmt.Errorf("open() %q failed: %w", name, err)
		}
		if err := unix.Unlink(name); err != nil {
			unix.Close(fd)
			return BodyFile{}, fmt.Errorf("unlink() %q failed: %w", name, err)
		}
		return BodyFile{fd: fd, open: true}, nil
	}
}

// OpenTempFile creates an unlinked temporary file in dir (a temp path's directory)
// for reading and writing, as request bodies are spooled: for a module's own
// temporary files (proxy_temp_path). The caller closes the descriptor.
func OpenTempFile(dir string) (int, error) {
	f, err := openBodyFile(dir)
	return f.fd, err
}

// IsOpen reports a file that holds (part of) a body.
func (f *BodyFile) IsOpen() bool { return f.open }

// Size is the bytes written to the file.
func (f *BodyFile) Size() int64 { return f.size }

// write appends p to the file.
func (f *BodyFile) write(p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(f.fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("write() to temp file failed: %w", err)
		}
		f.size += int64(n)
		p = p[n:]
	}
	return nil
}

// ReadAt fills p from offset off.
func (f *BodyFile) ReadAt(p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pread(f.fd, p, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("pread() from temp file failed: %w", err)
		case n == 0:
			return errors.New("pread() from temp file: unexpected end of file")
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// Close closes the file (it has no name: its blocks are freed).
func (f *BodyFile) Close() {
	if f.open {
		unix.Close(f.fd)
		*f = BodyFile{}
	}
}

// With client_body_in_file_only on or clean, a body read whole always goes to a
// file that keeps its name, as nginx's persistent temp files, so that a process on
// the same machine can open it by $request_body_file (the upload offload idiom:
// proxy_set_header X-File $request_body_file; proxy_pass_request_body off). The
// name is nginx's: ten digits, under the temp path's levels (directories made as
// needed, as nginx's ngx_create_full_path). "clean" unlinks it when the request
// ends, "on" leaves it.

// Body file modes: client_body_in_file_only's values.
const (
	BodyInFileOff uint8 = iota
	BodyInFileOn
	BodyInFileClean
)

// bodyFileSerial numbers the named body files; it starts from the clock so that a
// restarted process does not walk the names the last one left.
var bodyFileSerial atomic.Uint32

func init() { bodyFileSerial.Store(uint32(time.Now().UnixNano()) % 1e9) }

// openNamedBodyFile creates a body file with a name in tp, appending the name to
// name.
func openNamedBodyFile(tp *TempPath, name []byte) (BodyFile, []byte, error) {
	start := len(name)
	n := bodyFileSerial.Add(1)
	for tries := 0; ; tries++ {
		name = appendBodyFileName(name[:start], tp, n)
		path := string(name[start:])
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.ENOENT) && len(tp.Levels) > 0 && tries < 100 {
			if merr := os.MkdirAll(path[:strings.LastIndexByte(path, '/')], 0o700); merr != nil {
				return BodyFile{}, name[:start], fmt.Errorf("mkdir() %q failed: %w", path, merr)
			}
			continue // the same name, now that its folders are there
		}
		if errors.Is(err, unix.EEXIST) && tries < 100 {
			n = bodyFileSerial.Add(1)
			continue
		}
		if err != nil {
			return BodyFile{}, name[:start], fmt.Errorf("open() %q failed: %w", path, err)
		}
		return BodyFile{fd: fd, open: true}, name, nil
	}
}

// appendBodyFileName appends tp's directory, the levels and the ten-digit name of
// n: levels 1 2 put 0000012345 in DIR/5/34/ (ngx_create_hashed_filename).
func appendBodyFileName(dst []byte, tp *TempPath, n uint32) []byte {
	var digits [10]byte
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + n%10)
		n /= 10
	}
	dst = append(dst, tp.Dir...)
	end := len(digits)
	for _, l := range tp.Levels {
		dst = append(append(dst, '/'), digits[end-l:end]...)
		end -= l
	}
	return append(append(dst, '/'), digits[:]...)
}
