package static

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestSymlinksFrom(t *testing.T) {
	tests := []struct {
		path, from string
		mode       SymlinkMode
		off        int
	}{
		{"/srv/www/a", "/srv/www", SymlinksOn, 8},
		{"/srv/www/a", "/srv/www/", SymlinksOn, 8},
		{"/srv/www/a", "/srv/ww", SymlinksOn, 0},
		{"/srv/www", "/srv/www", SymlinksOff, 0},
		{"/srv/www/a", "", SymlinksOn, 0},
		{"/srv/www/a", "/other", SymlinksOn, 0},
		{"/a", "/srv/www/a/b", SymlinksOn, 0},
	}
	for _, tt := range tests {
		mode, off := SymlinksFrom([]byte(tt.path), []byte(tt.from), SymlinksOn)
		if mode != tt.mode || off != tt.off {
			t.Errorf("SymlinksFrom(%q, %q) = %v %d, want %v %d", tt.path, tt.from, mode, off, tt.mode, tt.off)
		}
	}
}

// symlinkTree: root/real/f.txt, root/link -> real, root/real/flink.txt -> f.txt.
func symlinkTree(t *testing.T) string {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "real/sub"), 0o755)
	os.WriteFile(filepath.Join(root, "real/f.txt"), []byte("f"), 0o644)
	os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link"))
	os.Symlink("f.txt", filepath.Join(root, "real/flink.txt"))
	return root
}

func lookupErrno(t *testing.T, path string, o OpenOptions) syscall.Errno {
	t.Helper()
	var f File
	NewFiles().Open(&f, []byte(path), nil, &o)
	defer f.Close()
	if f.OK {
		return 0
	}
	return f.Errno
}

// disable_symlinks on gives nginx's errno whether openat2 or the walk does the
// work: ENOTDIR for a link on the way (404), ELOOP for the file itself (403).
func TestDisableSymlinksErrno(t *testing.T) {
	root := symlinkTree(t)
	defer noOpenat2.Store(noOpenat2.Load())
	for _, viaOpenat2 := range []bool{true, false} {
		noOpenat2.Store(!viaOpenat2)
		for path, want := range map[string]syscall.Errno{
			"real/f.txt":     0,
			"real/sub/":      0,
			"real/f.txt/":    unix.ENOTDIR,
			"link/f.txt":     unix.ENOTDIR,
			"real/flink.txt": unix.ELOOP,
			"link":           unix.ELOOP,
			"real/nope":      unix.ENOENT,
		} {
			for _, testOnly := range []bool{false, true} {
				got := lookupErrno(t, root+"/"+path, OpenOptions{Symlinks: SymlinksOn, TestOnly: testOnly})
				if got != want {
					t.Errorf("openat2 %v, test-only %v: %s: %v, want %v", viaOpenat2, testOnly, path, got, want)
				}
			}
			// from= the tree's root: links before it are not checked, after it they are.
			from := len(root)
			if got := lookupErrno(t, root+"/"+path, OpenOptions{Symlinks: SymlinksOn, From: from}); got != want {
				t.Errorf("openat2 %v, from=root: %s: %v, want %v", viaOpenat2, path, got, want)
			}
		}
		if viaOpenat2 && noOpenat2.Load() {
			t.Log("the kernel refused openat2: both passes walked")
		}
		// A link to the folder above from= is followed.
		linkRoot := filepath.Join(root, "link")
		if got := lookupErrno(t, filepath.Join(linkRoot, "f.txt"), OpenOptions{Symlinks: SymlinksOn, From: len(linkRoot)}); got != 0 {
			t.Errorf("openat2 %v: link above from=: %v", viaOpenat2, got)
		}
	}
	// Off follows every link.
	for _, path := range []string{"link/f.txt", "real/flink.txt"} {
		if got := lookupErrno(t, filepath.Join(root, path), OpenOptions{}); got != 0 {
			t.Errorf("off: %s: %v", path, got)
		}
	}
}

func TestDisableSymlinksIfNotOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files other owners")
	}
	root := symlinkTree(t)
	os.WriteFile(filepath.Join(root, "real/other.txt"), []byte("o"), 0o644)
	os.Chown(filepath.Join(root, "real/other.txt"), 65534, 65534)
	os.Symlink("other.txt", filepath.Join(root, "real/olink.txt"))                   // root's link to nobody's file
	os.Symlink("other.txt", filepath.Join(root, "real/nlink.txt"))                   // nobody's link to nobody's file
	os.Lchown(filepath.Join(root, "real/nlink.txt"), 65534, 65534)                   //
	os.Symlink(filepath.Join(root, "real/sub"), filepath.Join(root, "real/dirlink")) // root's link to root's folder
	os.Chown(filepath.Join(root, "real/sub"), 65534, 65534)
	for path, want := range map[string]syscall.Errno{
		"real/f.txt":         0,
		"real/flink.txt":     0, // same owner
		"link/f.txt":         0,
		"real/olink.txt":     unix.ELOOP,
		"real/nlink.txt":     0,
		"real/dirlink/":      unix.ELOOP, // the folder now belongs to nobody
		"real/dirlink/x.txt": unix.ELOOP,
	} {
		if got := lookupErrno(t, root+"/"+path, OpenOptions{Symlinks: SymlinksIfNotOwner}); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

// A FIFO opens without waiting for a writer (O_NONBLOCK) and is not a regular file.
func TestLookupFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan File, 1)
	go func() {
		var f File
		NewFiles().Open(&f, []byte(p), nil, &OpenOptions{DirectIO: DirectIOOff})
		done <- f
	}()
	select {
	case f := <-done:
		defer f.Close()
		if !f.OK || f.IsFile || f.IsDir {
			t.Errorf("fifo: %+v", f.FileInfo)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("open of a FIFO blocked")
	}
}

func TestLookupInfo(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("12345"), 0o644)
	mt := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(p, mt, mt)
	var f File
	fs := NewFiles()
	fs.Open(&f, []byte(p), nil, &OpenOptions{DirectIO: DirectIOOff})
	if !f.OK || !f.IsFile || f.Size != 5 || f.Mtime != mt.Unix() || f.Fd < 0 || f.DirectIO {
		t.Fatalf("%+v fd %d", f.FileInfo, f.Fd)
	}
	fd := f.Fd
	f.Close()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("uncached descriptor not closed: %v", err)
	}
	// Test-only without a cache opens nothing.
	fs.Open(&f, []byte(p), nil, &OpenOptions{TestOnly: true})
	if !f.OK || f.Fd != -1 || f.Size != 5 {
		t.Errorf("test-only: %+v fd %d", f.FileInfo, f.Fd)
	}
	fs.Open(&f, []byte(dir), nil, &OpenOptions{})
	if !f.OK || !f.IsDir || f.Fd != -1 {
		t.Errorf("folder: %+v fd %d", f.FileInfo, f.Fd)
	}
	fs.Open(&f, []byte(filepath.Join(dir, "nope")), nil, &OpenOptions{})
	if f.OK || f.Errno != unix.ENOENT || f.Op != "open()" {
		t.Errorf("missing: %+v", f.FileInfo)
	}
	// With disable_symlinks the walk opens component by component: nginx's
	// error log names openat() then.
	fs.Open(&f, []byte(filepath.Join(dir, "nope")), nil, &OpenOptions{Symlinks: SymlinksOn})
	if f.OK || f.Errno != unix.ENOENT || f.Op != "openat()" {
		t.Errorf("missing, disable_symlinks on: %+v", f.FileInfo)
	}
	// directio: files of at least the size are opened O_DIRECT where the file
	// system allows it; smaller ones never.
	fs.Open(&f, []byte(p), nil, &OpenOptions{DirectIO: 6})
	if f.DirectIO {
		t.Error("directio on a file below the size")
	}
	f.Close()
	fs.Open(&f, []byte(p), nil, &OpenOptions{DirectIO: 5})
	if f.DirectIO {
		fl, _ := unix.FcntlInt(uintptr(f.Fd), unix.F_GETFL, 0)
		if fl&unix.O_DIRECT == 0 {
			t.Error("DirectIO without O_DIRECT")
		}
	}
	f.Close()
}
