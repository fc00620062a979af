package pool_test

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa/pool"
)

// residentBytes counts the arena's resident pages with mincore(2).
func residentBytes(t testing.TB, d *pool.Domain) int64 {
	t.Helper()
	start, _ := d.Arena()
	mapped := int(d.Stats().MappedBytes)
	if mapped == 0 {
		return 0
	}
	page := unix.Getpagesize()
	vec := make([]byte, mapped/page)
	// x/sys/unix has no Mincore.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, start, uintptr(mapped), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(page)
}

// fill writes b's own address into every byte, so a page given back under a
// buffer in use (it would read zeros) shows.
func fill(b []byte) {
	b = b[:cap(b)]
	for i := range b {
		b[i] = byte(addr(b) >> 10)
	}
}

func intact(b []byte) bool {
	b = b[:cap(b)]
	for i := range b {
		if b[i] != byte(addr(b)>>10) {
			return false
		}
	}
	return true
}

// waitReleased waits until every free buffer of the domain's reserve holds no
// memory, failing after timeout.
func waitReleased(t *testing.T, d *pool.Domain, timeout time.Duration) pool.Stats {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		s := d.Stats()
		done := s.ReleasedBytes > 0
		for _, c := range s.Classes {
			done = done && c.FreeReleased == c.FreeReserve
		}
		if done {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle reserve not given back after %s: %d bytes released, classes %+v", timeout, s.ReleasedBytes, s.Classes)
		}
	}
}

// TestIdleMemoryGivenBack: buffers returned to the pool stay resident for the
// release delay, then their pages go back to the kernel (mincore sees them
// gone) while buffers still handed out keep their bytes; the buffers lent again
// afterwards work and their pages come from the bound node again.
func TestIdleMemoryGivenBack(t *testing.T) {
	cpu, node := firstCPU(t)
	cfg := small
	cfg.ReleaseDelay = time.Second
	d := newDomain(t, 0, node, cfg)
	if !d.Bound() {
		t.Fatalf("not bound to node %d: %v", node, d.BindErr())
	}
	l := newLocal(t, d)
	defer l.Close()
	const n, size = 96, 16 << 10
	var bufs [][]byte
	onCPU(t, cpu, func() {
		for range n {
			b := l.Get(size)
			fill(b)
			bufs = append(bufs, b)
		}
	})
	held := bufs[:4] // still handed out: must keep their bytes
	for _, b := range bufs[4:] {
		l.Put(b)
	}
	before := residentBytes(t, d)
	putAt := time.Now()
	if s := d.Stats(); s.ReleasedBytes != 0 {
		t.Fatalf("%d bytes released at once, before the delay", s.ReleasedBytes)
	}
	if before < n*size {
		t.Fatalf("%d bytes resident after touching %d buffers of %d", before, n, size)
	}

	s := waitReleased(t, d, 10*time.Second)
	after := residentBytes(t, d)
	c := s.Classes[1]
	// What stays: the buffers handed out and the Local's warm free list.
	keep := (int64(len(held)) + c.FreeLocal) * size
	t.Logf("resident %d KiB with the buffers free, %d KiB %.1f s later (%d KiB released; %d buffers in use, %d on the Local's list, %d in the reserve, all given back)",
		before>>10, after>>10, time.Since(putAt).Seconds(), s.ReleasedBytes>>10, c.InUse, c.FreeLocal, c.FreeReserve)
	if after > keep {
		t.Errorf("resident %d bytes after the release, want at most %d (in use and warm)", after, keep)
	}
	if elapsed := time.Since(putAt); elapsed < cfg.ReleaseDelay {
		t.Errorf("released after %s, before the delay %s", elapsed, cfg.ReleaseDelay)
	}
	for _, b := range held {
		if !intact(b) {
			t.Fatalf("buffer %#x in use lost its bytes", addr(b))
		}
	}

	// Lent again: usable, and faulted in on the bound node.
	var again [][]byte
	onCPU(t, cpu, func() {
		for range n - len(held) {
			b := l.Get(size)
			fill(b)
			again = append(again, b)
		}
	})
	wantPagesOn(t, "buffers lent again after the release", again, node)
	for _, b := range append(again, held...) {
		if !intact(b) {
			t.Fatalf("buffer %#x lent again does not keep what was written", addr(b))
		}
		l.Put(b)
	}
	if r := residentBytes(t, d); r < n*size {
		t.Errorf("%d bytes resident after using %d buffers again", r, n)
	}
	checkBalanced(t, d)
}

// TestReleaseKeepsSharedPages: a class smaller than a page gives back only
// pages whose every buffer is idle; a page shared with a buffer in use stays.
func TestReleaseKeepsSharedPages(t *testing.T) {
	cfg := pool.Config{Classes: []int{1 << 10, 4 << 10}, ChunkSize: 64 << 10, MaxBytes: 1 << 20, BatchBytes: 4 << 10,
		ReleaseDelay: 200 * time.Millisecond}
	d := newDomain(t, 0, 0, cfg)
	l := newLocal(t, d)
	defer l.Close()
	var bufs, held [][]byte
	for i := range 64 { // 16 pages
		b := l.Get(1 << 10)
		fill(b)
		if i%8 == 0 { // one buffer in use on every other page
			held = append(held, b)
		} else {
			bufs = append(bufs, b)
		}
	}
	for _, b := range bufs {
		l.Put(b)
	}
	s := waitReleased(t, d, 5*time.Second)
	t.Logf("%d bytes released; classes %+v", s.ReleasedBytes, s.Classes)
	for _, b := range held {
		if !intact(b) {
			t.Fatalf("buffer %#x in use lost its bytes", addr(b))
		}
		l.Put(b)
	}
	if s.ReleasedBytes == 0 || s.ReleasedBytes > 8<<12 {
		t.Errorf("released %d bytes, want some of the 8 pages without a buffer in use", s.ReleasedBytes)
	}
	checkBalanced(t, d)
}

// TestBusyMemoryKept: buffers that go out and come back more often than the
// delay are never given back; once the traffic stops they are.
func TestBusyMemoryKept(t *testing.T) {
	cfg := small
	cfg.ReleaseDelay = time.Second
	d := newDomain(t, 0, 0, cfg)
	l := newLocal(t, d)
	defer l.Close()
	const n = 64 // far above the Local's list: every round empties the reserve
	bufs := make([][]byte, n)
	for end := time.Now().Add(2 * cfg.ReleaseDelay); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for i := range bufs {
			bufs[i] = l.Get(16 << 10)
			touch(bufs[i])
		}
		for _, b := range bufs {
			l.Put(b)
		}
	}
	if s := d.Stats(); s.ReleasedBytes != 0 {
		t.Errorf("%d bytes released while every buffer was used every 20 ms", s.ReleasedBytes)
	}
	s := waitReleased(t, d, 10*time.Second)
	t.Logf("after the traffic: %d bytes released", s.ReleasedBytes)
	checkBalanced(t, d)
}

// TestReleaseOff: a negative delay keeps everything resident.
func TestReleaseOff(t *testing.T) {
	cfg := small
	cfg.ReleaseDelay = -1
	d := newDomain(t, 0, 0, cfg)
	l := newLocal(t, d)
	var bufs [][]byte
	for range 32 {
		b := l.Get(16 << 10)
		touch(b)
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		l.Put(b)
	}
	l.Close()
	time.Sleep(300 * time.Millisecond)
	if s := d.Stats(); s.ReleasedBytes != 0 || residentBytes(t, d) < 32*16<<10 {
		t.Errorf("released %d bytes with the release off", s.ReleasedBytes)
	}
}
