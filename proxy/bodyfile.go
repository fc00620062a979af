package proxy

import (
	"errors"
	"fmt"
	"github.com/numaproxy/numaproxy/httpcore"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/numaproxy/numaproxy/conf"
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
// sendfile(2) would save that copy, but eventloop.Conn queues bytes only: a file
// range cannot wait in its output queue behind the head, so the body is read into a
// pool buffer and written.

// bodyFile is a request body spooled to an unlinked temporary file.
type bodyFile struct {
	fd   int
	open bool
	size int64 // bytes written
}

// tempSerial names temp files when O_TMPFILE is not available.
var tempSerial atomic.Uint64

// openBodyFile creates an unlinked temporary file in dir.
func openBodyFile(dir string) (bodyFile, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return bodyFile{fd: fd, open: true}, nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return bodyFile{}, fmt.Errorf("open() %q failed: %w", dir, err)
	}
	// The filesystem has no O_TMPFILE: a fresh name, unlinked at once.
	for {
		name := dir + "/" + strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(tempSerial.Add(1), 10)
		fd, err = unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return bodyFile{}, fmt.Errorf("open() %q failed: %w", name, err)
		}
		if err := unix.Unlink(name); err != nil {
			unix.Close(fd)
			return bodyFile{}, fmt.Errorf("unlink() %q failed: %w", name, err)
		}
		return bodyFile{fd: fd, open: true}, nil
	}
}

// write appends p to the file.
func (f *bodyFile) write(p []byte) error {
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

// readAt fills p from offset off.
func (f *bodyFile) readAt(p []byte, off int64) error {
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

func (f *bodyFile) close() {
	if f.open {
		unix.Close(f.fd)
		*f = bodyFile{}
	}
}

// createTempPaths makes the client_body_temp_path directories that do not exist, as
// nginx does at start: the last component only, mode 0700.
func createTempPaths(cfg *conf.Config) error {
	if cfg.HTTP == nil {
		return nil
	}
	seen := map[string]bool{}
	mk := func(lc *httpcore.LocConf) error {
		p := lc.ClientBodyTemp
		if p == nil || seen[p.Dir] {
			return nil
		}
		seen[p.Dir] = true
		if err := os.Mkdir(p.Dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return &conf.Error{Pos: p.Pos, Msg: fmt.Sprintf("mkdir() %q failed (%v)", p.Dir, errors.Unwrap(err)), Err: err}
		}
		return nil
	}
	var walk func(locs []*conf.Location) error
	walk = func(locs []*conf.Location) error {
		for _, loc := range locs {
			if err := mk(httpcore.LocationConf(loc)); err != nil {
				return err
			}
			if err := walk(loc.Locations); err != nil {
				return err
			}
		}
		return nil
	}
	if err := mk(httpcore.HTTPConf(cfg.HTTP)); err != nil {
		return err
	}
	for _, srv := range cfg.HTTP.Servers {
		if err := mk(httpcore.ServerConf(srv)); err != nil {
			return err
		}
		if err := walk(srv.Locations); err != nil {
			return err
		}
	}
	return nil
}

// fileSendChunk is how much of a spooled body is read for one write upstream.
const fileSendChunk = 64 << 10

// While a spooled body is sent, any byte left queued on the upstream connection
// stops reading the file until the queue is empty: the socket buffer holds what
// waits, not pool buffers.
const fileHighWater, fileLowWater = 1, 0

// filePending reports a spooled body not yet wholly sent on the current connection.
func (ex *exchange) filePending() bool { return ex.file.open && ex.fileSent < ex.file.size }

// sendFile sends the spooled body on from where it stopped while the upstream socket
// takes it; OnWritable brings it back for the rest. It reports false when it failed
// and answered the client.
func (ex *exchange) sendFile() bool {
	if !ex.filePending() || ex.conn == nil || (ex.state != exHead && ex.state != exBody) {
		return true
	}
	conn := ex.conn
	if ex.fileSent == 0 {
		conn.SetWriteWatermarks(fileHighWater, fileLowWater)
	}
	pool := ex.c.conn.Loop().Pool()
	buf := pool.Get(fileSendChunk)
	for {
		n := int(min(int64(len(buf)), ex.file.size-ex.fileSent))
		if err := ex.file.readAt(buf[:n], ex.fileSent); err != nil {
			pool.Put(buf)
			ex.w.log.Error(err.Error(), "upstream", ex.peer.String(), "client", ex.c.remote.String())
			c := ex.c
			ex.abort()
			c.ex = nil
			c.keepAlive = false
			c.failRequest(500)
			return false
		}
		ex.fileSent += int64(n)
		ex.bodySent = true
		if _, err := conn.Write(buf[:n]); err != nil {
			break // the loop closes the connection; OnClose goes on from there
		}
		if !ex.filePending() {
			conn.SetWriteWatermarks(0, 0)
			break
		}
		if conn.Queued() > fileHighWater {
			break
		}
	}
	pool.Put(buf)
	if !ex.filePending() {
		ex.armRead() // proxy_read_timeout runs from the end of the request
	}
	return true
}
