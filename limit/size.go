package limit

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Zone sizes are nginx's: a zone of N bytes holds about as many keys as nginx's
// slab allocator fits in a shared memory zone of N bytes on 64-bit Linux with 4 KiB
// pages. The model, from src/core/ngx_slab.c of nginx 1.22:
//   - the pool header, slots and stats take 704 bytes, each page a 24-byte
//     descriptor, and pages start page-aligned;
//   - one page goes to the zone's log context (a 32-byte allocation), and the
//     zone's tree head takes one slot of its size class;
//   - a node (rbtree node header 32 bytes + the module's node + the key) takes the
//     next power of two from 8 to 2048 bytes, or whole pages beyond.
// So zone=NAME:1m holds 8095 limit_req states or 16191 limit_conn counters for
// keys up to 48 (limit_req) or 28 (limit_conn) bytes, as nginx does; 10m holds
// 81k and 163k. The difference: the table is split into shards (up to 64), each
// with an equal share of the bytes and its own eviction, so a zone full of keys of
// one length holds within a shard's entry of nginx's count, and evicts a shard's
// oldest rather than the zone's oldest.

const (
	pageSize     = 4096
	slabHeader   = 704 // sizeof(ngx_slab_pool_t) + 9 slots + 9 stats
	slabPageDesc = 24  // sizeof(ngx_slab_page_t)
	rbtreeNode   = 32  // offsetof(ngx_rbtree_node_t, color)
	minZoneSize  = 8 * pageSize
)

// slabPages is how many pages ngx_slab_init makes of a zone of size bytes.
func slabPages(size int64) int64 {
	pages := (size - slabHeader) / (pageSize + slabPageDesc)
	start := (slabHeader + pages*slabPageDesc + pageSize - 1) &^ (pageSize - 1)
	if m := pages - (size-start)/pageSize; m > 0 {
		pages -= m
	}
	return pages
}

// slabCost is the bytes ngx_slab_alloc takes for an allocation of n bytes.
func slabCost(n int) int {
	if n > pageSize/2 {
		return (n + pageSize - 1) &^ (pageSize - 1)
	}
	c := 8
	for c < n {
		c <<= 1
	}
	return c
}

// zoneBudget is what a zone has for its nodes: its pages less the log context's
// page and the tree head's slot.
func zoneBudget(size int64, head int) int {
	return int(slabPages(size)-1)*pageSize - slabCost(head)
}

// mapEntries makes n entries in memory of their own (nothing in them is a Go
// pointer), on huge pages where the kernel gives them (transparent huge pages in
// madvise mode): a zone of 10m is about 15 MB of entries, and on 4 KiB pages a
// lookup among many keys would miss the TLB more often than the cache. The
// memory is unmapped once owner (the shards, which every hold on an entry points
// into) is unreachable. Under the race detector entries are on the Go heap: it
// does not see atomics on other memory, so it would not see the table's
// synchronisation.
func mapEntries(owner *shard, n int) []entry {
	size := n * int(unsafe.Sizeof(entry{}))
	if raceEnabled {
		return make([]entry, n)
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]entry, n) // the heap's: 16-byte aligned, so some entries straddle two lines
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	runtime.AddCleanup(owner, func(mem []byte) { _ = unix.Munmap(mem) }, mem)
	return unsafe.Slice((*entry)(unsafe.Pointer(&mem[0])), n)
}
