package mempolicy

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapPages returns n fresh private anonymous pages, unmapped at the end of the test.
func mapPages(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n*unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func touch(b []byte) {
	for i := 0; i < len(b); i += unix.Getpagesize() {
		b[i] = 1
	}
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestMbindNode0ThenTouch(t *testing.T) {
	const pages = 16
	b := mapPages(t, pages)
	if err := Mbind(b, Bind, NewNodeMask(0), Strict|Move); err != nil {
		t.Fatal(err)
	}
	mode, nodes, err := AddressPolicy(addr(b))
	if err != nil {
		t.Fatal(err)
	}
	if mode.Base() != Bind || nodes != NewNodeMask(0) {
		t.Fatalf("AddressPolicy = %s %s, want bind 0", mode, nodes)
	}
	touch(b)
	got, err := PageNodes(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != pages {
		t.Fatalf("PageNodes returned %d entries for %d pages", len(got), pages)
	}
	for i, n := range got {
		if n != 0 {
			t.Errorf("page %d on node %d, want 0", i, n)
		}
		node, err := NodeOfAddress(addr(b) + uintptr(i*unix.Getpagesize()))
		if err != nil {
			t.Fatal(err)
		}
		if node != n {
			t.Errorf("page %d: NodeOfAddress %d, move_pages %d", i, node, n)
		}
	}
	t.Logf("mbind bind 0 + touch: %d pages, nodes %v", pages, got)
}

func TestMbindPreferredAndDefault(t *testing.T) {
	b := mapPages(t, 4)
	if err := Mbind(b, Preferred, NewNodeMask(0), 0); err != nil {
		t.Fatal(err)
	}
	if mode, nodes, err := AddressPolicy(addr(b)); err != nil || mode.Base() != Preferred || nodes != NewNodeMask(0) {
		t.Fatalf("AddressPolicy = %s %s %v, want preferred 0", mode, nodes, err)
	}
	if err := Mbind(b, Default, NodeMask{}, 0); err != nil {
		t.Fatal(err)
	}
	if mode, nodes, err := AddressPolicy(addr(b)); err != nil || mode != Default || !nodes.IsEmpty() {
		t.Fatalf("AddressPolicy after reset = %s %s %v, want default none", mode, nodes, err)
	}
}

// TestMbindMissingNode proves the call reaches the kernel: only the kernel
// knows node 7 does not exist on this machine.
func TestMbindMissingNode(t *testing.T) {
	allowed, err := MemsAllowed()
	if err != nil {
		t.Fatal(err)
	}
	if allowed.Has(7) {
		t.Skipf("node 7 exists here (mems allowed %s)", allowed)
	}
	b := mapPages(t, 1)
	err = Mbind(b, Bind, NewNodeMask(7), 0)
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("mbind to node 7 = %v, want EINVAL", err)
	}
	t.Logf("mems allowed %s; %v", allowed, err)
	// The range keeps its default policy.
	if mode, _, err := AddressPolicy(addr(b)); err != nil || mode != Default {
		t.Fatalf("policy after failed mbind = %s %v", mode, err)
	}
}

func TestMbindUnaligned(t *testing.T) {
	b := mapPages(t, 2)
	if err := Mbind(b[1:], Bind, NewNodeMask(0), 0); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("mbind at an unaligned address = %v, want EINVAL", err)
	}
}

func TestPageNodesUntouched(t *testing.T) {
	b := mapPages(t, 8)
	b[3*unix.Getpagesize()+10] = 1
	got, err := PageNodes(b)
	if err != nil {
		t.Fatal(err)
	}
	// Kernel 6.18 says -ENOENT for an untouched page; Debian's 6.1 says -EFAULT.
	for i, n := range got {
		switch {
		case i == 3 && n < 0:
			t.Errorf("touched page 3 reads %d, want a node", n)
		case i != 3 && !PageAbsent(n):
			t.Errorf("untouched page %d = %d, want -ENOENT (%d) or -EFAULT (%d)", i, n, -int(unix.ENOENT), -int(unix.EFAULT))
		}
	}
	if PageAbsent(0) || PageAbsent(1) || PageAbsent(-int(unix.EACCES)) {
		t.Error("PageAbsent takes a node or another errno for absence")
	}
	t.Logf("one page touched of 8: %v", got)
}

func TestPageNodesSpan(t *testing.T) {
	ps := unix.Getpagesize()
	b := mapPages(t, 3)
	touch(b)
	// Two bytes straddling a page boundary span two pages.
	got, err := PageNodes(b[ps-1 : ps+1])
	if err != nil || len(got) != 2 {
		t.Fatalf("PageNodes across a boundary = %v %v, want 2 pages", got, err)
	}
	if got, err := PageNodes(nil); got != nil || err != nil {
		t.Fatalf("PageNodes(nil) = %v %v", got, err)
	}
}

// onLockedThread runs f on a fresh goroutine locked to its OS thread and
// never unlocks it, so the thread, with whatever policy f left on it, exits
// with the goroutine instead of returning to the scheduler.
func onLockedThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		f()
	}()
	<-done
}

func TestSetThreadPolicy(t *testing.T) {
	onLockedThread(func() {
		mode, nodes, err := ThreadPolicy()
		if err != nil {
			t.Error(err)
			return
		}
		t.Logf("thread policy before: %s %s", mode, nodes)
		if err := SetThreadPolicy(Bind|StaticNodes, NewNodeMask(0)); err != nil {
			t.Error(err)
			return
		}
		mode, nodes, err = ThreadPolicy()
		if err != nil {
			t.Error(err)
			return
		}
		if mode.Base() != Bind || mode.Flags() != StaticNodes || nodes != NewNodeMask(0) {
			t.Errorf("ThreadPolicy = %s %s, want bind=static 0", mode, nodes)
		}
		t.Logf("thread policy after set: %s %s", mode, nodes)

		// Pages this thread faults in follow its policy.
		b, err := unix.Mmap(-1, 0, 4*unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Munmap(b)
		touch(b)
		if got, err := PageNodes(b); err != nil || got[0] != 0 {
			t.Errorf("page faulted under bind 0 = %v %v", got, err)
		}

		if err := SetThreadPolicy(Default, NodeMask{}); err != nil {
			t.Error(err)
		}
		if mode, nodes, err := ThreadPolicy(); err != nil || mode != Default || !nodes.IsEmpty() {
			t.Errorf("ThreadPolicy after reset = %s %s %v", mode, nodes, err)
		}
		if err := SetThreadPolicy(Bind, NewNodeMask(7)); !errors.Is(err, unix.EINVAL) {
			t.Errorf("set_mempolicy bind 7 = %v, want EINVAL", err)
		}
	})
}

func TestMemsAllowed(t *testing.T) {
	m, err := MemsAllowed()
	if err != nil {
		t.Fatal(err)
	}
	if !m.Has(0) {
		t.Fatalf("mems allowed %s lacks node 0", m)
	}
}

func TestNodeMask(t *testing.T) {
	m := NewNodeMask(0, 1, 3, 64, 65, 66, 1023)
	if got := m.String(); got != "0-1,3,64-66,1023" {
		t.Errorf("String = %q", got)
	}
	if m.Count() != 7 || !m.Has(1023) || m.Has(2) || m.Has(-1) || m.Has(1024) {
		t.Errorf("Count/Has wrong for %s", m)
	}
	m.Clear(64)
	m.Clear(5000)
	if m.Has(64) || m.String() != "0-1,3,65-66,1023" {
		t.Errorf("after Clear(64): %s", m)
	}
	if (NodeMask{}).String() != "none" || !(NodeMask{}).IsEmpty() {
		t.Error("empty mask")
	}
	defer func() {
		if recover() == nil {
			t.Error("Set(1024) did not panic")
		}
	}()
	m.Set(1024)
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{
		Default: "default", Bind: "bind", Preferred | StaticNodes: "preferred=static",
		Interleave | RelativeNodes: "interleave=relative", Mode(42): "mode(42)",
	} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", int(m), m.String(), want)
		}
	}
}
