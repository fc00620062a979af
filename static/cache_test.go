package static

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func isOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

type cacheFixture struct {
	t    *testing.T
	dir  string
	fs   *Files
	spec *CacheSpec
	opts OpenOptions
}

func newCacheFixture(t *testing.T, spec CacheSpec) *cacheFixture {
	fx := &cacheFixture{t: t, dir: t.TempDir(), fs: NewFiles(), spec: &spec,
		opts: OpenOptions{Valid: 60, MinUses: 1, DirectIO: DirectIOOff, Now: 1000}}
	t.Cleanup(fx.fs.Close)
	return fx
}

func (fx *cacheFixture) write(name, content string) string {
	p := filepath.Join(fx.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		fx.t.Fatal(err)
	}
	return p
}

func (fx *cacheFixture) open(p string) File {
	var f File
	fx.fs.Open(&f, []byte(p), fx.spec, &fx.opts)
	return f
}

func (fx *cacheFixture) cache() *Cache { return fx.fs.caches[fx.spec] }

// Within open_file_cache_valid a hit answers from the cache: the same descriptor, even
// for a file deleted meanwhile; after it the name is checked again.
func TestCacheValid(t *testing.T) {
	fx := newCacheFixture(t, CacheSpec{Max: 10, Inactive: time.Minute})
	p := fx.write("a", "aaa")
	f1 := fx.open(p)
	if !f1.OK || f1.Fd < 0 {
		t.Fatalf("first open: %+v", f1.FileInfo)
	}
	fd := f1.Fd
	f1.Close()
	if !isOpen(fd) {
		t.Fatal("cached descriptor closed after the request")
	}
	os.Remove(p)
	fx.opts.Now += 59
	f2 := fx.open(p)
	if !f2.OK || f2.Fd != fd || f2.Size != 3 {
		t.Fatalf("hit within valid: %+v fd %d (want %d)", f2.FileInfo, f2.Fd, fd)
	}
	f2.Close()
	fx.opts.Now += 2
	f3 := fx.open(p)
	if f3.OK || f3.Errno != unix.ENOENT {
		t.Fatalf("after valid: %+v", f3.FileInfo)
	}
	if isOpen(fd) {
		t.Error("descriptor of the deleted file still open")
	}
	if fx.cache().Len() != 0 {
		t.Errorf("%d entries; the error is not cached without open_file_cache_errors", fx.cache().Len())
	}
}

// After valid, an unchanged file keeps its descriptor; a replaced one gets a new one,
// and the old is closed when the request still sending from it lets go.
func TestCacheRevalidate(t *testing.T) {
	fx := newCacheFixture(t, CacheSpec{Max: 10, Inactive: time.Minute})
	p := fx.write("a", "aaa")
	f1 := fx.open(p)
	fd := f1.Fd
	f1.Close()
	fx.opts.Now += 100
	f2 := fx.open(p)
	if f2.Fd != fd {
		t.Fatalf("unchanged file reopened: %d, was %d", f2.Fd, fd)
	}
	// Replace the file while f2 holds the descriptor.
	tmp := fx.write("a.new", "bbbbb")
	os.Rename(tmp, p)
	fx.opts.Now += 100
	f3 := fx.open(p)
	if !f3.OK || f3.Fd == fd || f3.Size != 5 {
		t.Fatalf("replaced file: %+v fd %d (old %d)", f3.FileInfo, f3.Fd, fd)
	}
	if !isOpen(fd) {
		t.Fatal("old descriptor closed while a request holds it")
	}
	f2.Close()
	if isOpen(fd) {
		t.Error("old descriptor still open after its last holder closed it")
	}
	fd3 := f3.Fd
	f3.Close()
	if !isOpen(fd3) {
		t.Error("new descriptor closed")
	}
}

// open_file_cache_errors caches lookup errors for valid.
func TestCacheErrors(t *testing.T) {
	fx := newCacheFixture(t, CacheSpec{Max: 10, Inactive: time.Minute})
	fx.opts.Errors = true
	p := filepath.Join(fx.dir, "late")
	if f := fx.open(p); f.OK || f.Errno != unix.ENOENT {
		t.Fatalf("missing: %+v", f.FileInfo)
	}
	fx.write("late", "x")
	fx.opts.Now += 30
	if f := fx.open(p); f.OK || f.Errno != unix.ENOENT {
		t.Fatalf("cached error not used: %+v", f.FileInfo)
	}
	fx.opts.Now += 31
	f := fx.open(p)
	if !f.OK || f.Fd < 0 {
		t.Fatalf("after valid: %+v", f.FileInfo)
	}
	f.Close()
}

// A descriptor used fewer than open_file_cache_min_uses times is closed after each
// request; the entry stays and counts the uses.
func TestCacheMinUses(t *testing.T) {
	fx := newCacheFixture(t, CacheSpec{Max: 10, Inactive: time.Minute})
	fx.opts.MinUses = 2
	p := fx.write("a", "aaa")
	f1 := fx.open(p)
	fd1 := f1.Fd
	f1.Close()
	if isOpen(fd1) {
		t.Fatal("descriptor kept after one use of two")
	}
	if fx.cache().Len() != 1 {
		t.Fatal("entry dropped")
	}
	f2 := fx.open(p)
	fd2 := f2.Fd
	f2.Close()
	if !isOpen(fd2) {
		t.Fatal("descriptor closed after the second use")
	}
	f3 := fx.open(p)
	if f3.Fd != fd2 {
		t.Errorf("third use opened again: %d, want %d", f3.Fd, fd2)
	}
	f3.Close()
}

// At max entries the least recently used is dropped; one a request holds is closed
// when it lets go.
func TestCacheMax(t *testing.T) {
	fx := newCacheFixture(t, CacheSpec{Max: 2, Inactive: time.Minute})
	a, b, c := fx.write("a", "a"), fx.write("b", "b"), fx.write("c", "c")
	fa := fx.open(a) // held
	fb := fx.open(b)
	fb.Close()
	fx.opts.Now++
	fb = fx.open(b) // b is now the most recently used; a the least
	fdB := fb.Fd
	fb.Close()
	fc := fx.open(c)
	fdC := fc.Fd
	fc.Close()
	if fx.cache().Len() != 2 || fx.cache().entries[a] != nil {
		t.Fatalf("entries %d, a cached %v", fx.cache().Len(), fx.cache().entries[a] != nil)
	}
	if !isOpen(fa.Fd) {
		t.Fatal("evicted descriptor closed while held")
	}
	fd := fa.Fd
	fa.Close()
	if isOpen(fd) {
		t.Error("evicted descriptor open after its holder closed it")
	}
	if !isOpen(fdB) || !isOpen(fdC) {
		t.Error("cached descriptors closed")
	}
}

// Entries not used for inactive go when a request ends (one or two at a time).
func TestCacheInactive(t *testing.T) {
	fx := newCacheFixture(t, CacheSpec{Max: 10, Inactive: 20 * time.Second})
	a, b := fx.write("a", "a"), fx.write("b", "b")
	fa := fx.open(a)
	fdA := fa.Fd
	fa.Close()
	fx.opts.Now += 21
	fb := fx.open(b)
	fb.Close()
	if fx.cache().Len() != 1 || isOpen(fdA) {
		t.Errorf("inactive entry kept: %d entries, fd open %v", fx.cache().Len(), isOpen(fdA))
	}
}

// Folders are cached without a descriptor, and a Files' Close closes what no request
// holds.
func TestCacheDirsAndClose(t *testing.T) {
	fx := newCacheFixture(t, CacheSpec{Max: 10, Inactive: time.Minute})
	d := filepath.Join(fx.dir, "d")
	os.Mkdir(d, 0o755)
	fd := fx.open(d)
	if !fd.OK || !fd.IsDir || fd.Fd != -1 {
		t.Fatalf("folder: %+v fd %d", fd.FileInfo, fd.Fd)
	}
	fd.Close()
	p := fx.write("a", "a")
	held := fx.open(p)
	other := fx.open(fx.write("b", "b"))
	otherFd := other.Fd
	other.Close()
	fx.fs.Close()
	if isOpen(otherFd) {
		t.Error("Close left a cached descriptor open")
	}
	if !isOpen(held.Fd) {
		t.Error("Close closed a held descriptor")
	}
	fdHeld := held.Fd
	held.Close()
	if isOpen(fdHeld) {
		t.Error("held descriptor open after its holder closed it")
	}
}

// A different disable_symlinks setting for the same name looks it up again.
func TestCacheSymlinkSettings(t *testing.T) {
	fx := newCacheFixture(t, CacheSpec{Max: 10, Inactive: time.Minute})
	fx.write("real", "r")
	p := filepath.Join(fx.dir, "link")
	os.Symlink("real", p)
	f := fx.open(p)
	if !f.OK {
		t.Fatal(f.Errno)
	}
	f.Close()
	fx.opts.Symlinks = SymlinksOn
	f = fx.open(p)
	if f.OK || f.Errno != unix.ELOOP {
		t.Fatalf("cached answer reused across disable_symlinks settings: %+v", f.FileInfo)
	}
}
