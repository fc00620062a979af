package eventloop

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// File system calls on a loop: raw (like the socket calls of rawsys.go) only in
// the form in which the kernel promises not to wait for a device, with the call
// the scheduler sees as the fallback. A file call that waits for a disk in a raw
// system call would hold the loop's P where sysmon cannot hand it to another
// thread; one through syscall.Syscall that lasts past sysmon's tick (20 µs while
// it is retaking) gets its P taken and handed back through futexes, and puts
// sysmon back to its 20 µs wakes.

var pageSize = int64(os.Getpagesize())

// noNowait is set when preadv2(RWF_NOWAIT) is refused as unknown (a kernel
// before 4.14): Pread then goes straight to pread.
var noNowait atomic.Bool

// Pread is pread(2) of a regular file for a loop: preadv2 with RWF_NOWAIT
// (raw: it returns EAGAIN instead of waiting for a page not in the page cache),
// else pread through the scheduler. Like pread of a regular file, it returns
// fewer bytes than len(p) only at the end of the file. fd must not be open with
// O_DIRECT: RWF_NOWAIT keeps a direct read from waiting for locks, not for the
// device (numaproxy opens none: directio takes only off).
func Pread(fd int, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n := 0
	if !noNowait.Load() {
		iov := unix.Iovec{Base: &p[0]}
		iov.SetLen(len(p))
		r, _, e := unix.RawSyscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1,
			uintptr(off), uintptr(uint64(off)>>32>>32), unix.RWF_NOWAIT)
		switch {
		case e == 0:
			n = int(r)
			// A read the page cache cut short stops at a page boundary; one
			// that stops elsewhere, or reads nothing, met the end of the file.
			if n == len(p) || n == 0 || (off+int64(n))%pageSize != 0 {
				return n, nil
			}
		case e == unix.EINVAL || e == unix.ENOSYS:
			noNowait.Store(true) // unknown flag or call; a bad fd answers EBADF
		}
		// EAGAIN, EOPNOTSUPP (a file system without RWF_NOWAIT: NFS, FUSE) or
		// any error: pread says what the file holds.
	}
	for {
		k, err := unix.Pread(fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
		return n + k, nil
	}
}

// noCachestat is set when there is no cachestat(2) (before Linux 6.5):
// sendfile then always goes through the scheduler.
var noCachestat atomic.Bool

// resident reports whether every page of [off, off+n) of fd is in the page
// cache now (cachestat(2), raw: it walks the page cache and never reads). A
// page in the page cache sendfile(2) sends without waiting for the device.
// cachestat answers EPERM for a file the process neither owns nor could open
// for writing (newer kernels, as mincore): such a file is never resident
// here, and its sendfile is the scheduler's.
func resident(fd int, off, n int64) bool {
	if n <= 0 || noCachestat.Load() {
		return false
	}
	r := unix.CachestatRange{Off: uint64(off), Len: uint64(n)}
	var st unix.Cachestat_t
	_, _, e := unix.RawSyscall6(unix.SYS_CACHESTAT, uintptr(fd), uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
	if e != 0 {
		if e == unix.ENOSYS {
			noCachestat.Store(true)
		}
		return false
	}
	pages := (off+n+pageSize-1)/pageSize - off/pageSize
	return int64(st.Cache) >= pages
}

// rawSendfile is sendfile(2) without the scheduler, for a range resident found
// in the page cache.
func rawSendfile(out, in int, off *int64, n int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDFILE, uintptr(out), uintptr(in), uintptr(unsafe.Pointer(off)), uintptr(n), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// resolveCached is RESOLVE_CACHED (Linux 5.12), not in x/sys/unix.
const resolveCached = 0x20

// noResolveCached: openat2 or RESOLVE_CACHED is refused here (before Linux
// 5.12, or a seccomp filter); OpenCached then leaves every open to the caller.
var noResolveCached = func() bool {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveCached}
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &how)
	if err == nil {
		unix.Close(fd)
	}
	return err == unix.ENOSYS || err == unix.EPERM || err == unix.EINVAL
}()

// oPathFlags are the flags openat2 accepts with O_PATH (openat drops the others).
const oPathFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// OpenCached is openat2(dirfd, name, flags, resolve|RESOLVE_CACHED), raw: the
// kernel fails it with EAGAIN unless every component of the path is in the
// dentry cache, so it reads no directory from a device and waits for no
// network file system (io_uring makes the same attempt inline before it hands
// an open to a worker). A file that is not opened for O_PATH is opened
// O_NONBLOCK too, as io_uring does, so that a lease or a device's open does not
// wait either. name is NUL-terminated. ok is false when the caller must make
// its own call: a path not all cached, or no openat2 with RESOLVE_CACHED here;
// otherwise fd or e is the answer (ENOENT from a cached negative dentry is one).
func OpenCached(dirfd int, name []byte, flags int, resolve uint64) (fd int, e syscall.Errno, ok bool) {
	if noResolveCached {
		return -1, 0, false
	}
	if flags&unix.O_PATH != 0 {
		flags &= oPathFlags
	} else {
		flags |= unix.O_NONBLOCK
	}
	how := unix.OpenHow{Flags: uint64(flags), Resolve: resolve | resolveCached}
	r, _, e := unix.RawSyscall6(unix.SYS_OPENAT2, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
	switch e {
	case 0:
		return int(r), 0, true
	case unix.EAGAIN, unix.EPERM, unix.EINVAL:
		// Not all cached; or flags openat2 refuses (openat may take them), or
		// a seccomp filter: the caller's call answers.
		return -1, 0, false
	}
	return -1, e, true
}

// Openat is openat(2) for a loop: OpenCached first, else the openat the
// scheduler sees. name is NUL-terminated; it allocates nothing (the unix
// package's wrapper copies the name into a string).
func Openat(dirfd int, name []byte, flags int) (int, syscall.Errno) {
	if fd, e, ok := OpenCached(dirfd, name, flags, 0); ok {
		return fd, e
	}
	fd, _, e := syscall.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])), uintptr(flags), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), 0
}

// noStatx is set when statx is refused (before Linux 4.11, or a seccomp
// filter): Fstat then goes straight to fstat.
var noStatx atomic.Bool

// statxMask is what Fstat asks statx for: fstat's fields.
const statxMask = unix.STATX_BASIC_STATS

// emptyPath is the name statx takes with AT_EMPTY_PATH: fd itself.
var emptyPath = [1]byte{0}

// Fstat is fstat(2) for a loop: statx(fd, "", AT_EMPTY_PATH|AT_STATX_DONT_SYNC)
// raw, else fstat through the scheduler. An open file's inode is in memory, and
// local file systems fill the attributes from it; DONT_SYNC makes those that
// would ask a server answer from their cached attributes instead (NFS checks it
// before it flushes dirty pages or revalidates, fs/nfs/inode.c nfs_getattr;
// FUSE does not send GETATTR, fs/fuse/dir.c fuse_update_get_attr), so it does
// not wait for a device or a daemon. What it fills is fstat's answer, less
// what statx does not report here (a zero field). It allocates nothing.
func Fstat(fd int, st *unix.Stat_t) syscall.Errno {
	if !noStatx.Load() {
		var sx unix.Statx_t
		_, _, e := unix.RawSyscall6(unix.SYS_STATX, uintptr(fd), uintptr(unsafe.Pointer(&emptyPath[0])),
			unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, statxMask, uintptr(unsafe.Pointer(&sx)), 0)
		switch e {
		case 0:
			statToStat(&sx, st)
			return 0
		case unix.ENOSYS, unix.EINVAL, unix.EPERM:
			// No statx, or a seccomp filter that refuses it (EPERM is no answer
			// of statx on a descriptor: it needs no permission on the file).
			noStatx.Store(true)
		default:
			return e // EBADF, ENOMEM, EIO...: fstat would say the same
		}
	}
	_, _, e := syscall.Syscall(unix.SYS_FSTAT, uintptr(fd), uintptr(unsafe.Pointer(st)), 0)
	return e
}

// statToStat copies statx's answer into fstat's form.
func statToStat(sx *unix.Statx_t, st *unix.Stat_t) {
	*st = unix.Stat_t{
		Dev:    unix.Mkdev(sx.Dev_major, sx.Dev_minor),
		Ino:    sx.Ino,
		Mode:   uint32(sx.Mode),
		Uid:    sx.Uid,
		Gid:    sx.Gid,
		Rdev:   unix.Mkdev(sx.Rdev_major, sx.Rdev_minor),
		Size:   int64(sx.Size),
		Blocks: int64(sx.Blocks),
		Atim:   unix.Timespec{Sec: sx.Atime.Sec, Nsec: int64(sx.Atime.Nsec)},
		Mtim:   unix.Timespec{Sec: sx.Mtime.Sec, Nsec: int64(sx.Mtime.Nsec)},
		Ctim:   unix.Timespec{Sec: sx.Ctime.Sec, Nsec: int64(sx.Ctime.Nsec)},
	}
	setInt(&st.Nlink, sx.Nlink) // their types differ between architectures
	setInt(&st.Blksize, sx.Blksize)
}

func setInt[T, U ~int32 | ~int64 | ~uint32 | ~uint64](dst *T, v U) { *dst = T(v) }
