package pool_test

// Tests that need two NUMA nodes with memory. They run only inside the QEMU
// guest of integration/vm (NUMAPROXY_IN_VM=1; node 0 = CPUs 0-1, node 1 =
// CPUs 2-3) and skip everywhere else. Each check logs what it measured.

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/numa"
	"github.com/numaproxy/numaproxy/numa/mempolicy"
	"github.com/numaproxy/numaproxy/numa/pool"
)

// vmNodes skips unless NUMAPROXY_IN_VM=1, then returns a CPU of node 0 and
// one of node 1, failing if the guest does not have both nodes with memory.
func vmNodes(t *testing.T) (cpu0, cpu1 int) {
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
	t.Logf("topology %+v, mems allowed %s", topo.Nodes, allowed)
	if len(topo.Nodes) < 2 || topo.Nodes[1].ID != 1 || topo.Nodes[0].CPUs.IsEmpty() || topo.Nodes[1].CPUs.IsEmpty() || !allowed.Has(0) || !allowed.Has(1) {
		t.Fatalf("want nodes 0 and 1 with CPUs and memory")
	}
	return topo.Nodes[0].CPUs.CPUs()[0], topo.Nodes[1].CPUs.CPUs()[0]
}

// TestVMDomainsBoundToTheirNodes binds domain d to node d and touches its
// buffers from a CPU of the other node: binding, not first touch, must decide.
func TestVMDomainsBoundToTheirNodes(t *testing.T) {
	cpu0, cpu1 := vmNodes(t)
	for node, touchCPU := range []int{cpu1, cpu0} {
		d := newDomain(t, node, node, small)
		if !d.Bound() {
			t.Fatalf("domain %d: not bound: %v", node, d.BindErr())
		}
		start, end := d.Arena()
		mode, nodes, err := mempolicy.AddressPolicy(start)
		if err != nil || mode.Base() != mempolicy.Bind || nodes != mempolicy.NewNodeMask(node) {
			t.Fatalf("domain %d arena policy %s %s %v, want bind %d", node, mode, nodes, err, node)
		}
		t.Logf("domain %d arena %#x-%#x: get_mempolicy says %s %s", node, start, end, mode, nodes)
		l := newLocal(t, d)
		var bufs [][]byte
		onCPU(t, touchCPU, func() {
			for _, size := range small.Classes {
				for range 8 {
					b := l.Get(size)
					touch(b)
					bufs = append(bufs, b)
				}
			}
		})
		wantPagesOn(t, fmt.Sprintf("domain %d bound to node %d, touched from CPU %d", node, node, touchCPU), bufs, node)
		for _, b := range bufs {
			if n, err := mempolicy.NodeOfAddress(addr(b)); err != nil || n != node {
				t.Errorf("NodeOfAddress(%#x) = %d %v, want %d", addr(b), n, err, node)
			}
			l.Put(b)
		}
		l.Close()
	}
}

// TestVMFirstTouchFallback checks where an unbound domain's pages land: on
// the node of the pinned thread that touches them first.
func TestVMFirstTouchFallback(t *testing.T) {
	cpu0, cpu1 := vmNodes(t)
	for node, cpu := range []int{cpu0, cpu1} {
		d := newDomain(t, 10+node, 7, small) // node 7 does not exist: EINVAL, first touch
		if d.Bound() {
			t.Fatal("bound to node 7")
		}
		t.Logf("domain %d: %v", d.ID(), d.BindErr())
		l := newLocal(t, d)
		var bufs [][]byte
		onCPU(t, cpu, func() {
			for range 16 {
				b := l.Get(16 << 10)
				touch(b)
				bufs = append(bufs, b)
			}
		})
		wantPagesOn(t, fmt.Sprintf("unbound domain touched from CPU %d", cpu), bufs, node)
		for _, b := range bufs {
			l.Put(b)
		}
		l.Close()
	}
}

// TestVMEventLoopOnNode1 runs a loop pinned to a node-1 CPU over a domain
// bound to node 1, streams 8 MiB through its output queue, then checks every
// page the loop touched in the arena.
func TestVMEventLoopOnNode1(t *testing.T) {
	_, cpu1 := vmNodes(t)
	d := newDomain(t, 1, 1, pool.Config{})
	l := newLocal(t, d)
	big := make([]byte, 8<<20)
	loop, err := eventloop.New(eventloop.Config{
		CPU:  cpu1,
		Pool: pool.NewHeapFallback(l),
		OnStart: func(*eventloop.Loop) error {
			return mempolicy.SetThreadPolicy(mempolicy.Bind, mempolicy.NewNodeMask(1))
		},
		Handler: writeOnData{big},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := eventloop.Listen("127.0.0.1:0", 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.AddListener(ln); err != nil {
		t.Fatal(err)
	}
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := dialTCP(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("go")); err != nil {
		t.Fatal(err)
	}
	if n, err := readAll(c); err != nil || n != len(big) {
		t.Fatalf("read %d of %d: %v", n, len(big), err)
	}
	c.Close()
	if err := loop.Stop(); err != nil {
		t.Fatal(err)
	}
	<-loop.Done()
	s := d.Stats()
	t.Logf("after the loop: %d bytes mapped, heap gets %d, classes %+v", s.MappedBytes, s.HeapGets, s.Classes)
	// Borrow every carved buffer again and look at each page.
	var bufs [][]byte
	for _, cs := range s.Classes {
		for range cs.Carved {
			bufs = append(bufs, l.Get(cs.Size))
		}
	}
	touched, on1 := 0, 0
	for _, b := range bufs {
		pages, err := mempolicy.PageNodes(b[:cap(b)])
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range pages {
			if mempolicy.PageAbsent(n) {
				continue
			}
			touched++
			if n == 1 {
				on1++
			} else if touched-on1 <= 5 {
				t.Errorf("buffer %#x: a page on node %d", addr(b), n)
			}
		}
	}
	t.Logf("loop on CPU %d: %d buffers, %d pages touched, %d on node 1", cpu1, len(bufs), touched, on1)
	if touched == 0 {
		t.Error("the loop touched no page of the arena")
	}
	for _, b := range bufs {
		l.Put(b)
	}
	l.Close()
}

// TestVMReleasedPagesStayOnNode: pages given back after the release delay
// (MADV_DONTNEED) and faulted in again by a thread of the other node still
// come from the domain's node: the binding is the arena's, not the pages'.
func TestVMReleasedPagesStayOnNode(t *testing.T) {
	cpu0, _ := vmNodes(t)
	cfg := small
	cfg.ReleaseDelay = 200 * time.Millisecond
	d := newDomain(t, 1, 1, cfg)
	if !d.Bound() {
		t.Fatalf("not bound: %v", d.BindErr())
	}
	l := newLocal(t, d)
	defer l.Close()
	get := func() (bufs [][]byte) {
		onCPU(t, cpu0, func() {
			for range 64 {
				b := l.Get(16 << 10)
				touch(b)
				bufs = append(bufs, b)
			}
		})
		return bufs
	}
	bufs := get()
	wantPagesOn(t, "domain bound to node 1, touched from node 0", bufs, 1)
	for _, b := range bufs {
		l.Put(b)
	}
	s := waitReleased(t, d, 10*time.Second)
	absent := 0
	for _, b := range bufs {
		pages, err := mempolicy.PageNodes(b[:cap(b)])
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range pages {
			if mempolicy.PageAbsent(n) {
				absent++
			}
		}
	}
	t.Logf("%d bytes released; %d pages of the %d buffers absent", s.ReleasedBytes, absent, len(bufs))
	if absent == 0 {
		t.Fatal("no page was given back")
	}
	again := get()
	wantPagesOn(t, "faulted in again from node 0 after the release", again, 1)
	for _, b := range again {
		l.Put(b)
	}
}
