package vm

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// testELF returns a small but complete x86-64 ELF file to hide in synthetic kernel
// images: a header, 256 KiB of partly compressible contents, a .shstrtab section
// and the section header table at the end (so truncation is detectable).
func testELF(t *testing.T) []byte {
	t.Helper()
	le := binary.LittleEndian
	body := bytes.Repeat([]byte("numaproxy vmlinux test "), 8000)
	body = append(body, junk(64<<10, 42)...)
	strtab := []byte("\x00.shstrtab\x00")
	shoff := 64 + len(body) + len(strtab)
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF")
	hdr[4], hdr[5], hdr[6] = 2, 1, 1 // 64-bit, little-endian, version 1
	le.PutUint16(hdr[16:], 2)        // ET_EXEC
	le.PutUint16(hdr[18:], 62)       // EM_X86_64
	le.PutUint32(hdr[20:], 1)
	le.PutUint64(hdr[40:], uint64(shoff))
	le.PutUint16(hdr[52:], 64) // e_ehsize
	le.PutUint16(hdr[54:], 56) // e_phentsize
	le.PutUint16(hdr[58:], 64) // e_shentsize
	le.PutUint16(hdr[60:], 2)  // e_shnum
	le.PutUint16(hdr[62:], 1)  // e_shstrndx
	sh := make([]byte, 128)    // section 0 is empty
	le.PutUint32(sh[64:], 1)   // sh_name ".shstrtab"
	le.PutUint32(sh[68:], 3)   // SHT_STRTAB
	le.PutUint64(sh[64+24:], uint64(64+len(body)))
	le.PutUint64(sh[64+32:], uint64(len(strtab)))
	le.PutUint64(sh[64+48:], 1)
	b := image(hdr, body, strtab, sh)
	if err := checkELF(b); err != nil {
		t.Fatalf("synthetic ELF: %v", err)
	}
	return b
}

func gzipBytes(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func junk(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// image concatenates its parts, like a bzImage: setup code, decompressor, payload,
// the appended size and more code.
func image(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestExtractVmlinuxScansForMagic(t *testing.T) {
	elfFile := testELF(t)
	gz := gzipBytes(t, elfFile)
	// A gzip magic with garbage after it comes first: it must be skipped.
	decoy := append([]byte{0x1f, 0x8b, 0x08}, junk(100, 1)...)
	img := image(junk(5000, 2), decoy, junk(300, 3), gz, []byte{1, 2, 3, 4}, junk(7000, 4))
	got, err := ExtractVmlinux(img)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, elfFile) {
		t.Fatalf("extracted %d bytes, want the %d-byte ELF", len(got), len(elfFile))
	}
}

func TestExtractVmlinuxBootHeader(t *testing.T) {
	elfFile := testELF(t)
	gz := gzipBytes(t, elfFile)
	// x86 boot protocol: "HdrS" at 0x202, version at 0x206, setup_sects at 0x1f1,
	// payload_offset at 0x248 relative to the protected-mode code at (setup+1)*512.
	const setup = 3
	hdr := junk((setup+1)*512, 5)
	hdr[0x1f1] = setup
	copy(hdr[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(hdr[0x206:], 0x20f)
	pm := junk(1000, 6)
	binary.LittleEndian.PutUint32(hdr[0x248:], uint32(len(pm)))
	binary.LittleEndian.PutUint32(hdr[0x24c:], uint32(len(gz)))
	img := image(hdr, pm, gz, junk(100, 7))
	off, ok := payloadOffset(img)
	if !ok || off != len(hdr)+len(pm) {
		t.Fatalf("payloadOffset = %d, %v; want %d", off, ok, len(hdr)+len(pm))
	}
	got, err := ExtractVmlinux(img)
	if err != nil || !bytes.Equal(got, elfFile) {
		t.Fatalf("extracted %d bytes, %v", len(got), err)
	}
}

// TestExtractVmlinuxTools covers the formats decompressed by Debian's tools, each
// compressed here by the same tool when it is installed.
func TestExtractVmlinuxTools(t *testing.T) {
	elfFile := testELF(t)
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"xz", []string{"xz", "-0", "-T1", "--check=crc32", "-c"}},
		{"lzma", []string{"xz", "--format=lzma", "-0", "-c"}},
		{"zstd", []string{"zstd", "-1", "-c"}},
		{"lz4", []string{"lz4", "-l", "-c"}},
		{"bzip2", []string{"bzip2", "-1", "-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.argv[0]); err != nil {
				t.Skipf("%s not installed", tc.argv[0])
			}
			cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
			cmd.Stdin = bytes.NewReader(elfFile)
			z, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			img := image(junk(4096, 8), z, []byte{9, 9, 9, 9}, junk(4096, 9))
			got, err := ExtractVmlinux(img)
			if err != nil || !bytes.Equal(got, elfFile) {
				t.Fatalf("extracted %d bytes, %v", len(got), err)
			}
		})
	}
}

func TestExtractVmlinuxFailures(t *testing.T) {
	if _, err := ExtractVmlinux(bytes.Repeat([]byte{0}, 4096)); err == nil || !strings.Contains(err.Error(), "no compressed kernel") {
		t.Errorf("no magic: %v", err)
	}
	// A valid gzip stream that holds something other than ELF.
	if _, err := ExtractVmlinux(image(junk(100, 10), gzipBytes(t, []byte("not a kernel")))); err == nil || !strings.Contains(err.Error(), "not ELF") {
		t.Errorf("non-ELF payload: %v", err)
	}
	elfFile := testELF(t)
	if err := checkELF(elfFile[:len(elfFile)/2]); err == nil {
		t.Error("checkELF accepted a truncated ELF file")
	}
	gz := gzipBytes(t, elfFile)
	if _, err := ExtractVmlinux(gz[:len(gz)/2]); err == nil {
		t.Error("truncated gzip stream accepted")
	}
}

func TestVersionLess(t *testing.T) {
	sorted := []string{"/boot/vmlinuz-5.10.0-9-amd64", "/boot/vmlinuz-6.1.0-9-amd64", "/boot/vmlinuz-6.1.0-57-amd64", "/boot/vmlinuz-6.12.0-1-amd64"}
	for i := 0; i+1 < len(sorted); i++ {
		if !versionLess(sorted[i], sorted[i+1]) || versionLess(sorted[i+1], sorted[i]) {
			t.Errorf("%s should sort before %s", sorted[i], sorted[i+1])
		}
	}
}

// TestVmlinuxCache extracts a synthetic kernel from several goroutines at once (each
// opens the lock file, as separate processes would), then checks the cache is
// reused until the image changes.
func TestVmlinuxCache(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	elfFile := testELF(t)
	imgPath := filepath.Join(t.TempDir(), "vmlinuz-9.9.9-test")
	if err := os.WriteFile(imgPath, image(junk(2000, 11), gzipBytes(t, elfFile), junk(500, 12)), 0o644); err != nil {
		t.Fatal(err)
	}
	k := Kernel{Version: "9.9.9-test", Image: imgPath}
	var wg sync.WaitGroup
	paths := make([]string, 4)
	errs := make([]error, 4)
	for i := range paths {
		wg.Add(1)
		go func() { defer wg.Done(); paths[i], errs[i] = k.Vmlinux() }()
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil || paths[i] != paths[0] {
			t.Fatalf("call %d: %q, %v (first: %q)", i, paths[i], errs[i], paths[0])
		}
	}
	if b, err := os.ReadFile(paths[0]); err != nil || !bytes.Equal(b, elfFile) {
		t.Fatalf("cached vmlinux: %d bytes, %v", len(b), err)
	}
	if !strings.Contains(paths[0], filepath.Join("numaproxy-vm", "9.9.9-test", "vmlinux")) {
		t.Errorf("cache path %s", paths[0])
	}
	st1, _ := os.Stat(paths[0])
	if p, err := k.Vmlinux(); err != nil || p != paths[0] {
		t.Fatal(p, err)
	}
	if st2, _ := os.Stat(paths[0]); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("cached vmlinux was rewritten though the image did not change")
	}
	// A new image of the same version (a kernel package upgrade) is extracted again.
	other := append(bytes.Clone(elfFile[:len(elfFile)-1]), elfFile[len(elfFile)-1])
	copy(other[100:], "changed")
	if err := os.WriteFile(imgPath, image(junk(2000, 13), gzipBytes(t, other)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Vmlinux(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(paths[0]); !bytes.Equal(b, other) {
		t.Error("cache not refreshed after the image changed")
	}
}
