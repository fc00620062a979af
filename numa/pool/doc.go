// Package pool lends byte buffers from memory placed on one NUMA node, off
// the Go heap.
//
// A Domain owns an arena: one anonymous private mapping that reserves the
// domain's cap of address space (PROT_NONE) and is bound to the domain's node
// with mbind(MPOL_BIND) before any page exists. The arena grows a chunk at a
// time (mprotect to read-write, 2 MiB by default) up to the cap; each chunk is
// carved into buffers of one size class and pushed onto the domain's reserve,
// a lock-protected stack per class. A chunk keeps its class and its address
// range until Close unmaps the arena, but the pages of buffers that stayed
// free in the reserve for Config.ReleaseDelay go back to the kernel
// (madvise MADV_DONTNEED, from a goroutine of the domain; see release.go) and
// are faulted in again, on the bound node, when a buffer is used again.
//
// A Local is one event loop's free list: no locks, used only from the loop's
// thread. It takes buffers from the reserve in batches when it runs dry and
// gives a batch back when it holds too many, so the reserve's lock is taken
// about once per batch, not once per buffer.
//
// Where the kernel refuses mbind (EPERM in a container, ENOSYS without NUMA,
// EINVAL for a node without memory) the Domain falls back to first touch:
// each page lands on the node of the thread that first writes it, which is the
// pinned loop that got the buffer. Domain.Bound and Domain.BindErr report this
// once so the caller can log it.
//
// Every buffer handed out is checked in again by address: Put refuses (panics
// with a *PutError; TryPut returns it) a buffer that is not the start of a
// buffer of this domain's arena with its full class capacity, or that is not
// currently handed out (a double Put). Mixing memory from another domain, or
// lending one buffer to two connections, would be silent otherwise.
//
// Nothing in the arena holds Go pointers, and the garbage collector never
// scans it: store only bytes there.
//
// Counters (Domain.Stats) are atomics that another goroutine reads without
// taking the reserve's lock.
package pool
