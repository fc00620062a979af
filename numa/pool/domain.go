package pool

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa/mempolicy"
)

// Errors a Get can report through TryGet.
var (
	// ErrTooLarge means no size class holds the size asked for: the caller
	// should use other memory (the Go heap, see HeapFallback) for it.
	ErrTooLarge = errors.New("pool: size above the largest class")
	// ErrExhausted means the domain's arena reached its cap (or the kernel
	// refused more memory) and no buffer of the class is free.
	ErrExhausted = errors.New("pool: domain arena exhausted")
	// ErrClosed means the Domain was closed.
	ErrClosed = errors.New("pool: domain closed")
)

// Domain is the memory of one NUMA domain: its arena and the shared reserve
// of free buffers its Locals draw from. Its methods are safe for concurrent use.
type Domain struct {
	id, node int
	cfg      Config
	classes  []class

	mem        []byte         // the whole reservation; mapped read-write up to mapped
	base       unsafe.Pointer // &mem[0]
	limit      uintptr        // len(mem)
	chunkShift uint
	minShift   uint

	bound   bool
	bindErr error

	// chunkClass holds, per chunk, 1 + the index of the class it was carved
	// into, or 0 while the chunk is not mapped. Written under mu before any
	// buffer of the chunk is handed out; read by Put without locks.
	chunkClass []atomic.Int32
	// lent has one bit per smallest-class slot of the arena: set while the
	// buffer starting there is handed out. It catches double Puts.
	lent []atomic.Uint64

	mu      sync.Mutex
	reserve []reserveClass // free buffers per class
	mapped  uintptr
	closed  bool
	nlocals int

	stopRelease chan struct{} // closed by Close; nil without a releaser
	released    chan struct{} // closed when the releaser has returned

	locals atomic.Pointer[[]*Local] // copy on write, for Stats
	stats  domainStats
}

type domainStats struct {
	mapped     atomic.Int64
	chunks     atomic.Int64
	tooLarge   atomic.Int64 // TooLarge Gets of closed Locals
	heapGets   atomic.Int64 // of closed Locals
	heapPuts   atomic.Int64 // of closed Locals
	growErr    atomic.Pointer[error]
	released   atomic.Int64 // bytes given back to the kernel
	releaseErr atomic.Pointer[error]
	classes    [MaxClasses]classStats
}

type classStats struct {
	carved      atomic.Int64
	mapped      atomic.Int64
	freeReserve atomic.Int64
	freeClean   atomic.Int64
	exhausted   atomic.Int64
	gets        atomic.Int64 // of closed Locals
	puts        atomic.Int64 // of closed Locals
}

// NewDomain reserves the arena of domain id and binds it to NUMA node node
// with mbind(MPOL_BIND). If the kernel refuses the binding with EPERM, ENOSYS
// or EINVAL (a node that does not exist or has no memory), the domain still
// works, placing pages by first touch: check Bound and BindErr and log it. A
// negative node asks for first touch without trying to bind. No memory is
// committed before the first Get.
func NewDomain(id, node int, cfg Config) (*Domain, error) {
	cfg, classes, err := cfg.normalize()
	if err != nil {
		return nil, fmt.Errorf("pool: domain %d: %w", id, err)
	}
	mem, err := unix.Mmap(-1, 0, int(cfg.MaxBytes), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("pool: domain %d: mmap %d bytes: %w", id, cfg.MaxBytes, err)
	}
	d := &Domain{
		id: id, node: node, cfg: cfg, classes: classes,
		mem: mem, base: unsafe.Pointer(&mem[0]), limit: uintptr(len(mem)),
		chunkShift: uint(bits.TrailingZeros(uint(cfg.ChunkSize))),
		minShift:   uint(bits.TrailingZeros(uint(cfg.Classes[0]))),
		reserve:    make([]reserveClass, len(classes)),
	}
	d.chunkClass = make([]atomic.Int32, d.limit>>d.chunkShift)
	d.lent = make([]atomic.Uint64, (d.limit>>d.minShift+63)/64)
	// Client data has no place in a core dump; best effort.
	_ = unix.Madvise(mem, unix.MADV_DONTDUMP)
	if node >= 0 {
		err := bindNode(mem, node)
		switch {
		case err == nil:
			d.bound = true
		case errors.Is(err, unix.EPERM), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL):
			d.bindErr = fmt.Errorf("pool: domain %d: binding to node %d refused, placing by first touch: %w", id, node, err)
		default:
			unix.Munmap(mem)
			return nil, fmt.Errorf("pool: domain %d: %w", id, err)
		}
	}
	d.locals.Store(&[]*Local{})
	register(d)
	if cfg.ReleaseDelay > 0 {
		d.stopRelease, d.released = make(chan struct{}), make(chan struct{})
		go d.releaser(cfg.ReleaseDelay/releaseTicks, d.stopRelease, d.released)
	}
	return d, nil
}

func bindNode(mem []byte, node int) (err error) {
	if node >= mempolicy.MaxNodes {
		return fmt.Errorf("node %d: %w", node, unix.EINVAL)
	}
	return mempolicy.Mbind(mem, mempolicy.Bind, mempolicy.NewNodeMask(node), mempolicy.Strict|mempolicy.Move)
}

// ID returns the domain's number, as given to NewDomain.
func (d *Domain) ID() int { return d.id }

// Node returns the NUMA node the domain's memory is meant for.
func (d *Domain) Node() int { return d.node }

// Bound reports whether the arena is bound to the node with mbind; false
// means pages are placed by first touch.
func (d *Domain) Bound() bool { return d.bound }

// BindErr returns why the arena is not bound (nil if it is, or if NewDomain
// was asked not to bind).
func (d *Domain) BindErr() error { return d.bindErr }

// Config returns the domain's configuration with defaults filled in and the
// cap rounded to whole chunks.
func (d *Domain) Config() Config { return d.cfg }

// Arena returns the domain's whole address range, reserved and mapped alike,
// for tests and diagnostics; only the first MappedBytes of it are accessible.
func (d *Domain) Arena() (start, end uintptr) {
	return uintptr(d.base), uintptr(d.base) + d.limit
}

// Contains reports whether b's memory lies in this domain's arena.
func (d *Domain) Contains(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= uintptr(d.base) && p-uintptr(d.base) < d.limit
}

// NewLocal returns a free list for one event loop of the domain. Use it from
// one goroutine at a time (the loop's locked thread), and Close it when the
// loop ends.
func (d *Domain) NewLocal() (*Local, error) {
	l := &Local{d: d, classes: make([]localClass, len(d.classes))}
	for i, c := range d.classes {
		l.classes[i] = localClass{size: c.size, free: make([]uintptr, 0, c.high)}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("domain %d: %w", d.id, ErrClosed)
	}
	d.nlocals++
	old := *d.locals.Load()
	ls := append(old[:len(old):len(old)], l)
	d.locals.Store(&ls)
	return l, nil
}

// Close unmaps the arena. It fails, keeping the arena, while a Local is open
// or a buffer is still handed out, since unmapping would leave slices
// pointing at nothing.
func (d *Domain) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	if d.nlocals > 0 {
		d.mu.Unlock()
		return fmt.Errorf("pool: domain %d: close with %d Locals open", d.id, d.nlocals)
	}
	var out int64
	for i := range d.classes {
		cs := &d.stats.classes[i]
		out += cs.gets.Load() - cs.puts.Load()
	}
	if out != 0 {
		d.mu.Unlock()
		return fmt.Errorf("pool: domain %d: close with %d buffers in use", d.id, out)
	}
	unregister(d)
	d.closed = true
	for i := range d.reserve {
		d.reserve[i] = reserveClass{}
	}
	d.mu.Unlock()
	// The releaser may be giving pages back outside the lock: the arena
	// stays mapped until it has returned.
	if d.stopRelease != nil {
		close(d.stopRelease)
		<-d.released
	}
	if err := unix.Munmap(d.mem); err != nil {
		return fmt.Errorf("pool: domain %d: munmap: %w", d.id, err)
	}
	d.mem = nil // base and limit stay: lookup may still read them
	return nil
}

// take appends up to n free buffers of class ci to dst, resident ones first,
// growing the arena by a chunk if the reserve has none.
func (d *Domain) take(ci int, dst []uintptr, n int) ([]uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return dst, ErrClosed
	}
	r := &d.reserve[ci]
	if len(r.dirty)+len(r.clean) == 0 {
		if !d.growLocked(ci) {
			d.stats.classes[ci].exhausted.Add(1)
			return dst, ErrExhausted
		}
	}
	k := min(n, len(r.dirty))
	dst = append(dst, r.dirty[len(r.dirty)-k:]...)
	r.dirty = r.dirty[:len(r.dirty)-k]
	r.low = min(r.low, len(r.dirty))
	if k < n && len(r.clean) > 0 {
		k = min(n-k, len(r.clean))
		dst = append(dst, r.clean[len(r.clean)-k:]...)
		r.clean = r.clean[:len(r.clean)-k]
		d.stats.classes[ci].freeClean.Store(int64(len(r.clean)))
	}
	d.stats.classes[ci].freeReserve.Store(r.free())
	return dst, nil
}

// give moves bufs (offsets of class ci) back to the reserve.
func (d *Domain) give(ci int, bufs []uintptr) {
	d.mu.Lock()
	r := &d.reserve[ci]
	r.dirty = append(r.dirty, bufs...)
	d.stats.classes[ci].freeReserve.Store(r.free())
	d.mu.Unlock()
}

// growLocked maps the next chunk read-write and carves it into class ci.
func (d *Domain) growLocked(ci int) bool {
	chunk := uintptr(d.cfg.ChunkSize)
	if d.limit-d.mapped < chunk {
		return false
	}
	start := d.mapped
	if err := unix.Mprotect(d.mem[start:start+chunk], unix.PROT_READ|unix.PROT_WRITE); err != nil {
		err = fmt.Errorf("pool: domain %d: mprotect chunk at +%#x: %w", d.id, start, err)
		d.stats.growErr.Store(&err)
		return false
	}
	d.mapped += chunk
	d.chunkClass[start>>d.chunkShift].Store(int32(ci + 1))
	size := uintptr(d.classes[ci].size)
	r := &d.reserve[ci]
	// Never touched, so clean. Pushed from the top down so the lowest
	// addresses go out first.
	for off := start + chunk - size; ; off -= size {
		r.clean = append(r.clean, off)
		if off == start {
			break
		}
	}
	cs := &d.stats.classes[ci]
	cs.freeClean.Store(int64(len(r.clean)))
	cs.carved.Add(int64(chunk / size))
	cs.mapped.Add(int64(chunk))
	d.stats.mapped.Add(int64(chunk))
	d.stats.chunks.Add(1)
	return true
}

// locate checks that b is a whole buffer of this arena and returns its class
// and offset.
func (d *Domain) locate(b []byte) (ci int, off uintptr, err *PutError) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	base := uintptr(d.base)
	if cap(b) == 0 || p < base || p-base >= d.limit {
		owner := -1
		if o := lookup(p); o != nil && cap(b) > 0 {
			owner = o.id
		}
		reason := "not from any pool arena (Go heap or other memory)"
		if owner >= 0 {
			reason = fmt.Sprintf("from domain %d's arena", owner)
		}
		return 0, 0, d.putError(b, owner, reason)
	}
	off = p - base
	ci = int(d.chunkClass[off>>d.chunkShift].Load()) - 1
	if ci < 0 {
		return 0, 0, d.putError(b, d.id, "in the unmapped part of the arena")
	}
	size := d.classes[ci].size
	if off&uintptr(size-1) != 0 {
		return 0, 0, d.putError(b, d.id, fmt.Sprintf("not the start of a %d-byte buffer", size))
	}
	if cap(b) != size {
		return 0, 0, d.putError(b, d.id, fmt.Sprintf("cap %d, the class holds %d (resliced?)", cap(b), size))
	}
	return ci, off, nil
}

func (d *Domain) putError(b []byte, owner int, reason string) *PutError {
	return &PutError{Domain: d.id, Owner: owner, Addr: uintptr(unsafe.Pointer(unsafe.SliceData(b))), Len: len(b), Cap: cap(b), Reason: reason}
}

// lend marks the buffer at off handed out.
func (d *Domain) lend(off uintptr) {
	i := off >> d.minShift
	bit := uint64(1) << (i % 64)
	if d.lent[i/64].Or(bit)&bit != 0 {
		panic(fmt.Sprintf("pool: domain %d: buffer at +%#x on a free list while handed out (pool corrupted)", d.id, off))
	}
}

// unlend marks the buffer at off returned; false if it was not handed out.
func (d *Domain) unlend(off uintptr) bool {
	i := off >> d.minShift
	bit := uint64(1) << (i % 64)
	return d.lent[i/64].And(^bit)&bit != 0
}

// PutError reports a buffer that a Local refused to take back.
type PutError struct {
	Domain int     // the domain that refused it
	Owner  int     // the domain whose arena holds it, -1 for none
	Addr   uintptr // where the buffer starts
	Len    int
	Cap    int
	Reason string
}

func (e *PutError) Error() string {
	return fmt.Sprintf("pool: domain %d refused buffer %#x (len %d, cap %d): %s", e.Domain, e.Addr, e.Len, e.Cap, e.Reason)
}

// registry lists the open domains, for naming the owner of a foreign buffer.
var registry struct {
	mu      sync.Mutex
	domains atomic.Pointer[[]*Domain]
}

func register(d *Domain) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	var ds []*Domain
	if p := registry.domains.Load(); p != nil {
		ds = append(ds, *p...)
	}
	ds = append(ds, d)
	registry.domains.Store(&ds)
}

func unregister(d *Domain) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	var ds []*Domain
	for _, o := range *registry.domains.Load() {
		if o != d {
			ds = append(ds, o)
		}
	}
	registry.domains.Store(&ds)
}

// lookup returns the open domain whose arena holds p, or nil.
func lookup(p uintptr) *Domain {
	ds := registry.domains.Load()
	if ds == nil {
		return nil
	}
	for _, d := range *ds {
		if base := uintptr(d.base); p >= base && p-base < d.limit {
			return d
		}
	}
	return nil
}
