package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
)

// An entry's file is, as nginx's: a fixed header, the key, the upstream's response
// head as it came, then the body (decoded from chunks). It is written to a temporary
// file in PATH and renamed into place once the body is complete, so that a crash or
// a failure midway never leaves an entry that is served; a file that does not
// read back whole is a MISS and is removed.
//
// What blocks a loop: the files are regular files, whose I/O runs inline on the
// loop as httpcore/bodyfile.go describes for request bodies: creating the
// temporary file, the levels' directories and the rename are metadata operations in
// PATH; writes copy into the page cache; a hit opens the file and reads its head
// (one pread, from the page cache once it was read or written; a read shorter
// than the buffer shows the file whole without an fstat), and its body goes out
// with sendfile. The proxy keeps the descriptors of files it served (Reread, and
// State.Gen to know the file is still the entry's). Scanning the directory (the loader) and unlinking files (the
// manager) run on goroutines of their own, off the loops.

const (
	magic      = "NPXC"
	version    = 2
	headerSize = 56 // version 2's; version 1's files (48, without the stale times) are read too
	header1    = 48
	tempPrefix = ".tmp."
)

// fileHeader is the fixed part of an entry's file.
type fileHeader struct {
	ValidSec  int64 // fresh until (unix seconds)
	Date      int64 // stored at (unix seconds)
	BodyStart int64
	BodyLen   int64
	KeyLen    int
	HeadLen   int
	// Cache-Control's stale-while-revalidate and stale-if-error (seconds past
	// ValidSec), nginx's updating_sec and error_sec.
	UpdatingSec int64
	ErrorSec    int64
	size        int // of the header as read: headerSize, or header1
}

func (h *fileHeader) encode(b []byte) {
	copy(b[0:4], magic)
	binary.LittleEndian.PutUint32(b[4:8], version)
	binary.LittleEndian.PutUint64(b[8:16], uint64(h.ValidSec))
	binary.LittleEndian.PutUint64(b[16:24], uint64(h.Date))
	binary.LittleEndian.PutUint32(b[24:28], uint32(h.KeyLen))
	binary.LittleEndian.PutUint32(b[28:32], uint32(h.HeadLen))
	binary.LittleEndian.PutUint64(b[32:40], uint64(h.BodyStart))
	binary.LittleEndian.PutUint64(b[40:48], uint64(h.BodyLen))
	binary.LittleEndian.PutUint32(b[48:52], uint32(h.UpdatingSec))
	binary.LittleEndian.PutUint32(b[52:56], uint32(h.ErrorSec))
}

var errFormat = errors.New("not a cache file")

func (h *fileHeader) decode(b []byte) error {
	if len(b) < header1 || string(b[0:4]) != magic {
		return errFormat
	}
	switch binary.LittleEndian.Uint32(b[4:8]) {
	case 1:
		h.size, h.UpdatingSec, h.ErrorSec = header1, 0, 0
	case version:
		if len(b) < headerSize {
			return errFormat
		}
		h.size = headerSize
		h.UpdatingSec = int64(binary.LittleEndian.Uint32(b[48:52]))
		h.ErrorSec = int64(binary.LittleEndian.Uint32(b[52:56]))
	default:
		return errFormat
	}
	h.ValidSec = int64(binary.LittleEndian.Uint64(b[8:16]))
	h.Date = int64(binary.LittleEndian.Uint64(b[16:24]))
	h.KeyLen = int(binary.LittleEndian.Uint32(b[24:28]))
	h.HeadLen = int(binary.LittleEndian.Uint32(b[28:32]))
	h.BodyStart = int64(binary.LittleEndian.Uint64(b[32:40]))
	h.BodyLen = int64(binary.LittleEndian.Uint64(b[40:48]))
	if h.BodyStart != int64(h.size+h.KeyLen+1+h.HeadLen) || h.BodyLen < 0 {
		return errFormat
	}
	return nil
}

// Validity is how long an entry is fresh, and how long past that it may stand in
// (Cache-Control's stale-while-revalidate and stale-if-error).
type Validity struct {
	ValidSec    int64 // fresh until (unix seconds)
	UpdatingSec int64 // stale-while-revalidate's seconds
	ErrorSec    int64 // stale-if-error's seconds
}

// Writer writes one entry's file as the response arrives.
type Writer struct {
	z    *Zone
	key  Key
	fd   int
	open bool
	tmp  string
	hdr  fileHeader
	off  int64
}

// Create starts the file of key k (text: the key itself) with the response head.
func (z *Zone) Create(w *Writer, k Key, text, head []byte, v Validity, date int64) error {
	*w = Writer{z: z, key: k}
	name := z.tempName(os.Getpid())
	fd, err := unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("open() %q failed: %w", name, err)
	}
	w.fd, w.open, w.tmp = fd, true, name
	w.hdr = fileHeader{ValidSec: v.ValidSec, Date: date, KeyLen: len(text), HeadLen: len(head),
		UpdatingSec: v.UpdatingSec, ErrorSec: v.ErrorSec}
	w.hdr.BodyStart = int64(headerSize + len(text) + 1 + len(head))
	var hb [headerSize]byte
	w.hdr.encode(hb[:])
	for _, p := range [][]byte{hb[:], text, {'\n'}, head} {
		if err := w.write(p); err != nil {
			return err
		}
	}
	return nil
}

// Active reports a file being written.
func (w *Writer) Active() bool { return w.open }

func (w *Writer) write(p []byte) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(w.fd, p, w.off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.Abort()
			return fmt.Errorf("write() to cache file %q failed: %w", w.tmp, err)
		}
		w.off += int64(n)
		p = p[n:]
	}
	return nil
}

// Write appends body bytes; on an error the file is dropped.
func (w *Writer) Write(p []byte) error {
	if !w.open {
		return nil
	}
	return w.write(p)
}

// Commit completes the file and renames it into place, then the zone knows it.
func (w *Writer) Commit(now int64) error {
	if !w.open {
		return nil
	}
	w.hdr.BodyLen = w.off - w.hdr.BodyStart
	var hb [headerSize]byte
	w.hdr.encode(hb[:])
	if _, err := unix.Pwrite(w.fd, hb[:], 0); err != nil {
		w.Abort()
		return fmt.Errorf("write() to cache file %q failed: %w", w.tmp, err)
	}
	unix.Close(w.fd)
	w.open = false
	path := string(w.z.Path(nil, w.key))
	err := unix.Rename(w.tmp, path)
	if errors.Is(err, unix.ENOENT) {
		w.z.mkdirs(path)
		err = unix.Rename(w.tmp, path)
	}
	if err != nil {
		unix.Unlink(w.tmp)
		w.z.Unlock(w.key)
		return fmt.Errorf("rename() %q to %q failed: %w", w.tmp, path, err)
	}
	w.z.stored(w.key, &w.hdr, w.off, now)
	return nil
}

// Abort drops the file being written.
func (w *Writer) Abort() {
	if w.open {
		unix.Close(w.fd)
		unix.Unlink(w.tmp)
		w.open = false
	}
}

// mkdirs makes the levels' directories of path.
func (z *Zone) mkdirs(path string) {
	for i := len(z.Dir) + 1; i < len(path); i++ {
		if path[i] == '/' {
			unix.Mkdir(path[:i], 0o700)
		}
	}
}

// Entry is an entry's file opened for a hit.
type Entry struct {
	Fd        int
	Head      []byte // the upstream's response head, in the caller's buffer
	BodyStart int64
	BodyLen   int64
	// Read is what the caller's buffer holds of the file from its start: a small
	// body is there whole (BodyStart+BodyLen <= Read), as nginx sends it from the
	// buffer it read the header into.
	Read     int64
	ValidSec int64
	Date     int64
	// Size is the file's size as Open's fstat found it, a regular file; 0 when
	// the head's read showed the file whole without one (its body is in the
	// buffer).
	Size int64
}

// ErrShort is Open's answer when buf cannot hold the entry's head: Needed says how
// much it takes.
type ErrShort struct{ Needed int }

func (e *ErrShort) Error() string { return "cache file head larger than the buffer" }

// Open opens the file of k and reads its head into buf; the key text must match
// (an MD5 collision or a foreign file is a miss). path is scratch for the name.
// It allocates nothing.
func (z *Zone) Open(k Key, text, path, buf []byte) (Entry, []byte, error) {
	path = append(z.Path(path[:0], k), 0)
	fd, errno := eventloop.Openat(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_CLOEXEC)
	if errno != 0 {
		return Entry{}, path, errno
	}
	e, err := readEntry(fd, text, buf)
	if err != nil {
		unix.Close(fd)
	}
	return e, path, err
}

// Reread reads the head of an entry's file again from fd, which Open opened and
// the caller kept (it is not closed on an error), with the same checks.
func Reread(fd int, text, buf []byte) (Entry, error) { return readEntry(fd, text, buf) }

func readEntry(fd int, text, buf []byte) (Entry, error) {
	n, err := eventloop.Pread(fd, buf, 0) // raw when in the page cache
	if err != nil {
		return Entry{}, err
	}
	var h fileHeader
	if err := h.decode(buf[:n]); err != nil {
		return Entry{}, err
	}
	if int64(len(buf)) < h.BodyStart {
		return Entry{}, &ErrShort{Needed: int(h.BodyStart)}
	}
	if int64(n) < h.BodyStart || !bytes.Equal(buf[h.size:h.size+h.KeyLen], text) {
		return Entry{}, errFormat
	}
	// The file must be whole (not cut short by a crash, a full disk or another
	// process): a read shorter than buf ended at its end, else fstat tells.
	size, statSize := int64(n), int64(0)
	if n == len(buf) {
		var st unix.Stat_t
		if e := eventloop.Fstat(fd, &st); e != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return Entry{}, errFormat
		}
		size, statSize = st.Size, st.Size
	}
	if size != h.BodyStart+h.BodyLen {
		return Entry{}, errFormat
	}
	return Entry{Fd: fd, Head: buf[h.size+h.KeyLen+1 : h.BodyStart], BodyStart: h.BodyStart, BodyLen: h.BodyLen, Read: int64(n), ValidSec: h.ValidSec, Date: h.Date, Size: statSize}, nil
}

// Revalidate makes the entry of k fresh until validSec again (an upstream's 304 to
// a conditional request): the file's header is rewritten in place.
func (z *Zone) Revalidate(k Key, validSec int64, now int64) error {
	path := string(z.Path(nil, k))
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open() %q failed: %w", path, err)
	}
	defer unix.Close(fd)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(validSec))
	if _, err := unix.Pwrite(fd, b[:], 8); err != nil {
		return fmt.Errorf("write() to %q failed: %w", path, err)
	}
	s := z.shardOf(k)
	s.mu.Lock()
	if n := s.get(k); n != nil {
		n.validSec, n.updating, n.gen = validSec, false, z.gens.Add(1)
	}
	s.mu.Unlock()
	return nil
}
