// Package cache is the storage of nginx's proxy cache (ngx_http_file_cache): the
// entries' files under a proxy_cache_path, the keys zone that indexes them in
// memory, the cache loader and the cache manager. The proxy module decides what
// is cached and serves hits (proxy/cache.go); this package knows no HTTP.
//
// # Files
//
// One file per key, named by the MD5 of the key under the levels' directories, as
// nginx's: a fixed header (validity, stale-while-revalidate and stale-if-error
// seconds, date, offsets; version 1 files, without the stale times, are still
// read), the key, the upstream's
// response head, the body. A file is written to a temporary file in PATH while the
// response streams to the client and renamed into place once it is whole (file.go),
// so a crash midway never leaves an entry that is served; a file that does not read
// back whole, or holds another key, is a miss. What runs on the loops is page-cache
// file I/O, as file.go says; directory walks and unlinks run off them.
//
// # The keys zone: one per process, shared by every loop and domain
//
// The zone is a map of key to state (uses, validity, size, updating) with an LRU
// list, split in 64 shards by the key's first byte, each behind a mutex held only
// for the map and list update, never across I/O (zone.go). Its size bounds the keys
// (about 8000 per megabyte, as nginx counts), the least recently used evicted.
//
// NUMA: the zone is shared, not one per domain. A response cached once serves
// every domain: per-domain zones would fetch and store each entry once per domain
// (as many upstream requests and disk copies), which costs an edge cache more than
// what the shared index moves across the interconnect. What crosses it on a hit
// from a domain other than the one that stored the entry: the shard's mutex and
// the entry's node (a few cache lines, BenchmarkAcquire: 60-200 ns a lookup on this
// 2-CPU host, contended or not, against 11-14 µs of CPU for a whole small hit), and
// the file's pages, which sit in the page cache on the node of the loop that wrote
// them and go to the client's socket by sendfile. The buffers a hit uses (the head
// read, the socket's) are the serving loop's own, from its domain's pool. Not
// measured on two real nodes (this host has one; the VM harness of integration/vm
// could).
//
// # Loader and manager
//
// Open starts, once per zone and process, a goroutine that first indexes the
// files already in PATH (nginx's cache loader: a restart or a binary upgrade keeps
// the cache; temporary files of processes that are gone are removed), then in
// iterations removes the entries not used for inactive and, beyond max_size
// (counted in 4 KiB blocks, as nginx counts) or while the file system has less
// than min_free available (statfs), the least recently used ones, unlinking their
// files after the shard's lock is released (manager.go). Both pause as nginx's
// loader_* and manager_* parameters say. A reload's zone of the same name, path,
// levels and size keeps its index and takes the reload's limits.
package cache
