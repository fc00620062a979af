// Package coldfs gives tests a small ext4 file system on a loop device whose
// dentries and pages they can drop from the kernel's caches by mounting it
// again: the first lookup of a path after Remount reads its directories from
// the device (openat2 RESOLVE_CACHED fails with EAGAIN), and the first read of
// a file its pages. It needs root, mkfs.ext4 and loop devices; without them the
// test is skipped.
package coldfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// FS is the mounted file system; Dir is its mount point.
type FS struct {
	Dir string
	img string
}

// New makes and mounts a 16 MiB ext4 file system, unmounted at the end of the test.
func New(t testing.TB) *FS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("coldfs: mounting needs root")
	}
	tmp := t.TempDir()
	f := &FS{Dir: filepath.Join(tmp, "mnt"), img: filepath.Join(tmp, "fs.img")}
	if err := os.Mkdir(f.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := os.Create(f.img)
	if err == nil {
		err = img.Truncate(16 << 20)
		img.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", f.img).CombinedOutput(); err != nil {
		t.Skipf("coldfs: mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", f.img, f.Dir).CombinedOutput(); err != nil {
		t.Skipf("coldfs: mount -o loop: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", f.Dir).CombinedOutput(); err != nil {
			t.Errorf("coldfs: umount %s: %v: %s", f.Dir, err, out)
		}
	})
	return f
}

// Remount unmounts and mounts the file system again: every dentry, inode and
// page of it leaves the caches. Files the test holds open would keep it busy.
func (f *FS) Remount(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("umount", f.Dir).CombinedOutput(); err != nil {
		t.Fatalf("coldfs: umount %s: %v: %s", f.Dir, err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", f.img, f.Dir).CombinedOutput(); err != nil {
		t.Fatalf("coldfs: mount -o loop again: %v: %s", err, out)
	}
}
