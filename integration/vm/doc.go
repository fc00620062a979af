// Package vm boots Debian's kernel with a real multi-node NUMA topology under QEMU
// and runs static Go programs (test binaries, probes) inside it, relaying their
// output and exit code to the host.
//
// The guest is a QEMU machine with one socket and one memory backend per NUMA node
// (ACPI SRAT, so the kernel sees real nodes), entered through PVH with the
// uncompressed vmlinux extracted once from /boot/vmlinuz-<version>, and an
// initramfs written here in Go: busybox-static, an /init script and the programs.
// Program output travels on a second serial port in raw mode; /init frames each
// program's output with markers and powers the machine off when done.
//
// Emulated CPUs (TCG) say nothing about speed: this is for function tests only.
package vm
