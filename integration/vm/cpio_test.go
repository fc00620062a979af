package vm

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// cpioEntry is one member of a newc archive, as readNewc parses it.
type cpioEntry struct {
	name  string
	mode  uint32
	nlink uint32
	data  []byte
}

// readNewc parses a newc archive strictly: magic, hex fields, 4-byte alignment of
// names and data, the trailer, and zero padding after it.
func readNewc(b []byte) ([]cpioEntry, error) {
	var out []cpioEntry
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(b) {
			return nil, fmt.Errorf("truncated header at %d", off)
		}
		h := b[off : off+110]
		if string(h[:6]) != "070701" {
			return nil, fmt.Errorf("bad magic %q at %d", h[:6], off)
		}
		field := func(i int) (uint32, error) {
			v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
			return uint32(v), err
		}
		var f [13]uint32
		for i := range f {
			v, err := field(i)
			if err != nil {
				return nil, fmt.Errorf("field %d at %d: %w", i, off, err)
			}
			f[i] = v
		}
		mode, nlink, size, namesize := f[1], f[4], int(f[6]), int(f[11])
		nameStart := off + 110
		if nameStart+namesize > len(b) || namesize == 0 || b[nameStart+namesize-1] != 0 {
			return nil, fmt.Errorf("bad name at %d", off)
		}
		name := string(b[nameStart : nameStart+namesize-1])
		dataStart := align(nameStart + namesize)
		if dataStart+size > len(b) {
			return nil, fmt.Errorf("truncated data of %s", name)
		}
		off = align(dataStart + size)
		if name == "TRAILER!!!" {
			for _, c := range b[off:] {
				if c != 0 {
					return nil, fmt.Errorf("non-zero padding after trailer")
				}
			}
			return out, nil
		}
		out = append(out, cpioEntry{name, mode, nlink, b[dataStart : dataStart+size]})
	}
}

func TestCPIORoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewCPIOWriter(&buf)
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(w.Dir("bin", 0o755))
	check(w.File("bin/a", 0o755, []byte("x")))       // data needs padding
	check(w.File("bin/abcd", 0o644, []byte("1234"))) // data already aligned
	check(w.File("empty", 0o600, nil))               // no data
	check(w.Symlink("bin/sh", "/bin/busybox"))
	check(w.File("dir-less-name-of-odd-length", 0o644, bytes.Repeat([]byte{0xff}, 1001)))
	check(w.Close())
	if buf.Len()%512 != 0 {
		t.Errorf("archive is %d bytes, not a multiple of 512", buf.Len())
	}
	got, err := readNewc(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := []cpioEntry{
		{"bin", 0o040755, 2, nil},
		{"bin/a", 0o100755, 1, []byte("x")},
		{"bin/abcd", 0o100644, 1, []byte("1234")},
		{"empty", 0o100600, 1, nil},
		{"bin/sh", 0o120777, 1, []byte("/bin/busybox")},
		{"dir-less-name-of-odd-length", 0o100644, 1, bytes.Repeat([]byte{0xff}, 1001)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.name != w.name || g.mode != w.mode || g.nlink != w.nlink || !bytes.Equal(g.data, w.data) {
			t.Errorf("entry %d: got %q mode %o nlink %d %d bytes, want %q mode %o nlink %d %d bytes",
				i, g.name, g.mode, g.nlink, len(g.data), w.name, w.mode, w.nlink, len(w.data))
		}
	}
	if err := w.File("late", 0o644, nil); err == nil {
		t.Error("File after Close succeeded")
	}
	if err := NewCPIOWriter(&buf).File("/abs", 0o644, nil); err == nil {
		t.Error("absolute name accepted")
	}
}

// TestCPIOExtractWithCpio unpacks our archive with an independent implementation:
// GNU cpio if installed, else busybox's.
func TestCPIOExtractWithCpio(t *testing.T) {
	var argv []string
	if p, err := exec.LookPath("cpio"); err == nil {
		argv = []string{p, "-idm", "--quiet"}
	} else if bb, err := findBusybox(); err == nil {
		argv = []string{bb, "cpio", "-idm"}
	} else {
		t.Skip("no cpio and no busybox to extract with")
	}
	var buf bytes.Buffer
	r := newInitramfs(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.file("/a/b/c/file.txt", 0o640, []byte("hello\n")))
	must(r.file("/a/exe", 0o755, []byte("#!/bin/sh\n")))
	must(r.symlink("/a/b/link", "c/file.txt"))
	must(r.cw.Close())

	dir := t.TempDir()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdin = dir, &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "a/b/link"))
	if err != nil || string(b) != "hello\n" {
		t.Errorf("a/b/link: %q, %v", b, err)
	}
	for name, perm := range map[string]fs.FileMode{"a/b/c/file.txt": 0o640, "a/exe": 0o755} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if st.Mode().Perm() != perm {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), perm)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "a/b/link")); err != nil || target != "c/file.txt" {
		t.Errorf("a/b/link -> %q, %v", target, err)
	}
}
