package vm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// marker starts every line /init writes to the output port about the programs'
// lifecycle; nothing a test prints is expected to contain it.
const marker = "@@numaproxy-vm@@ "

// initramfs collects the guest's files into a newc archive.
type initramfs struct {
	cw   *CPIOWriter
	dirs map[string]bool
}

func newInitramfs(w io.Writer) *initramfs {
	return &initramfs{cw: NewCPIOWriter(w), dirs: map[string]bool{".": true, "/": true}}
}

// mkdirAll adds name (a guest path) and its missing parents as directories.
func (r *initramfs) mkdirAll(name string, perm fs.FileMode) error {
	name = path.Clean("/" + name)
	if r.dirs[name] {
		return nil
	}
	if err := r.mkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	r.dirs[name] = true
	return r.cw.Dir(name[1:], perm)
}

func (r *initramfs) file(name string, perm fs.FileMode, data []byte) error {
	name = path.Clean("/" + name)
	if err := r.mkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	return r.cw.File(name[1:], perm, data)
}

func (r *initramfs) symlink(name, target string) error {
	name = path.Clean("/" + name)
	if err := r.mkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	return r.cw.Symlink(name[1:], target)
}

// copyHost adds the host file or directory tree at host as the guest path name.
func (r *initramfs) copyHost(name, host string) error {
	st, err := os.Lstat(host)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return r.copyOne(name, host, st)
	}
	return filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(host, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		g := path.Join(name, filepath.ToSlash(rel))
		if d.IsDir() {
			return r.mkdirAll(g, info.Mode().Perm())
		}
		return r.copyOne(g, p, info)
	})
}

func (r *initramfs) copyOne(name, host string, st fs.FileInfo) error {
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(host)
		if err != nil {
			return err
		}
		return r.symlink(name, t)
	case st.Mode().IsRegular():
		b, err := os.ReadFile(host)
		if err != nil {
			return err
		}
		return r.file(name, st.Mode().Perm(), b)
	}
	return fmt.Errorf("%s: not a regular file, directory or symlink", host)
}

// busyboxApplets lists the applets of a busybox binary as paths ("bin/sh", ...).
func busyboxApplets(busybox string) []string {
	out, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// module is a kernel module file of the booted kernel, relative to /lib/modules/<v>.
type module struct{ name, rel string }

// resolveModules returns the .ko files for names and everything they depend on,
// dependencies first, from the host's /lib/modules/<version>/modules.dep.
func resolveModules(modDir string, names []string) ([]module, error) {
	f, err := os.Open(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w (Debian package linux-image-%s)", err, filepath.Base(modDir))
	}
	defer f.Close()
	deps := map[string][]string{} // rel path -> rel paths
	byName := map[string]string{} // module name -> rel path
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rel, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[rel] = strings.Fields(rest)
		byName[moduleName(rel)] = rel
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []module
	seen := map[string]bool{}
	var visit func(rel string)
	visit = func(rel string) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		for _, d := range deps[rel] {
			visit(d)
		}
		out = append(out, module{moduleName(rel), rel})
	}
	for _, n := range names {
		rel, ok := byName[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			return nil, fmt.Errorf("kernel module %q not in %s/modules.dep (built in, or not in this kernel)", n, modDir)
		}
		visit(rel)
	}
	return out, nil
}

func moduleName(rel string) string {
	b := path.Base(rel)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// initScript is /init: it sets up the guest, runs each program with its output on
// the second serial port, frames it with markers and powers off.
func initScript(progs []guestProgram, env []string, modules []module) (string, error) {
	var b bytes.Buffer
	b.WriteString(`#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TMPDIR=/tmp
[ -e /bin/mount ] || /bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mkdir -p /dev/shm /dev/pts && mount -t tmpfs tmpfs /dev/shm
chmod 1777 /tmp
ip link set lo up
hostname numaproxy-vm
out=/dev/ttyS1
stty -F $out raw -echo -onlcr
up() { read u rest </proc/uptime; echo $u; }
echo "` + marker + `init $(up)" >$out
`)
	if len(modules) > 0 {
		b.WriteString("depmod\n")
		for _, m := range modules {
			fmt.Fprintf(&b, "modprobe %s >$out 2>&1 || echo \"modprobe %s failed\" >$out\n", m.name, m.name)
		}
	}
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !envName.MatchString(k) {
			return "", fmt.Errorf("environment entry %q is not NAME=value", kv)
		}
		fmt.Fprintf(&b, "export %s\n", shellQuote(kv))
	}
	for i, p := range progs {
		fmt.Fprintf(&b, "echo \"%sbegin %d $(up)\" >$out\n", marker, i)
		b.WriteString("(\n")
		for _, kv := range p.env {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || !envName.MatchString(k) {
				return "", fmt.Errorf("environment entry %q is not NAME=value", kv)
			}
			fmt.Fprintf(&b, "  export %s\n", shellQuote(kv))
		}
		fmt.Fprintf(&b, "  mkdir -p %s && cd %s && exec %s", shellQuote(p.dir), shellQuote(p.dir), shellQuote(p.path))
		for _, a := range p.args {
			b.WriteString(" " + shellQuote(a))
		}
		b.WriteString(" </dev/null\n) >$out 2>&1\n")
		fmt.Fprintf(&b, "rc=$?; echo \"%sexit %d $rc $(up)\" >$out\n", marker, i)
	}
	b.WriteString(`echo "` + marker + `done $(up)" >$out
poweroff -f
`)
	return b.String(), nil
}

// guestProgram is a Program placed in the initramfs.
type guestProgram struct {
	path string // guest path of the binary
	args []string
	env  []string
	dir  string
}
