package static

import (
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
)

// Every function here makes file system calls on the calling thread, the event
// loop's, as nginx does without aio: open, openat, openat2, stat, fstat, fstatat,
// fcntl and close. On a local file system with a warm dentry cache each is a few
// microseconds; a cold disk, NFS or FUSE can block the loop for as long as the device
// takes. open_file_cache is what keeps them off the request path.

// FileInfo is what a lookup found, nginx's ngx_open_file_info_t.
type FileInfo struct {
	OK       bool          // found; false with Errno 0 is an internal failure
	Errno    syscall.Errno // why not found
	Op       string        // the call that failed, for the error log: "open()", "openat()", "stat()"
	IsDir    bool
	IsFile   bool // a regular file
	Size     int64
	Mtime    int64 // seconds since 1970
	Ino      uint64
	Uid      uint32
	DirectIO bool // opened with O_DIRECT (directio)
}

// File is a file a request looked up: its info and, for a regular file opened for
// reading, its descriptor. Close gives it back (to the cache, or to the system).
type File struct {
	FileInfo
	Fd int // -1 when not open (a folder, an error, a test-only lookup)

	owned   bool        // Fd is this File's own (no cache): Close closes it
	entry   *cacheEntry // the cache's entry this File holds a use of
	cache   *Cache
	minUses int
}

// Close releases the file: a cached descriptor stays open for the next request (as
// long as the cache keeps it); any other is closed. Close on a closed or zero File
// does nothing.
func (f *File) Close() {
	switch {
	case f.entry != nil:
		f.cache.release(f.entry, f.minUses)
		f.entry, f.cache = nil, nil
	case f.owned:
		unix.Close(f.Fd)
		f.owned = false
	}
	f.Fd = -1
}

// OpenOptions are the location's settings a lookup follows.
type OpenOptions struct {
	TestOnly bool // the info is enough (index, try_files): without a cache, only stat
	TestDir  bool // expected to be a folder: one stat when it is one

	Symlinks SymlinkMode
	From     int // disable_symlinks from=: bytes of the path not checked (see SymlinksFrom)

	DirectIO int64 // open files of at least this size with O_DIRECT

	// open_file_cache_valid, _min_uses and _errors.
	Valid   int64 // seconds
	MinUses int
	Errors  bool

	Now int64 // seconds since 1970: the loop's clock
}

// SymlinksFrom returns OpenOptions.From for path and the value of disable_symlinks'
// from= (nginx's ngx_http_set_disable_symlinks): the length of from when it is a
// folder of path, and off when path is from itself.
func SymlinksFrom(path, from []byte, mode SymlinkMode) (SymlinkMode, int) {
	if len(from) == 0 || len(from) > len(path) || string(path[:len(from)]) != string(from) {
		return mode, 0
	}
	if len(from) == len(path) {
		return SymlinksOff, 0
	}
	if path[len(from)] == '/' {
		return mode, len(from)
	}
	if path[len(from)-1] == '/' {
		return mode, len(from) - 1
	}
	return mode, 0
}

// lookup is one attempt at a file: nginx's ngx_open_and_stat_file with its open and
// stat wrappers. It works on a NUL-terminated copy of the name it may cut at slashes.
type lookup struct {
	name []byte      // NUL-terminated
	opts OpenOptions // a copy: a pointer would make the caller's escape

	fd   int    // in: the cached descriptor being retested (-1: none); out: the open one
	ino  uint64 // in: the cached inode when fd >= 0
	info FileInfo
}

const (
	flagRead   = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC // O_NONBLOCK: a FIFO does not hang the open
	flagSearch = unix.O_PATH | unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK | unix.O_CLOEXEC
)

// run looks the name up; false with info.Errno set (or 0 for an internal failure)
// when it cannot.
func (l *lookup) run() bool {
	var st unix.Stat_t
	switch {
	case l.fd >= 0:
		if !l.stat(&st) {
			l.fd = -1
			return false
		}
		if st.Ino == l.ino {
			l.fill(&st)
			return true
		}
	case l.opts.TestDir:
		if !l.stat(&st) {
			l.fd = -1
			return false
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			l.fill(&st)
			return true
		}
	}
	fd := l.open(flagRead)
	if fd < 0 {
		l.fd = -1
		return false
	}
	if e := eventloop.Fstat(fd, &st); e != 0 {
		unix.Close(fd)
		l.fd, l.info.Errno, l.info.Op = -1, 0, "fstat()"
		return false
	}
	l.fill(&st)
	if l.info.IsDir {
		unix.Close(fd)
		l.fd = -1
		return true
	}
	l.fd = fd
	if l.opts.DirectIO <= st.Size {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_DIRECT); err == nil {
				l.info.DirectIO = true
			}
		}
	}
	return true
}

// stat is nginx's ngx_file_info_wrapper: stat(), or with disable_symlinks an open
// that checks the path followed by fstat().
func (l *lookup) stat(st *unix.Stat_t) bool {
	if l.opts.Symlinks == SymlinksOff {
		if e := fstatat(unix.AT_FDCWD, l.name, st, 0); e != 0 {
			l.info.Errno, l.info.Op = e, "stat()"
			return false
		}
		return true
	}
	fd := l.open(flagRead)
	if fd < 0 {
		return false
	}
	defer unix.Close(fd)
	if e := eventloop.Fstat(fd, st); e != 0 {
		l.info.Errno, l.info.Op = e, "fstat()"
		return false
	}
	return true
}

func (l *lookup) fill(st *unix.Stat_t) {
	l.info = FileInfo{
		OK:     true,
		IsDir:  st.Mode&unix.S_IFMT == unix.S_IFDIR,
		IsFile: st.Mode&unix.S_IFMT == unix.S_IFREG,
		Size:   st.Size,
		Mtime:  st.Mtim.Sec,
		Ino:    st.Ino,
		Uid:    st.Uid,
	}
}

// open is nginx's ngx_open_file_wrapper: a plain open(), or with disable_symlinks a
// walk that opens each folder of the path in turn without following links
// (if_not_owner: following them only to an object of the link's owner). With "on",
// one openat2(RESOLVE_NO_SYMLINKS) does the walk; only when it finds a link does
// the walk run again component by component, for nginx's errno (a link to a folder
// on the way is ENOTDIR there, the last component ELOOP).
func (l *lookup) open(mode int) int {
	if l.opts.Symlinks == SymlinksOff {
		fd, e := eventloop.Openat(unix.AT_FDCWD, l.name, mode)
		if e != 0 {
			l.info.Errno, l.info.Op = e, "open()"
		}
		return fd
	}
	at, rest := unix.AT_FDCWD, 0 // rest: where the checked part of the name starts
	if from := l.opts.From; from > 0 && from < len(l.name)-1 {
		l.name[from] = 0
		fd, e := eventloop.Openat(unix.AT_FDCWD, l.name, flagSearch)
		l.name[from] = '/'
		if e != 0 {
			l.info.Errno, l.info.Op = e, "open()"
			return -1
		}
		at, rest = fd, from+1
		defer unix.Close(fd)
	}
	if l.opts.Symlinks == SymlinksOn && !noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(mode), Resolve: unix.RESOLVE_NO_SYMLINKS}
		fd, e := openat2(at, l.name[rest:], &how)
		switch e {
		case 0:
			return fd
		case unix.ENOSYS, unix.EPERM: // no openat2 (seccomp may say EPERM): walk from now on
			noOpenat2.Store(true)
		case unix.ELOOP:
		default:
			l.info.Errno, l.info.Op = e, "openat()"
			return -1
		}
	}
	return l.walk(at, rest, mode)
}

// noOpenat2 is set the first time the kernel refuses openat2.
var noOpenat2 atomic.Bool

// walk opens the name's folders one by one from at (nginx's loop), each with
// O_NOFOLLOW, or for if_not_owner with an owner check. The folders it opens it
// closes; at is the caller's.
func (l *lookup) walk(at, p, mode int) int {
	name := l.name[:len(l.name)-1] // without the NUL
	cur, own := at, false
	if cur == unix.AT_FDCWD && p < len(name) && name[p] == '/' {
		fd, e := eventloop.Openat(unix.AT_FDCWD, rootName, flagSearch)
		if e != 0 {
			l.info.Errno, l.info.Op = e, "openat()"
			return -1
		}
		cur, own, p = fd, true, p+1
	}
	for {
		j := indexByte(name[p:], '/')
		if j < 0 {
			break
		}
		if j == 0 {
			p++
			continue
		}
		end := p + j
		name[end] = 0
		fd, e := l.openComponent(cur, name[p:end+1], flagSearch)
		name[end] = '/'
		if own {
			unix.Close(cur)
		}
		if e != 0 {
			l.info.Errno, l.info.Op = e, "openat()"
			return -1
		}
		cur, own, p = fd, true, end+1
	}
	var fd int
	var e syscall.Errno
	if p == len(name) {
		// A trailing slash: the last component must be a folder; reopen it.
		fd, e = eventloop.Openat(cur, dotName, mode)
	} else {
		fd, e = l.openComponent(cur, l.name[p:], mode)
	}
	if own {
		unix.Close(cur)
	}
	if e != 0 {
		l.info.Errno, l.info.Op = e, "openat()"
		return -1
	}
	return fd
}

var rootName, dotName = []byte("/\x00"), []byte(".\x00")

// openComponent opens one NUL-terminated component under at: with O_NOFOLLOW, or
// for if_not_owner following a link only when the link and what it reaches have the
// same owner (nginx's ngx_openat_file_owner, which compares even when the entry is
// not a link, since it may have been one when it was opened).
func (l *lookup) openComponent(at int, comp []byte, mode int) (int, syscall.Errno) {
	if l.opts.Symlinks != SymlinksIfNotOwner {
		return eventloop.Openat(at, comp, mode|unix.O_NOFOLLOW)
	}
	fd, e := eventloop.Openat(at, comp, mode)
	if e != 0 {
		return -1, e
	}
	var lst, st unix.Stat_t
	if e := fstatat(at, comp, &lst, unix.AT_SYMLINK_NOFOLLOW); e != 0 {
		unix.Close(fd)
		return -1, e
	}
	if e := eventloop.Fstat(fd, &st); e != 0 {
		unix.Close(fd)
		return -1, e
	}
	if st.Uid != lst.Uid {
		unix.Close(fd)
		return -1, unix.ELOOP
	}
	return fd, 0
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// The system calls take NUL-terminated names from the caller's buffers, so a lookup
// does not copy the name into a new string as the unix package's wrappers do.
// An open tries the raw openat2(RESOLVE_CACHED) first, which cannot wait for a
// device (eventloop.OpenCached), then the call the scheduler sees; fstat is
// eventloop.Fstat (raw statx with AT_STATX_DONT_SYNC: cached attributes, no
// question to a server). stat by name stays visible (no stat has
// RESOLVE_CACHED), and so does close, even of a file opened read-only: it is
// the last close of the open file, which runs the file system's flush and
// release. FUSE sends FLUSH and waits for its daemon, NFSv4 sends CLOSE and
// waits for the server (nfs_file_release), ext4 and XFS start the writeback of
// a file truncated and written again (auto_da_alloc, XFS_ITRUNCATED), and an
// unlinked file's blocks are freed then; a raw call that waits would also hold
// a garbage collection's stop of every loop.

func openat2(dirfd int, name []byte, how *unix.OpenHow) (int, syscall.Errno) {
	if fd, e, ok := eventloop.OpenCached(dirfd, name, int(how.Flags), how.Resolve); ok {
		return fd, e
	}
	fd, _, e := syscall.Syscall6(unix.SYS_OPENAT2, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(how)), unsafe.Sizeof(*how), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), 0
}

func fstatat(dirfd int, name []byte, st *unix.Stat_t, flags int) syscall.Errno {
	_, _, e := syscall.Syscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(st)), uintptr(flags), 0, 0)
	return e
}
