package vm

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Kernel is a bootable kernel image found on the host.
type Kernel struct {
	Version string // e.g. "6.1.0-57-amd64", from the file name
	Image   string // path of the bzImage (or of a vmlinux when given directly)
}

// FindKernel returns the kernel to boot: $NUMAPROXY_VM_KERNEL if set (a bzImage or an
// uncompressed vmlinux), else the newest readable /boot/vmlinuz-<version>.
func FindKernel() (Kernel, error) {
	if p := os.Getenv("NUMAPROXY_VM_KERNEL"); p != "" {
		if err := readable(p); err != nil {
			return Kernel{}, fmt.Errorf("NUMAPROXY_VM_KERNEL: %w", err)
		}
		v := strings.TrimPrefix(filepath.Base(p), "vmlinuz-")
		return Kernel{Version: v, Image: p}, nil
	}
	paths, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(paths) == 0 {
		return Kernel{}, errors.New("no kernel /boot/vmlinuz-* (Debian package linux-image-amd64)")
	}
	sort.Slice(paths, func(i, j int) bool { return versionLess(paths[j], paths[i]) })
	var errs []error
	for _, p := range paths {
		if err := readable(p); err != nil {
			errs = append(errs, err)
			continue
		}
		return Kernel{Version: strings.TrimPrefix(filepath.Base(p), "vmlinuz-"), Image: p}, nil
	}
	return Kernel{}, fmt.Errorf("no readable kernel in /boot: %w", errors.Join(errs...))
}

func readable(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	return f.Close()
}

// versionLess orders strings by their runs of digits numerically, the rest bytewise.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da > 0 && db > 0 {
			na, _ := strconv.ParseUint(a[:da], 10, 64)
			nb, _ := strconv.ParseUint(b[:db], 10, 64)
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// Vmlinux returns the path of k's uncompressed ELF kernel, which QEMU enters through
// PVH. It is extracted once into os.UserCacheDir()/numaproxy-vm/<version>/vmlinux;
// concurrent callers (also in other processes) wait on a lock for the first one.
func (k Kernel) Vmlinux() (string, error) {
	if isELF(k.Image) {
		return k.Image, nil
	}
	st, err := os.Stat(k.Image)
	if err != nil {
		return "", err
	}
	dir, err := cacheDir(k.Version)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "vmlinux")
	stampPath := filepath.Join(dir, "vmlinux.source")
	stamp := fmt.Sprintf("%s %d %d\n", k.Image, st.Size(), st.ModTime().UnixNano())

	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if b, err := os.ReadFile(stampPath); err == nil && string(b) == stamp && isELF(out) {
		return out, nil
	}
	image, err := os.ReadFile(k.Image)
	if err != nil {
		return "", err
	}
	vmlinux, err := ExtractVmlinux(image)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.Image, err)
	}
	tmp, err := os.CreateTemp(dir, "vmlinux.*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(vmlinux); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	if err := os.WriteFile(stampPath, []byte(stamp), 0o644); err != nil {
		return "", err
	}
	return out, nil
}

func cacheDir(version string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "numaproxy-vm", version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kernel cache: %w", err)
	}
	return dir, nil
}

func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [4]byte
	_, err = io.ReadFull(f, m[:])
	return err == nil && string(m[:]) == elf.ELFMAG
}

// compression is one of the formats a bzImage's payload can be in.
type compression struct {
	name  string
	magic []byte
	// decompress returns what it could decompress from data, which may continue past
	// the end of the compressed stream.
	decompress func(data []byte) ([]byte, error)
}

var compressions = []compression{
	{"gzip", []byte{0x1f, 0x8b, 0x08}, func(b []byte) ([]byte, error) {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r.Multistream(false)
		return io.ReadAll(r)
	}},
	{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, tool("xz", "xz-utils", "-dc", "--single-stream")},
	{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd}, tool("zstd", "zstd", "-dc")},
	{"lzma", []byte{0x5d, 0x00, 0x00}, tool("xz", "xz-utils", "-dc", "--format=lzma")},
	{"lz4", []byte{0x02, 0x21, 0x4c, 0x18}, tool("lz4", "lz4", "-dc")},
	{"bzip2", []byte("BZh"), func(b []byte) ([]byte, error) {
		// The reader takes what follows the stream for another stream and fails
		// there: keep what it decompressed, the ELF check judges it.
		out, err := io.ReadAll(bzip2.NewReader(bytes.NewReader(b)))
		if len(out) > 0 {
			return out, nil
		}
		return nil, err
	}},
}

// tool decompresses with a Debian command; its exit status is not trusted (trailing
// data after the stream makes some of them complain), the result is checked instead.
func tool(name, pkg string, args ...string) func([]byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		path, err := exec.LookPath(name)
		if err != nil {
			return nil, fmt.Errorf("%s not installed (Debian package %s)", name, pkg)
		}
		cmd := exec.Command(path, args...)
		cmd.Stdin = bytes.NewReader(b)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err = cmd.Run()
		if err != nil && out.Len() == 0 {
			return nil, fmt.Errorf("%s: %v: %s", name, err, bytes.TrimSpace(stderr.Bytes()))
		}
		return out.Bytes(), nil
	}
}

// maxAttempts bounds how many magic matches are tried; spurious matches of short
// magics (bzip2, lzma) are common in a kernel image.
const maxAttempts = 64

// ExtractVmlinux returns the uncompressed ELF kernel inside a bzImage. It tries the
// payload the x86 boot header points at first, then every offset where a gzip, xz,
// zstd, lzma, lz4 or bzip2 magic occurs, and accepts the first output that parses
// as a complete ELF file.
func ExtractVmlinux(image []byte) ([]byte, error) {
	type candidate struct {
		off int
		c   compression
	}
	var cands []candidate
	if off, ok := payloadOffset(image); ok {
		for _, c := range compressions {
			if bytes.HasPrefix(image[off:], c.magic) {
				cands = append(cands, candidate{off, c})
			}
		}
	}
	for _, c := range compressions {
		for i := 0; ; {
			j := bytes.Index(image[i:], c.magic)
			if j < 0 {
				break
			}
			cands = append(cands, candidate{i + j, c})
			i += j + 1
		}
	}
	if len(cands) == 0 {
		return nil, errors.New("no compressed kernel found (no gzip, xz, zstd, lzma, lz4 or bzip2 magic)")
	}
	sort.SliceStable(cands[1:], func(i, j int) bool { return cands[1+i].off < cands[1+j].off })
	var errs []error
	seen := map[string]bool{}
	for n, cand := range cands {
		if n == maxAttempts {
			errs = append(errs, fmt.Errorf("gave up after %d candidates", maxAttempts))
			break
		}
		key := fmt.Sprint(cand.off, cand.c.name)
		if seen[key] {
			continue
		}
		seen[key] = true
		out, err := cand.c.decompress(image[cand.off:])
		if err == nil {
			err = checkELF(out)
		}
		if err == nil {
			return out, nil
		}
		errs = append(errs, fmt.Errorf("%s at %d: %w", cand.c.name, cand.off, err))
	}
	return nil, fmt.Errorf("no vmlinux found: %w", errors.Join(errs...))
}

// payloadOffset reads the x86 boot protocol header (2.08+): the protected-mode code
// starts after (setup_sects+1) sectors and the payload at payload_offset within it.
func payloadOffset(b []byte) (int, bool) {
	if len(b) < 0x250 || string(b[0x202:0x206]) != "HdrS" || binary.LittleEndian.Uint16(b[0x206:]) < 0x208 {
		return 0, false
	}
	setup := int(b[0x1f1])
	if setup == 0 {
		setup = 4
	}
	off := (setup+1)*512 + int(binary.LittleEndian.Uint32(b[0x248:]))
	if off >= len(b) {
		return 0, false
	}
	return off, true
}

func checkELF(b []byte) error {
	if !bytes.HasPrefix(b, []byte(elf.ELFMAG)) {
		return errors.New("output is not ELF")
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("output is not a complete ELF file: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("ELF machine %v, want x86-64", f.Machine)
	}
	return nil
}
