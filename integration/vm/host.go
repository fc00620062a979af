package vm

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// Available reports whether this host can boot the guest: nil when QEMU, a Debian
// kernel and a static busybox are present, else an error naming what is missing.
func Available() error {
	var errs []error
	if _, err := findQEMU(); err != nil {
		errs = append(errs, err)
	}
	if _, err := FindKernel(); err != nil {
		errs = append(errs, err)
	}
	if _, err := findBusybox(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func findQEMU() (string, error) {
	if p := os.Getenv("NUMAPROXY_VM_QEMU"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("NUMAPROXY_VM_QEMU: %w", err)
		}
		return p, nil
	}
	p, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return "", errors.New("qemu-system-x86_64 not found in PATH (Debian package qemu-system-x86)")
	}
	return p, nil
}

// findBusybox returns a statically linked x86-64 busybox: $NUMAPROXY_VM_BUSYBOX, or
// Debian's busybox-static at /bin/busybox.
func findBusybox() (string, error) {
	cands := []string{"/bin/busybox", "/usr/bin/busybox"}
	if p := os.Getenv("NUMAPROXY_VM_BUSYBOX"); p != "" {
		cands = []string{p}
	}
	var errs []error
	for _, p := range cands {
		err := checkStatic(p)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no static busybox (Debian package busybox-static): %w", errors.Join(errs...))
}

func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("%s: ELF machine %v, want x86-64", path, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", path)
		}
	}
	return nil
}
