package mempolicy_test

// Tests that need a machine with two NUMA nodes that both have memory. They
// run only inside the QEMU guest of integration/vm (NUMAPROXY_IN_VM=1, node
// 0 = CPUs 0-1, node 1 = CPUs 2-3) and skip everywhere else. Each check logs
// what it measured so the guest's output shows it.

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa"
	"github.com/numaproxy/numaproxy/numa/mempolicy"
)

// vmTopology skips unless NUMAPROXY_IN_VM=1, then returns the live topology,
// failing if nodes 0 and 1 do not both have CPUs and memory.
func vmTopology(t *testing.T) *numa.Topology {
	t.Helper()
	if os.Getenv("NUMAPROXY_IN_VM") != "1" {
		t.Skip("needs the two-node QEMU guest (NUMAPROXY_IN_VM=1)")
	}
	topo, err := numa.ReadTopology(numa.DefaultSysfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := mempolicy.MemsAllowed()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("topology: %+v, mems allowed %s", topo.Nodes, allowed)
	if len(topo.Nodes) < 2 || topo.Nodes[1].ID != 1 || topo.Nodes[0].CPUs.IsEmpty() || topo.Nodes[1].CPUs.IsEmpty() {
		t.Fatalf("want nodes 0 and 1 with CPUs, have %+v", topo.Nodes)
	}
	if !allowed.Has(0) || !allowed.Has(1) {
		t.Fatalf("want memory on nodes 0 and 1, mems allowed %s", allowed)
	}
	return topo
}

func vmMap(t *testing.T, pages int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, pages*unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func vmTouch(b []byte) {
	for i := 0; i < len(b); i += unix.Getpagesize() {
		b[i] = 1
	}
}

// wantAllOn checks page by page with move_pages that every page of b is on node.
func wantAllOn(t *testing.T, what string, b []byte, node int) {
	t.Helper()
	got, err := mempolicy.PageNodes(b)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, n := range got {
		if n != node {
			bad++
			if bad <= 5 {
				t.Errorf("%s: page %d on node %d, want %d", what, i, n, node)
			}
		}
	}
	t.Logf("%s: %d pages checked with move_pages, %d on node %d, %d elsewhere: %v",
		what, len(got), len(got)-bad, node, bad, compact(got))
}

// compact summarises a page-node list as node:count pairs.
func compact(nodes []int) map[int]int {
	m := map[int]int{}
	for _, n := range nodes {
		m[n]++
	}
	return m
}

// onCPU runs f on a locked thread pinned to cpu; the thread exits afterwards.
func onCPU(t *testing.T, cpu int, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := numa.PinThread(cpu); err != nil {
			t.Error(err)
			return
		}
		f()
	}()
	<-done
}

func TestVMMbindNode1(t *testing.T) {
	vmTopology(t)
	b := vmMap(t, 64)
	if err := mempolicy.Mbind(b, mempolicy.Bind, mempolicy.NewNodeMask(1), mempolicy.Strict|mempolicy.Move); err != nil {
		t.Fatal(err)
	}
	mode, nodes, err := mempolicy.AddressPolicy(uintptr(unsafe.Pointer(&b[0])))
	if err != nil || mode.Base() != mempolicy.Bind || nodes != mempolicy.NewNodeMask(1) {
		t.Fatalf("AddressPolicy = %s %s %v, want bind 1", mode, nodes, err)
	}
	t.Logf("get_mempolicy(MPOL_F_ADDR): %s %s", mode, nodes)
	vmTouch(b)
	wantAllOn(t, "mbind bind 1 then touch", b, 1)
	node, err := mempolicy.NodeOfAddress(uintptr(unsafe.Pointer(&b[len(b)-1])))
	if err != nil || node != 1 {
		t.Errorf("NodeOfAddress(last page) = %d %v, want 1", node, err)
	}
	t.Logf("get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR) last page: node %d", node)
}

func TestVMMbindMoveMigrates(t *testing.T) {
	vmTopology(t)
	b := vmMap(t, 32)
	if err := mempolicy.Mbind(b, mempolicy.Bind, mempolicy.NewNodeMask(0), 0); err != nil {
		t.Fatal(err)
	}
	vmTouch(b)
	wantAllOn(t, "touched under bind 0", b, 0)
	if err := mempolicy.Mbind(b, mempolicy.Bind, mempolicy.NewNodeMask(1), mempolicy.Strict|mempolicy.Move); err != nil {
		t.Fatal(err)
	}
	wantAllOn(t, "after mbind bind 1 with MPOL_MF_MOVE", b, 1)
}

func TestVMFirstTouch(t *testing.T) {
	topo := vmTopology(t)
	for _, n := range topo.Nodes[:2] {
		cpu := n.CPUs.CPUs()[0]
		onCPU(t, cpu, func() {
			b := vmMap(t, 16)
			vmTouch(b)
			wantAllOn(t, "default policy, touched from CPU "+itoa(cpu), b, n.ID)
		})
	}
}

func TestVMThreadPolicy(t *testing.T) {
	topo := vmTopology(t)
	cpu := topo.Nodes[0].CPUs.CPUs()[0]
	onCPU(t, cpu, func() {
		if err := mempolicy.SetThreadPolicy(mempolicy.Bind, mempolicy.NewNodeMask(1)); err != nil {
			t.Error(err)
			return
		}
		mode, nodes, err := mempolicy.ThreadPolicy()
		t.Logf("thread on CPU %d: policy %s %s %v", cpu, mode, nodes, err)
		b := vmMap(t, 16)
		vmTouch(b)
		wantAllOn(t, "thread policy bind 1, touched from node-0 CPU "+itoa(cpu), b, 1)
	})
}

func TestVMPageNodesMixed(t *testing.T) {
	vmTopology(t)
	b := vmMap(t, 4)
	ps := unix.Getpagesize()
	for i, node := range []int{0, 1, 1} {
		page := b[i*ps : (i+1)*ps]
		if err := mempolicy.Mbind(page, mempolicy.Bind, mempolicy.NewNodeMask(node), 0); err != nil {
			t.Fatal(err)
		}
		page[0] = 1
	}
	got, err := mempolicy.PageNodes(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[:3], []int{0, 1, 1}) || !mempolicy.PageAbsent(got[3]) {
		t.Errorf("PageNodes = %v, want [0 1 1 -ENOENT or -EFAULT]", got)
	}
	t.Logf("pages bound 0,1,1 and one untouched: move_pages says %v", got)
}

func itoa(i int) string { return strconv.Itoa(i) }
