package pool_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/numa"
	"github.com/numaproxy/numaproxy/numa/mempolicy"
	"github.com/numaproxy/numaproxy/numa/pool"
)

// The event loop borrows its buffers through eventloop.BufferPool.
var (
	_ eventloop.BufferPool = (*pool.Local)(nil)
	_ eventloop.BufferPool = (*pool.HeapFallback)(nil)
)

// small is a configuration that exercises growth and batching with little memory.
var small = pool.Config{
	Classes:    []int{4 << 10, 16 << 10, 64 << 10},
	ChunkSize:  256 << 10,
	MaxBytes:   4 << 20,
	BatchBytes: 32 << 10,
}

func newDomain(t testing.TB, id, node int, cfg pool.Config) *pool.Domain {
	t.Helper()
	d, err := pool.NewDomain(id, node, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

func newLocal(t testing.TB, d *pool.Domain) *pool.Local {
	t.Helper()
	l, err := d.NewLocal()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func touch(b []byte) {
	b = b[:cap(b)]
	for i := 0; i < len(b); i += unix.Getpagesize() {
		b[i] = 0xa5
	}
}

// onCPU runs f on a locked thread pinned to cpu; the thread exits afterwards.
func onCPU(t testing.TB, cpu int, f func()) {
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

// firstCPU returns the first CPU this process may run on and its node.
func firstCPU(t testing.TB) (cpu, node int) {
	t.Helper()
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	topo, err := numa.ReadTopology(numa.DefaultSysfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	cpu = allowed.CPUs()[0]
	return cpu, topo.NodeOf(cpu)
}

// wantPagesOn checks with move_pages that every page of every buffer is on node.
func wantPagesOn(t testing.TB, what string, bufs [][]byte, node int) {
	t.Helper()
	pages, bad := 0, 0
	for _, b := range bufs {
		got, err := mempolicy.PageNodes(b[:cap(b)])
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range got {
			pages++
			if n != node {
				bad++
				if bad <= 5 {
					t.Errorf("%s: buffer %#x page %d on node %d, want %d", what, addr(b), i, n, node)
				}
			}
		}
	}
	t.Logf("%s: %d buffers, %d pages checked with move_pages, %d on node %d, %d elsewhere", what, len(bufs), pages, pages-bad, node, bad)
}

// checkBalanced asserts that nothing is in use and every carved buffer is free.
func checkBalanced(t testing.TB, d *pool.Domain) pool.Stats {
	t.Helper()
	s := d.Stats()
	var mapped int64
	for _, c := range s.Classes {
		if c.InUse != 0 || c.FreeReserve+c.FreeLocal != c.Carved || c.Carved*int64(c.Size) != c.MappedBytes {
			t.Errorf("class %d: in use %d, free %d+%d of %d carved, %d bytes mapped", c.Size, c.InUse, c.FreeReserve, c.FreeLocal, c.Carved, c.MappedBytes)
		}
		mapped += c.MappedBytes
	}
	if mapped != s.MappedBytes || s.MappedBytes != s.Chunks*int64(d.Config().ChunkSize) || s.MappedBytes > s.ReservedBytes {
		t.Errorf("mapped %d bytes in %d chunks, classes hold %d, reserved %d", s.MappedBytes, s.Chunks, mapped, s.ReservedBytes)
	}
	return s
}

func TestBoundDomainPlacesPagesOnItsNode(t *testing.T) {
	d := newDomain(t, 0, 0, small)
	if !d.Bound() || d.BindErr() != nil {
		t.Fatalf("Bound %v, BindErr %v: mbind to node 0 should work here", d.Bound(), d.BindErr())
	}
	start, _ := d.Arena()
	mode, nodes, err := mempolicy.AddressPolicy(start)
	if err != nil || mode.Base() != mempolicy.Bind || nodes != mempolicy.NewNodeMask(0) {
		t.Fatalf("arena policy %s %s %v, want bind 0", mode, nodes, err)
	}
	t.Logf("get_mempolicy(MPOL_F_ADDR) on the arena: %s %s", mode, nodes)
	l := newLocal(t, d)
	defer l.Close()
	var bufs [][]byte
	for _, size := range []int{1, 4 << 10, 5000, 16 << 10, 64 << 10} {
		for range 8 {
			b := l.Get(size)
			if len(b) != size || cap(b) < size {
				t.Fatalf("Get(%d): len %d cap %d", size, len(b), cap(b))
			}
			touch(b)
			bufs = append(bufs, b)
		}
	}
	// The policy survives the mprotect that split the mapping.
	for _, b := range bufs {
		if mode, nodes, err := mempolicy.AddressPolicy(addr(b)); err != nil || mode.Base() != mempolicy.Bind || nodes != mempolicy.NewNodeMask(0) {
			t.Fatalf("buffer %#x policy %s %s %v, want bind 0", addr(b), mode, nodes, err)
		}
		if n, err := mempolicy.NodeOfAddress(addr(b)); err != nil || n != 0 {
			t.Fatalf("NodeOfAddress(%#x) = %d %v", addr(b), n, err)
		}
	}
	wantPagesOn(t, "domain 0 bound to node 0", bufs, 0)
	for _, b := range bufs {
		l.Put(b)
	}
	checkBalanced(t, d)
}

func TestSizeClasses(t *testing.T) {
	d := newDomain(t, 0, 0, small)
	l := newLocal(t, d)
	defer l.Close()
	for _, c := range []struct{ size, cap int }{
		{0, 4 << 10}, {1, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 16 << 10},
		{16 << 10, 16 << 10}, {16<<10 + 1, 64 << 10}, {64 << 10, 64 << 10},
	} {
		b := l.Get(c.size)
		if b == nil || len(b) != c.size || cap(b) != c.cap {
			t.Errorf("Get(%d): len %d cap %d, want cap %d", c.size, len(b), cap(b), c.cap)
		}
		if b != nil {
			l.Put(b[:0]) // the length does not matter, start and cap do
		}
	}
	for _, size := range []int{64<<10 + 1, 1 << 30, -1} {
		if b, err := l.TryGet(size); b != nil || !errors.Is(err, pool.ErrTooLarge) {
			t.Errorf("TryGet(%d) = len %d, %v; want ErrTooLarge", size, len(b), err)
		}
	}
	if s := d.Stats(); s.TooLarge != 3 {
		t.Errorf("TooLarge = %d, want 3", s.TooLarge)
	}
}

func TestLocalsNeverLendAnotherDomainsMemory(t *testing.T) {
	d0, d1 := newDomain(t, 0, 0, small), newDomain(t, 1, 0, small)
	ranges := map[*pool.Domain][2]uintptr{}
	for _, d := range []*pool.Domain{d0, d1} {
		s, e := d.Arena()
		ranges[d] = [2]uintptr{s, e}
	}
	if r0, r1 := ranges[d0], ranges[d1]; r0[0] < r1[1] && r1[0] < r0[1] {
		t.Fatalf("arenas overlap: %#x-%#x and %#x-%#x", r0[0], r0[1], r1[0], r1[1])
	}
	l0, l1 := newLocal(t, d0), newLocal(t, d1)
	defer l0.Close()
	defer l1.Close()
	held := map[*pool.Local][][]byte{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		for _, l := range []*pool.Local{l0, l1} {
			if len(held[l]) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(held[l]))
				l.Put(held[l][i])
				held[l] = append(held[l][:i], held[l][i+1:]...)
				continue
			}
			b := l.Get(rng.IntN(64<<10) + 1)
			if b == nil {
				continue // the cap: fine here
			}
			own, other := ranges[l.Domain()], ranges[d1]
			if l.Domain() == d1 {
				other = ranges[d0]
			}
			p := addr(b)
			if p < own[0] || p+uintptr(cap(b)) > own[1] || (p < other[1] && p+uintptr(cap(b)) > other[0]) {
				t.Fatalf("domain %d lent %#x+%d outside %#x-%#x", l.Domain().ID(), p, cap(b), own[0], own[1])
			}
			held[l] = append(held[l], b)
		}
	}
	for l, bs := range held {
		for _, b := range bs {
			l.Put(b)
		}
	}
	checkBalanced(t, d0)
	checkBalanced(t, d1)
}

// putPanics calls Put and returns the *PutError it panicked with.
func putPanics(t *testing.T, l *pool.Local, b []byte) (pe *pool.PutError) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("Put(%#x len %d cap %d) did not panic", addr(b), len(b), cap(b))
		}
		var ok bool
		if pe, ok = r.(*pool.PutError); !ok {
			t.Fatalf("Put panicked with %T %v, want *PutError", r, r)
		}
		t.Logf("refused: %v", pe)
	}()
	l.Put(b)
	return nil
}

func TestPutRefusesForeignBuffers(t *testing.T) {
	d0, d1 := newDomain(t, 0, 0, small), newDomain(t, 1, 0, small)
	l0, l1 := newLocal(t, d0), newLocal(t, d1)
	defer l0.Close()
	defer l1.Close()

	foreign := l1.Get(4 << 10)
	if pe := putPanics(t, l0, foreign); pe.Domain != 0 || pe.Owner != 1 || !strings.Contains(pe.Error(), "domain 1's arena") {
		t.Errorf("foreign arena buffer: %+v", pe)
	}
	if err := l0.TryPut(foreign); err == nil {
		t.Error("TryPut took another domain's buffer")
	}
	if pe := putPanics(t, l0, make([]byte, 4<<10)); pe.Owner != -1 {
		t.Errorf("heap buffer: owner %d, want -1", pe.Owner)
	}
	putPanics(t, l0, nil)

	b := l0.Get(16 << 10)
	putPanics(t, l0, b[1:])              // not the start of a buffer
	putPanics(t, l0, b[:10:100])         // cap cut down
	putPanics(t, l0, b[4<<10:8<<10])     // inside the buffer, at a smaller class's alignment
	if err := l0.TryPut(b); err != nil { // the real thing still goes back
		t.Fatal(err)
	}
	if pe := putPanics(t, l0, b); !strings.Contains(pe.Reason, "put twice") {
		t.Errorf("double put: %v", pe)
	}
	// Another Local of the same domain takes it back: domains, not Locals, own memory.
	l0b := newLocal(t, d0)
	c := l0.Get(64 << 10)
	l0b.Put(c)
	l0b.Close()
	l1.Put(foreign)
	checkBalanced(t, d0)
	checkBalanced(t, d1)
}

func TestNoLeakAfterRandomUse(t *testing.T) {
	d := newDomain(t, 0, 0, small)
	l := newLocal(t, d)
	rng := rand.New(rand.NewPCG(3, 4))
	type held struct {
		b   []byte
		tag byte
	}
	var out []held
	gets := 0
	for i := range 20000 {
		if len(out) > 0 && (rng.IntN(2) == 0 || len(out) > 200) {
			j := rng.IntN(len(out))
			h := out[j]
			// Nobody else wrote into a buffer we hold.
			if h.b[0] != h.tag || h.b[len(h.b)-1] != h.tag {
				t.Fatalf("buffer %#x changed while held", addr(h.b))
			}
			l.Put(h.b)
			out[j] = out[len(out)-1]
			out = out[:len(out)-1]
			continue
		}
		b := l.Get(rng.IntN(64<<10) + 1)
		if b == nil {
			continue
		}
		gets++
		tag := byte(i)
		b[0], b[len(b)-1] = tag, tag
		out = append(out, held{b, tag})
	}
	for _, h := range out {
		l.Put(h.b)
	}
	s := checkBalanced(t, d)
	t.Logf("%d gets; %d bytes mapped in %d chunks; classes %+v", gets, s.MappedBytes, s.Chunks, s.Classes)
	l.Close()
	s = checkBalanced(t, d)
	for _, c := range s.Classes {
		if c.FreeLocal != 0 || c.FreeReserve != c.Carved {
			t.Errorf("after Local.Close class %d: %d free locally, %d of %d in the reserve", c.Size, c.FreeLocal, c.FreeReserve, c.Carved)
		}
	}
}

func TestCapIsRespected(t *testing.T) {
	cfg := pool.Config{Classes: []int{4 << 10, 64 << 10}, ChunkSize: 64 << 10, MaxBytes: 128<<10 + 100, BatchBytes: 8 << 10}
	d := newDomain(t, 0, 0, cfg)
	if got := d.Config().MaxBytes; got != 128<<10 {
		t.Fatalf("cap rounded to %d, want %d", got, 128<<10)
	}
	l := newLocal(t, d)
	defer l.Close()
	var bufs [][]byte
	for {
		b, err := l.TryGet(4 << 10)
		if err != nil {
			if !errors.Is(err, pool.ErrExhausted) {
				t.Fatal(err)
			}
			break
		}
		bufs = append(bufs, b)
	}
	if len(bufs) != 32 {
		t.Fatalf("got %d 4 KiB buffers under a 128 KiB cap, want 32", len(bufs))
	}
	if b := l.Get(64 << 10); b != nil {
		t.Fatal("a 64 KiB buffer beyond the cap")
	}
	s := d.Stats()
	if s.MappedBytes != 128<<10 || s.Classes[0].Exhausted != 1 || s.Classes[1].Exhausted != 1 {
		t.Fatalf("after exhaustion: mapped %d, exhausted %d/%d", s.MappedBytes, s.Classes[0].Exhausted, s.Classes[1].Exhausted)
	}
	l.Put(bufs[0])
	if b := l.Get(100); b == nil || addr(b) != addr(bufs[0]) {
		t.Fatal("a freed buffer is not lent again")
	} else {
		bufs[0] = b
	}
	for _, b := range bufs {
		l.Put(b)
	}
	if s := checkBalanced(t, d); s.MappedBytes != 128<<10 {
		t.Fatalf("mapped %d", s.MappedBytes)
	}
}

func TestConcurrentLocalsOnOneDomain(t *testing.T) {
	d := newDomain(t, 0, 0, small)
	const workers = 4
	var wg sync.WaitGroup
	stop := make(chan struct{})
	statsDone := make(chan struct{})
	go func() { // a metrics reader, without locks
		defer close(statsDone)
		for {
			select {
			case <-stop:
				return
			default:
				_ = d.Stats()
				runtime.Gosched()
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := d.NewLocal()
			if err != nil {
				t.Error(err)
				return
			}
			defer l.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			var out [][]byte
			for i := range 5000 {
				if len(out) > 0 && (rng.IntN(2) == 0 || len(out) > 40) {
					j := rng.IntN(len(out))
					b := out[j]
					for _, x := range b[:min(len(b), 64)] {
						if x != byte(w) {
							t.Errorf("worker %d: buffer %#x overwritten by someone else", w, addr(b))
							return
						}
					}
					l.Put(b)
					out[j] = out[len(out)-1]
					out = out[:len(out)-1]
					continue
				}
				b := l.Get(rng.IntN(16<<10) + 1)
				if b == nil {
					continue
				}
				for k := range b[:min(len(b), 64)] {
					b[k] = byte(w)
				}
				out = append(out, b)
				_ = i
			}
			for _, b := range out {
				l.Put(b)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-statsDone
	s := checkBalanced(t, d)
	if s.Locals != 0 {
		t.Errorf("%d Locals still registered", s.Locals)
	}
	t.Logf("classes after %d workers: %+v", workers, s.Classes)
}

func TestFirstTouchFallbackWhenMbindFails(t *testing.T) {
	allowed, err := mempolicy.MemsAllowed()
	if err != nil {
		t.Fatal(err)
	}
	if allowed.Has(7) {
		t.Skip("node 7 exists here")
	}
	d := newDomain(t, 0, 7, small) // node 7 does not exist: the kernel says EINVAL
	if d.Bound() || !errors.Is(d.BindErr(), unix.EINVAL) {
		t.Fatalf("Bound %v, BindErr %v; want first touch after EINVAL", d.Bound(), d.BindErr())
	}
	t.Logf("reported once: %v", d.BindErr())
	if s := d.Stats(); s.Bound || !errors.Is(s.BindErr, unix.EINVAL) {
		t.Errorf("Stats: Bound %v BindErr %v", s.Bound, s.BindErr)
	}
	start, _ := d.Arena()
	if mode, _, err := mempolicy.AddressPolicy(start); err != nil || mode != mempolicy.Default {
		t.Errorf("arena policy %s %v, want default", mode, err)
	}
	l := newLocal(t, d)
	defer l.Close()
	var bufs [][]byte
	cpu, node := firstCPU(t)
	onCPU(t, cpu, func() { // the pinned loop thread touches first
		for _, size := range []int{4 << 10, 16 << 10, 64 << 10} {
			b := l.Get(size)
			if pages, _ := mempolicy.PageNodes(b); !mempolicy.PageAbsent(pages[0]) {
				t.Errorf("a fresh buffer is already placed: %v", pages)
			}
			touch(b)
			bufs = append(bufs, b)
		}
	})
	wantPagesOn(t, fmt.Sprintf("first touch from CPU %d", cpu), bufs, node)
	for _, b := range bufs {
		l.Put(b)
	}
	checkBalanced(t, d)

	u := newDomain(t, 1, -1, small) // asked not to bind
	if u.Bound() || u.BindErr() != nil {
		t.Errorf("node -1: Bound %v BindErr %v", u.Bound(), u.BindErr())
	}
}

func TestCloseWaitsForBuffersAndLocals(t *testing.T) {
	d, err := pool.NewDomain(0, 0, small)
	if err != nil {
		t.Fatal(err)
	}
	l := newLocal(t, d)
	b := l.Get(100)
	if err := d.Close(); err == nil || !strings.Contains(err.Error(), "Locals open") {
		t.Fatalf("Close with a Local open: %v", err)
	}
	l.Close()
	if err := d.Close(); err == nil || !strings.Contains(err.Error(), "1 buffers in use") {
		t.Fatalf("Close with a buffer out: %v", err)
	}
	l2 := newLocal(t, d)
	l2.Put(b)
	l2.Close()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := d.NewLocal(); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("NewLocal after Close: %v", err)
	}
	// The arena is gone from the address space.
	start, _ := d.Arena()
	if _, _, err := mempolicy.AddressPolicy(start); !errors.Is(err, unix.EFAULT) {
		t.Errorf("get_mempolicy on the closed arena: %v, want EFAULT", err)
	}
}

func TestHeapFallback(t *testing.T) {
	cfg := pool.Config{Classes: []int{4 << 10}, ChunkSize: 64 << 10, MaxBytes: 64 << 10}
	d, other := newDomain(t, 0, 0, cfg), newDomain(t, 1, 0, cfg)
	l, lo := newLocal(t, d), newLocal(t, other)
	defer l.Close()
	defer lo.Close()
	f := pool.NewHeapFallback(l)
	var bufs [][]byte
	for range 16 {
		bufs = append(bufs, f.Get(4<<10))
	}
	heap := f.Get(4 << 10) // the 17th: the domain is full
	big := f.Get(1 << 20)  // above every class
	if len(heap) != 4<<10 || d.Contains(heap) || len(big) != 1<<20 || d.Contains(big) {
		t.Fatalf("fallbacks: len %d in arena %v, len %d in arena %v", len(heap), d.Contains(heap), len(big), d.Contains(big))
	}
	f.Put(heap)
	f.Put(big)
	for _, b := range bufs {
		f.Put(b)
	}
	s := checkBalanced(t, d)
	if s.HeapGets != 2 || s.HeapPuts != 2 || s.TooLarge != 1 || s.Classes[0].Exhausted != 1 {
		t.Errorf("heap gets %d puts %d, too large %d, exhausted %d", s.HeapGets, s.HeapPuts, s.TooLarge, s.Classes[0].Exhausted)
	}
	foreign := lo.Get(10)
	func() {
		defer func() {
			if _, ok := recover().(*pool.PutError); !ok {
				t.Error("HeapFallback took another domain's buffer")
			}
		}()
		f.Put(foreign)
	}()
	lo.Put(foreign)
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []pool.Config{
		{Classes: []int{3000}},
		{Classes: []int{32}},
		{Classes: []int{4096, 4096}},
		{Classes: []int{4 << 20}},
		{ChunkSize: 3 << 20},
		{ChunkSize: 1024},
		{MaxBytes: 1 << 20},
		{BatchBytes: -1},
		{Classes: make([]int, 17)},
	} {
		if d, err := pool.NewDomain(0, 0, cfg); err == nil {
			d.Close()
			t.Errorf("%+v accepted", cfg)
		} else {
			t.Log(err)
		}
	}
	d := newDomain(t, 3, 0, pool.Config{})
	c := d.Config()
	if fmt.Sprint(c.Classes) != "[4096 16384 65536]" || c.ChunkSize != 2<<20 || c.MaxBytes != 256<<20 {
		t.Errorf("defaults %+v", c)
	}
}

// TestEventLoopBorrowsFromTheDomain runs a real loop whose connections and
// read buffer borrow from a node-bound domain, with the loop thread's own
// policy set by its start hook.
func TestEventLoopBorrowsFromTheDomain(t *testing.T) {
	cpu, node := firstCPU(t)
	d := newDomain(t, 0, node, pool.Config{})
	l := newLocal(t, d)
	policy := make(chan string, 1)
	big := make([]byte, 8<<20)
	loop, err := eventloop.New(eventloop.Config{
		CPU:  cpu,
		Pool: pool.NewHeapFallback(l),
		OnStart: func(*eventloop.Loop) error {
			if err := mempolicy.SetThreadPolicy(mempolicy.Bind, mempolicy.NewNodeMask(d.Node())); err != nil {
				return err
			}
			mode, nodes, err := mempolicy.ThreadPolicy()
			policy <- fmt.Sprintf("%s %s %v", mode, nodes, err)
			return nil
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
	if p := <-policy; p != fmt.Sprintf("bind %d <nil>", node) {
		t.Errorf("loop thread policy: %s", p)
	}
	c, err := dialTCP(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("go")); err != nil {
		t.Fatal(err)
	}
	n, err := readAll(c)
	if err != nil || n != len(big) {
		t.Fatalf("read %d of %d: %v", n, len(big), err)
	}
	c.Close()
	if err := loop.Stop(); err != nil {
		t.Fatal(err)
	}
	<-loop.Done()
	s := d.Stats()
	var gets int64
	for _, cs := range s.Classes {
		gets += cs.Gets
	}
	// The read buffer at least; the 8 MiB reply queues buffers too unless the
	// socket took it whole, which a busy machine's scheduling can allow.
	if gets < 1 || s.HeapGets != 0 {
		t.Errorf("the loop took %d buffers from the domain, %d from the heap", gets, s.HeapGets)
	}
	t.Logf("loop borrowed %d buffers; %+v", gets, s.Classes)
	l.Close()
	checkBalanced(t, d)
}
