package static

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/internal/coldfs"
)

// TestLookupColdPath: a lookup opens the right file and gives nginx's errno
// whether the path's dentries are in the dentry cache (the raw openat2
// RESOLVE_CACHED opens it) or not (EAGAIN: the open the scheduler sees), for
// disable_symlinks off, on (openat2 RESOLVE_NO_SYMLINKS) and if_not_owner (the
// walk's openat per folder); and the file's bytes read back from the lookup's
// descriptor, whose pages the remount dropped too, are the file's.
func TestLookupColdPath(t *testing.T) {
	fs := coldfs.New(t)
	body := bytes.Repeat([]byte("cold file "), 1000)
	if err := os.MkdirAll(filepath.Join(fs.Dir, "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fs.Dir, "a/b/f.txt"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f.txt", filepath.Join(fs.Dir, "a/b/link.txt")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(fs.Dir, "a/b/f.txt")
	cached := func() bool {
		fd, _, ok := eventloop.OpenCached(unix.AT_FDCWD, append([]byte(file), 0), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if ok && fd >= 0 {
			unix.Close(fd)
		}
		return ok
	}
	modes := []struct {
		name string
		mode SymlinkMode
		link unix.Errno // the lookup of link.txt
	}{{"off", SymlinksOff, 0}, {"on", SymlinksOn, unix.ELOOP}, {"if_not_owner", SymlinksIfNotOwner, 0}}
	for _, m := range modes {
		for _, cold := range []bool{true, false} {
			if cold {
				fs.Remount(t)
				if cached() {
					t.Fatal("RESOLVE_CACHED opened a path just remounted")
				}
			} else {
				if _, err := os.Stat(file); err != nil {
					t.Fatal(err)
				}
				if !cached() {
					t.Fatal("RESOLVE_CACHED failed on a path just looked up")
				}
			}
			o := OpenOptions{Symlinks: m.mode, DirectIO: DirectIOOff}
			var f File
			NewFiles().Open(&f, []byte(file), nil, &o)
			if !f.OK || !f.IsFile || f.Size != int64(len(body)) || f.Fd < 0 {
				t.Fatalf("%s cold=%v: %+v fd %d", m.name, cold, f.FileInfo, f.Fd)
			}
			got := make([]byte, len(body)+1)
			n, err := eventloop.Pread(f.Fd, got, 0)
			f.Close()
			if err != nil || !bytes.Equal(got[:n], body) {
				t.Fatalf("%s cold=%v: read %d bytes (%v), not the file's", m.name, cold, n, err)
			}
			if cold {
				fs.Remount(t)
			}
			if e := lookupErrno(t, filepath.Join(fs.Dir, "a/b/link.txt"), o); e != m.link {
				t.Errorf("%s cold=%v: link: %v, want %v", m.name, cold, e, m.link)
			}
			if cold {
				fs.Remount(t)
			}
			if e := lookupErrno(t, filepath.Join(fs.Dir, "a/nope/f.txt"), o); e != unix.ENOENT {
				t.Errorf("%s cold=%v: missing: %v", m.name, cold, e)
			}
		}
	}
}
