package vm

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testELF returns a real x86-64 ELF file to hide in synthetic kernel images: this
// test binary.
func testELF(t *testing.T) []byte {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkELF(b); err != nil {
		t.Skipf("test binary is not an x86-64 ELF: %v", err)
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
