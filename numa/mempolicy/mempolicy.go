// Package mempolicy wraps the Linux memory-policy system calls: mbind(2),
// set_mempolicy(2), get_mempolicy(2) and move_pages(2) used as a query.
//
// A memory policy says on which NUMA nodes the kernel places the pages of a
// range (mbind) or the pages a thread faults in outside such ranges
// (set_mempolicy). Policies act when a page is first allocated, so binding
// memory that was already touched needs MoveFlag to migrate it.
//
// Each function is one system call made through golang.org/x/sys/unix, with no
// cgo and no libnuma; errors wrap the errno and name the call, so
// errors.Is(err, unix.EINVAL) works. Node masks hold up to MaxNodes nodes,
// the largest node count a Linux kernel can be built with.
package mempolicy

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mode is a memory-policy mode (MPOL_*), optionally ORed with the mode flags
// StaticNodes, RelativeNodes or NumaBalancing.
type Mode int

// Policy modes.
const (
	Default            Mode = unix.MPOL_DEFAULT             // the thread's policy, else local allocation
	Preferred          Mode = unix.MPOL_PREFERRED           // try the node first, fall back to others
	Bind               Mode = unix.MPOL_BIND                // only the given nodes; fail or reclaim rather than spill
	Interleave         Mode = unix.MPOL_INTERLEAVE          // round-robin over the nodes, page by page
	Local              Mode = unix.MPOL_LOCAL               // the node of the CPU that faults the page
	PreferredMany      Mode = unix.MPOL_PREFERRED_MANY      // try any of the nodes first (Linux 5.15)
	WeightedInterleave Mode = unix.MPOL_WEIGHTED_INTERLEAVE // interleave by sysfs weights (Linux 6.9)
)

// Mode flags, ORed into a Mode.
const (
	StaticNodes   Mode = unix.MPOL_F_STATIC_NODES   // nodes are absolute, not remapped when the cpuset changes
	RelativeNodes Mode = unix.MPOL_F_RELATIVE_NODES // nodes are relative to the cpuset's nodes
	NumaBalancing Mode = unix.MPOL_F_NUMA_BALANCING // let NUMA balancing migrate Bind pages (Linux 5.12)
	modeFlags     Mode = unix.MPOL_MODE_FLAGS
)

// Base returns the mode without its flags.
func (m Mode) Base() Mode { return m &^ modeFlags }

// Flags returns the mode's flags only.
func (m Mode) Flags() Mode { return m & modeFlags }

// String returns the mode's name as in numa_maps ("bind", "preferred", ...),
// followed by "=static", "=relative" or "=balancing" for its flags.
func (m Mode) String() string {
	var s string
	switch m.Base() {
	case Default:
		s = "default"
	case Preferred:
		s = "preferred"
	case Bind:
		s = "bind"
	case Interleave:
		s = "interleave"
	case Local:
		s = "local"
	case PreferredMany:
		s = "preferred-many"
	case WeightedInterleave:
		s = "weighted-interleave"
	default:
		s = fmt.Sprintf("mode(%d)", int(m.Base()))
	}
	if m&StaticNodes != 0 {
		s += "=static"
	}
	if m&RelativeNodes != 0 {
		s += "=relative"
	}
	if m&NumaBalancing != 0 {
		s += "=balancing"
	}
	return s
}

// MbindFlags control what mbind does with pages already in the range.
type MbindFlags int

// Mbind flags.
const (
	// Strict fails with EIO if a page in the range is not on the policy's
	// nodes (and could not be moved when Move is set too).
	Strict MbindFlags = unix.MPOL_MF_STRICT
	// Move migrates the range's pages used only by this process onto the
	// policy's nodes.
	Move MbindFlags = unix.MPOL_MF_MOVE
	// MoveAll also migrates shared pages; it needs CAP_SYS_NICE.
	MoveAll MbindFlags = unix.MPOL_MF_MOVE_ALL
)

// Mbind sets the policy of the pages spanned by b (mbind(2)). b must start on
// a page boundary; the range is extended to the end of its last page. A mode
// that takes no nodes (Default, Local) needs an empty mask.
//
// mbind acts on the mapping, not on b: use it on memory from mmap, never on the
// Go heap, whose pages are shared with unrelated objects.
func Mbind(b []byte, mode Mode, nodes NodeMask, flags MbindFlags) error {
	if len(b) == 0 {
		return fmt.Errorf("mbind %s nodes %s: %w", mode, nodes.String(), unix.EINVAL)
	}
	mask, maxnode := nodes.arg()
	_, _, errno := unix.Syscall6(unix.SYS_MBIND,
		uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
		uintptr(mode), uintptr(mask), maxnode, uintptr(flags))
	runtime.KeepAlive(b)
	runtime.KeepAlive(&nodes)
	if errno != 0 {
		return fmt.Errorf("mbind %s nodes %s: %w", mode, nodes.String(), errno)
	}
	return nil
}

// SetThreadPolicy sets the calling thread's policy (set_mempolicy(2)): it
// governs every page this thread faults in outside a range with its own
// policy, including Go heap and stack pages it happens to touch first. The
// caller must hold the thread with runtime.LockOSThread, or the goroutine may
// move to a thread without the policy and leave the policy behind on a thread
// that other goroutines will use. Default with an empty mask clears it.
func SetThreadPolicy(mode Mode, nodes NodeMask) error {
	mask, maxnode := nodes.arg()
	_, _, errno := unix.Syscall(unix.SYS_SET_MEMPOLICY, uintptr(mode), uintptr(mask), maxnode)
	runtime.KeepAlive(&nodes)
	if errno != 0 {
		return fmt.Errorf("set_mempolicy %s nodes %s: %w", mode, nodes.String(), errno)
	}
	return nil
}

// ThreadPolicy returns the calling thread's policy (get_mempolicy(2) with no
// flags). Lock the OS thread to get a meaningful answer.
func ThreadPolicy() (Mode, NodeMask, error) {
	var mode int32
	var nodes NodeMask
	if err := getMempolicy(&mode, &nodes, 0, 0); err != nil {
		return 0, NodeMask{}, err
	}
	return Mode(mode), nodes, nil
}

// AddressPolicy returns the policy of the mapping that holds addr
// (get_mempolicy(2) with MPOL_F_ADDR): Default if the range has none of its
// own. It says what mbind set, not where pages are; see PageNodes for that.
func AddressPolicy(addr uintptr) (Mode, NodeMask, error) {
	var mode int32
	var nodes NodeMask
	if err := getMempolicy(&mode, &nodes, addr, unix.MPOL_F_ADDR); err != nil {
		return 0, NodeMask{}, err
	}
	return Mode(mode), nodes, nil
}

// NodeOfAddress returns the node of the page holding addr (get_mempolicy(2)
// with MPOL_F_NODE|MPOL_F_ADDR). If the page is not present, the kernel
// faults it in for reading first (an untouched private anonymous page then
// reads as the shared zero page's node); PageNodes does not fault pages in.
// addr must stay mapped: a uintptr does not keep Go memory alive.
func NodeOfAddress(addr uintptr) (int, error) {
	var node int32
	if err := getMempolicy(&node, nil, addr, unix.MPOL_F_NODE|unix.MPOL_F_ADDR); err != nil {
		return -1, err
	}
	return int(node), nil
}

// MemsAllowed returns the nodes this thread may allocate from: the online
// nodes with memory, limited by its cpuset (get_mempolicy(2) with
// MPOL_F_MEMS_ALLOWED).
func MemsAllowed() (NodeMask, error) {
	var nodes NodeMask
	if err := getMempolicy(nil, &nodes, 0, unix.MPOL_F_MEMS_ALLOWED); err != nil {
		return NodeMask{}, err
	}
	return nodes, nil
}

func getMempolicy(mode *int32, nodes *NodeMask, addr uintptr, flags uintptr) error {
	var mask unsafe.Pointer
	var maxnode uintptr
	if nodes != nil {
		mask, maxnode = unsafe.Pointer(&nodes[0]), MaxNodes+1
	}
	_, _, errno := unix.Syscall6(unix.SYS_GET_MEMPOLICY,
		uintptr(unsafe.Pointer(mode)), uintptr(mask), maxnode, addr, flags, 0)
	if errno != 0 {
		return fmt.Errorf("get_mempolicy: %w", errno)
	}
	return nil
}

// PageNodes returns the node of each page spanned by b, in order, using
// move_pages(2) as a query (no target nodes): it moves nothing and faults
// nothing in. A page that is not present reads as a negative errno: -ENOENT
// for a page never touched on recent kernels (6.18 here), -EFAULT on older
// ones (Debian's 6.1 reports that for untouched anonymous memory) and for an
// address without a mapping; PageAbsent tells both apart from a node. The
// result has one entry per page from the page holding b[0] to the page
// holding b[len(b)-1].
func PageNodes(b []byte) ([]int, error) {
	if len(b) == 0 {
		return nil, nil
	}
	ps := uintptr(unix.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b))) &^ (ps - 1)
	end := uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(len(b))
	n := int((end - start + ps - 1) / ps)
	pages := make([]uintptr, n)
	for i := range pages {
		pages[i] = start + uintptr(i)*ps
	}
	status := make([]int32, n)
	_, _, errno := unix.Syscall6(unix.SYS_MOVE_PAGES, 0, uintptr(n),
		uintptr(unsafe.Pointer(&pages[0])), 0, uintptr(unsafe.Pointer(&status[0])), 0)
	runtime.KeepAlive(b)
	if errno != 0 {
		return nil, fmt.Errorf("move_pages: %w", errno)
	}
	nodes := make([]int, n)
	for i, s := range status {
		nodes[i] = int(s)
	}
	return nodes, nil
}

// PageAbsent reports whether a PageNodes entry means the page is not present
// (-ENOENT, or -EFAULT as older kernels say for untouched anonymous memory)
// rather than a node.
func PageAbsent(status int) bool {
	return status == -int(unix.ENOENT) || status == -int(unix.EFAULT)
}
