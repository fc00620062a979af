package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// env is what the harness found or prepared on this machine.
type env struct {
	root      string // repository root
	tmp       string // scratch folder of this run, removed at the end
	self      string // this binary, for the helper roles
	numaproxy string
	nginx     string
	haproxy   string
	static    string // the files of the static shapes
	certs     certFiles
	revision  string
	versions  map[string]string
	missing   map[string]string // proxy name -> why it cannot run
}

// repoRoot walks up from the working directory to numaproxy's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/numaproxy/numaproxy\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the numaproxy repository")
		}
		dir = parent
	}
}

// ensureTools installs nginx, haproxy and wrk from Debian when one is missing,
// without letting the packages start their system services.
func ensureTools() error {
	need := map[string]string{"nginx": "nginx", "haproxy": "haproxy", "wrk": "wrk", "taskset": "util-linux"}
	var pkgs []string
	for _, tool := range []string{"nginx", "haproxy", "wrk", "taskset"} {
		if _, err := lookTool(tool); err != nil {
			pkgs = append(pkgs, need[tool])
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing %s and not root: install them with apt-get", strings.Join(pkgs, " "))
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("missing %s and no apt-get", strings.Join(pkgs, " "))
	}
	logf("installing %s with apt-get", strings.Join(pkgs, " "))
	// policy-rc.d exit 101 tells invoke-rc.d not to start the packages' services.
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); os.IsNotExist(err) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err == nil {
			defer os.Remove(policy)
		}
	}
	run := func(args ...string) error {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	if err := run("update"); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	if err := run(append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...); err != nil {
		return fmt.Errorf("apt-get install: %w", err)
	}
	return nil
}

// lookTool finds a tool in PATH or in /usr/sbin (not in every user's PATH).
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// buildNumaproxy builds the proxy from the working tree.
func buildNumaproxy(root, out string) (revision string, err error) {
	rev, _ := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	revision = strings.TrimSpace(string(rev))
	cmd := exec.Command("go", "build", "-ldflags", "-X main.revision="+revision, "-o", out, "./cmd/numaproxy")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return revision, fmt.Errorf("go build ./cmd/numaproxy: %w\n%s", err, b)
	}
	return revision, nil
}

// raiseNoFile sets RLIMIT_NOFILE to at least noFile for this process and its
// children (syscall.Setrlimit also stops os/exec from restoring the old soft limit).
func raiseNoFile() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	want := max(lim.Max, uint64(noFile))
	if lim.Cur >= want && lim.Max >= want {
		return nil
	}
	lim.Cur, lim.Max = want, want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE to %d: %w", want, err)
	}
	return nil
}

// pinSelf moves every thread of this process to cpu; threads created later
// inherit it, and so do children.
func pinSelf(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

// machine describes the CPU for the report.
func machine() (model string, cpus int) {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			if model == "" {
				model = strings.TrimSpace(v)
			}
			cpus++
		}
	}
	return model, cpus
}

func toolVersion(argv ...string) string {
	out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
