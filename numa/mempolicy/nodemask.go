package mempolicy

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unsafe"
)

// MaxNodes is the number of nodes a NodeMask holds: 1024, the largest
// CONFIG_NODES_SHIFT (10) a Linux kernel can be built with.
const MaxNodes = 1024

// NodeMask is a set of NUMA node IDs, laid out as the kernel's nodemask
// (an array of unsigned longs, bit n for node n). The zero value is empty.
type NodeMask [MaxNodes / 64]uint64

// NewNodeMask returns a mask holding the given nodes; it panics on a node
// outside [0, MaxNodes), like indexing an array would.
func NewNodeMask(nodes ...int) NodeMask {
	var m NodeMask
	for _, n := range nodes {
		m.Set(n)
	}
	return m
}

// Set adds node n; it panics if n is outside [0, MaxNodes).
func (m *NodeMask) Set(n int) {
	if n < 0 || n >= MaxNodes {
		panic(fmt.Sprintf("mempolicy: node %d outside [0, %d)", n, MaxNodes))
	}
	m[n/64] |= 1 << (n % 64)
}

// Clear removes node n; nodes outside [0, MaxNodes) are ignored.
func (m *NodeMask) Clear(n int) {
	if n >= 0 && n < MaxNodes {
		m[n/64] &^= 1 << (n % 64)
	}
}

// Has reports whether node n is in the mask.
func (m NodeMask) Has(n int) bool {
	return n >= 0 && n < MaxNodes && m[n/64]&(1<<(n%64)) != 0
}

// IsEmpty reports whether the mask holds no node.
func (m NodeMask) IsEmpty() bool { return m == NodeMask{} }

// Count returns the number of nodes in the mask.
func (m NodeMask) Count() int {
	c := 0
	for _, w := range m {
		c += bits.OnesCount64(w)
	}
	return c
}

// Nodes returns the nodes in ascending order.
func (m NodeMask) Nodes() []int {
	var ns []int
	for i, w := range m {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			ns = append(ns, i*64+b)
			w &^= 1 << b
		}
	}
	return ns
}

// String formats the mask in the kernel's list syntax ("0", "0-1,3"), or
// "none" when it is empty.
func (m NodeMask) String() string {
	ns := m.Nodes()
	if len(ns) == 0 {
		return "none"
	}
	var sb strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(ns[i]))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(ns[j]))
		}
		i = j + 1
	}
	return sb.String()
}

// arg returns the mask pointer and maxnode argument for the policy calls: nil
// and 0 for an empty mask, else MaxNodes+1, since the kernel reads maxnode-1
// bits (numactl passes the same off-by-one).
func (m *NodeMask) arg() (unsafe.Pointer, uintptr) {
	if m.IsEmpty() {
		return nil, 0
	}
	return unsafe.Pointer(&m[0]), MaxNodes + 1
}
