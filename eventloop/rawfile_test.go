package eventloop

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/internal/coldfs"
)

// evict writes fd's dirty pages back and drops [off, off+n) from the page cache
// (posix_fadvise DONTNEED), and checks with cachestat that they are gone.
func evict(t testing.TB, fd int, off, n int64) {
	t.Helper()
	if err := unix.Fdatasync(fd); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(fd, off, n, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	r := unix.CachestatRange{Off: uint64(off), Len: uint64(n)}
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(fd), &r, &st, 0); err != nil {
		t.Skipf("cachestat: %v", err)
	}
	if st.Cache != 0 {
		t.Skipf("%d pages still cached after POSIX_FADV_DONTNEED", st.Cache)
	}
}

// evictedNowait evicts [off, off+n) of fd and checks that a RWF_NOWAIT read from
// the file's start now reads want bytes (EAGAIN for 0), the state the next check
// needs. Where the pages came back between the eviction and the read (a CI run
// saw one succeed whole once), it evicts them again, a few times, then skips.
func evictedNowait(t *testing.T, fd int, off, n int64, buf []byte, want int) {
	t.Helper()
	var got int
	var e unix.Errno
	for range 5 {
		evict(t, fd, off, n)
		got, e = nowaitRead(fd, buf, 0)
		if want == 0 && e == unix.EAGAIN || want > 0 && e == 0 && got == want {
			return
		}
	}
	t.Skipf("RWF_NOWAIT read after evicting [%d, %d): %d bytes, errno %v; want %d (EAGAIN for 0): the pages came back each time", off, off+n, got, e, want)
}

// nowaitRead is the raw attempt of Pread on its own: preadv2 with RWF_NOWAIT.
func nowaitRead(fd int, p []byte, off int64) (int, unix.Errno) {
	iov := unix.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	r, _, e := unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
	return int(r), e
}

// TestPreadPageCache: Pread reads a file right whether its pages are in the page
// cache (the raw preadv2 RWF_NOWAIT reads it all), none are (EAGAIN: pread
// through the scheduler), or a part is (the raw read stops at the first page
// not cached, pread reads the rest); and stops at the end of the file when the
// raw read ends on a page boundary there.
func TestPreadPageCache(t *testing.T) {
	ps := int(pageSize)
	size := 4*ps + 100
	path, data := patternFile(t, size, 21)
	fd := openFd(t, path)
	defer unix.Close(fd)
	buf := make([]byte, size+ps)

	check := func(what string, off, want int) {
		t.Helper()
		clear(buf)
		n, err := Pread(fd, buf, int64(off))
		if err != nil || n != want || !bytes.Equal(buf[:n], data[off:off+want]) {
			t.Fatalf("%s: Pread at %d = %d, %v; want the file's %d bytes", what, off, n, err, want)
		}
	}

	evictedNowait(t, fd, 0, int64(size), buf, 0)
	check("evicted", 0, size)

	if n, e := nowaitRead(fd, buf, 0); e != 0 || n != size {
		t.Fatalf("RWF_NOWAIT read of a cached file: %d, %v", n, e)
	}
	check("cached", 0, size)
	check("cached, from an offset", 3, size-3)

	evictedNowait(t, fd, int64(2*ps), int64(size-2*ps), buf, 2*ps)
	check("half evicted", 0, size)

	check("to an end off a page boundary", 3*ps+100, ps)
	// The end of the file on a page boundary: the raw read is short there as
	// it is at a page not cached; pread finds the end.
	if err := unix.Truncate(path, int64(2*ps)); err != nil {
		t.Fatal(err)
	}
	check("page-aligned end", 0, 2*ps)
	check("past the end", 2*ps, 0)

	if _, err := Pread(-1, buf, 0); err != unix.EBADF {
		t.Fatalf("bad fd: %v", err)
	}
}

// TestSendfilePageCache: resident tells a range in the page cache from one that
// is not, and a connection with sendfile on sends a file right either way (raw
// sendfile for the cached file, through the scheduler for the evicted one).
func TestSendfilePageCache(t *testing.T) {
	const size = 1 << 20
	path, data := patternFile(t, size, 22)
	fd := openFd(t, path)
	defer unix.Close(fd)
	for _, cached := range []bool{false, true} {
		evict(t, fd, 0, size)
		if resident(fd, 0, size) {
			t.Fatal("an evicted file found resident")
		}
		if cached {
			if _, err := io.Copy(io.Discard, io.NewSectionReader(fileReaderAt(fd), 0, size)); err != nil {
				t.Fatal(err)
			}
			if !resident(fd, 0, size) || !resident(fd, 4095, 2) {
				t.Fatal("a file just read not found resident")
			}
		} else {
			// One page read back is not the range.
			if _, err := unix.Pread(fd, make([]byte, 1), 8192); err != nil {
				t.Fatal(err)
			}
			if resident(fd, 0, size) || !resident(fd, 8192, 100) {
				t.Fatal("resident does not tell one page from the range")
			}
		}
		h := &funcHandler{data: func(c Conn, _ []byte) {
			c.SetSendfile(true, 0)
			if err := c.WriteFile(fd, 0, size); err != nil {
				t.Error(err)
			}
			_ = c.Close()
		}}
		_, addr := startLoop(t, Config{Handler: h})
		r := dial(t, addr)
		if _, err := r.Write([]byte("go")); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("cached %v: got %d bytes (%v), the file's %d altered or short", cached, len(got), err, size)
		}
	}
}

type fileReaderAt int

func (f fileReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := unix.Pread(int(f), p, off)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// BenchmarkResident: cachestat(2) of a cached 1 MiB range, the check before a
// raw sendfile of it.
func BenchmarkResident(b *testing.B) {
	path, _ := patternFile(b, 1<<20, 23)
	fd := openFd(b, path)
	defer unix.Close(fd)
	if _, err := Pread(fd, make([]byte, 1<<20), 0); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if !resident(fd, 0, 1<<20) {
			b.Fatal("not resident")
		}
	}
}

// BenchmarkPread: a cached 32 KiB read, raw (RWF_NOWAIT) and through the
// scheduler.
func BenchmarkPread(b *testing.B) {
	path, _ := patternFile(b, 1<<20, 24)
	fd := openFd(b, path)
	defer unix.Close(fd)
	buf := make([]byte, 32<<10)
	b.Run("nowait", func(b *testing.B) {
		for b.Loop() {
			if _, err := Pread(fd, buf, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("syscall", func(b *testing.B) {
		for b.Loop() {
			if _, err := unix.Pread(fd, buf, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestResidentNotPermitted: cachestat's EPERM (a file the process neither owns
// nor could write) makes that file not resident, not every file: run on a
// thread whose effective uid is nobody's (setresuid is per thread in Linux),
// with a root-owned read-only file.
func TestResidentNotPermitted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch a thread's uid")
	}
	path, _ := patternFile(t, 8192, 25)
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	fd := openFd(t, path)
	defer unix.Close(fd)
	if _, err := Pread(fd, make([]byte, 8192), 0); err != nil {
		t.Fatal(err)
	}
	if !resident(fd, 0, 8192) {
		t.Fatal("a cached file not resident")
	}
	done := make(chan unix.Errno)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), 65534, ^uintptr(0)); e != 0 {
			done <- e
			return
		}
		r := unix.CachestatRange{Len: 8192}
		var st unix.Cachestat_t
		_, _, e := unix.RawSyscall6(unix.SYS_CACHESTAT, uintptr(fd), uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
		if e == unix.EPERM && resident(fd, 0, 8192) {
			e = 0 // resident despite EPERM
		}
		done <- e
	}()
	switch e := <-done; e {
	case unix.EPERM:
	case 0:
		t.Fatal("resident with cachestat refused")
	default:
		t.Skipf("cachestat as nobody: %v (a kernel without the permission check)", e)
	}
	if noCachestat.Load() || !resident(fd, 0, 8192) {
		t.Fatal("one file's EPERM turned cachestat off for every file")
	}
}

// TestFstat: Fstat (raw statx) answers as fstat does for a regular file, after
// the file changed under the descriptor (truncated, written), for a directory,
// for a file of a file system just mounted again (its inode read from the
// device by the open), and through its fallback; a closed descriptor is EBADF;
// it allocates nothing.
func TestFstat(t *testing.T) {
	path, _ := patternFile(t, 10000, 31)
	fd := openFd(t, path)
	defer unix.Close(fd)
	same := func(what string, fd int) {
		t.Helper()
		var got, want unix.Stat_t
		if e := Fstat(fd, &got); e != 0 {
			t.Fatalf("%s: Fstat: %v", what, e)
		}
		if err := unix.Fstat(fd, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s: Fstat\n%+v\nfstat\n%+v", what, got, want)
		}
	}
	for _, fallback := range []bool{false, true} {
		noStatx.Store(fallback)
		same("regular file", fd)
		if err := os.Truncate(path, 3000); err != nil {
			t.Fatal(err)
		}
		same("truncated after open", fd)
		var st unix.Stat_t
		if Fstat(fd, &st); st.Size != 3000 || st.Mode&unix.S_IFMT != unix.S_IFREG {
			t.Fatalf("truncated file: size %d mode %#o", st.Size, st.Mode)
		}
		if err := os.WriteFile(path, make([]byte, 20000), 0o600); err != nil {
			t.Fatal(err)
		}
		same("rewritten", fd)
		dfd, err := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		same("directory", dfd)
		if Fstat(dfd, &st); st.Mode&unix.S_IFMT != unix.S_IFDIR {
			t.Fatalf("directory: mode %#o", st.Mode)
		}
		unix.Close(dfd)
		if e := Fstat(1<<20, &st); e != unix.EBADF {
			t.Fatalf("closed fd: %v, want EBADF", e)
		}
	}
	noStatx.Store(false)
	var st unix.Stat_t
	if a := testing.AllocsPerRun(100, func() { Fstat(fd, &st) }); a != 0 {
		t.Fatalf("Fstat allocates %v times", a)
	}
	if noStatx.Load() {
		t.Fatal("statx refused here: the raw call was not tested")
	}

	fs := coldfs.New(t)
	cold := filepath.Join(fs.Dir, "cold")
	if err := os.WriteFile(cold, make([]byte, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	fs.Remount(t)
	cfd := openFd(t, cold)
	same("cold file", cfd)
	unix.Close(cfd)
}

// BenchmarkFstat: Fstat's raw statx against fstat through the scheduler.
func BenchmarkFstat(b *testing.B) {
	path, _ := patternFile(b, 1<<20, 33)
	fd := openFd(b, path)
	defer unix.Close(fd)
	var st unix.Stat_t
	b.Run("statx-raw", func(b *testing.B) {
		for range b.N {
			if Fstat(fd, &st) != 0 {
				b.Fatal("Fstat failed")
			}
		}
	})
	b.Run("fstat", func(b *testing.B) {
		for range b.N {
			if err := unix.Fstat(fd, &st); err != nil {
				b.Fatal(err)
			}
		}
	})
}
