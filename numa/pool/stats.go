package pool

// Stats is a snapshot of a Domain's counters. Each counter is read
// atomically but not all at the same instant: while Locals run, sums such as
// InUse may be off by a batch in flight; when every Local is idle they are exact.
type Stats struct {
	Domain int
	Node   int
	// Bound is false when pages are placed by first touch; BindErr says why.
	Bound   bool
	BindErr error
	// GrowErr is the last error the kernel gave when the arena grew, if any.
	GrowErr error
	// ReleaseErr is the last error the kernel gave when idle pages were
	// given back, if any.
	ReleaseErr error

	ReservedBytes int64 // the cap: address space reserved for the arena
	MappedBytes   int64 // chunks mapped read-write so far
	Chunks        int64
	Locals        int
	// ReleasedBytes counts the bytes of idle buffers given back to the
	// kernel so far (Config.ReleaseDelay).
	ReleasedBytes int64

	TooLarge int64 // Gets for a size above the largest class
	HeapGets int64 // buffers a HeapFallback took from the Go heap instead
	HeapPuts int64 // heap buffers a HeapFallback let go

	Classes []ClassStats
}

// ClassStats counts one size class of a Domain.
type ClassStats struct {
	Size        int
	Carved      int64 // buffers cut from chunks so far
	MappedBytes int64 // bytes of the chunks carved into this class
	InUse       int64 // handed out and not yet returned
	FreeReserve int64 // free in the domain reserve
	// FreeReleased is how many of FreeReserve hold no memory: given back to
	// the kernel after ReleaseDelay, or never touched.
	FreeReleased int64
	FreeLocal    int64 // free in Locals' lists
	Gets         int64 // successful Gets
	Puts         int64
	Exhausted    int64 // Gets refused because the cap was reached
}

// Stats returns the domain's counters without taking its lock.
func (d *Domain) Stats() Stats {
	s := Stats{
		Domain: d.id, Node: d.node, Bound: d.bound, BindErr: d.bindErr,
		ReservedBytes: int64(d.limit),
		MappedBytes:   d.stats.mapped.Load(),
		Chunks:        d.stats.chunks.Load(),
		ReleasedBytes: d.stats.released.Load(),
		TooLarge:      d.stats.tooLarge.Load(),
		HeapGets:      d.stats.heapGets.Load(),
		HeapPuts:      d.stats.heapPuts.Load(),
		Classes:       make([]ClassStats, len(d.classes)),
	}
	if e := d.stats.growErr.Load(); e != nil {
		s.GrowErr = *e
	}
	if e := d.stats.releaseErr.Load(); e != nil {
		s.ReleaseErr = *e
	}
	for i, c := range d.classes {
		cs := &d.stats.classes[i]
		s.Classes[i] = ClassStats{
			Size:         c.size,
			Carved:       cs.carved.Load(),
			MappedBytes:  cs.mapped.Load(),
			FreeReserve:  cs.freeReserve.Load(),
			FreeReleased: cs.freeClean.Load(),
			Gets:         cs.gets.Load(),
			Puts:         cs.puts.Load(),
			Exhausted:    cs.exhausted.Load(),
		}
	}
	locals := *d.locals.Load()
	s.Locals = len(locals)
	for _, l := range locals {
		s.TooLarge += l.tooLarge.Load()
		s.HeapGets += l.heapGets.Load()
		s.HeapPuts += l.heapPuts.Load()
		for i := range s.Classes {
			lc := &l.classes[i]
			s.Classes[i].Gets += lc.gets.Load()
			s.Classes[i].Puts += lc.puts.Load()
			// Loaded one by one while the owner goes on: never below zero.
			s.Classes[i].FreeLocal += max(lc.taken.Load()-lc.given.Load()-lc.gets.Load()+lc.puts.Load(), 0)
		}
	}
	for i := range s.Classes {
		s.Classes[i].InUse = s.Classes[i].Gets - s.Classes[i].Puts
	}
	return s
}
