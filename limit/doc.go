// Package limit holds the state and decisions of nginx's limit_req and
// limit_conn modules (ngx_http_limit_req_module.c, ngx_http_limit_conn_module.c)
// for a process whose connections land on many loops, one pinned thread each,
// across NUMA domains. nginx keeps a zone in shared memory behind one mutex; here
// a zone is a table every loop reads and updates without a lock, and the limit
// holds for the whole process as in nginx.
//
// # Calling it from the HTTP core
//
// Module (module.go) is nginx's two modules on the HTTP core, registered in the
// binary: the directives, $limit_req_status and $limit_conn_status, the handlers
// of the preaccess phase, a delay on the loop's timer (the request's Pending, so a
// client that goes away ends it), and the limit_conn counts given back in the log
// phase, which runs for every request that began, however it ends. It does the
// following:
//
// Configuration, once per snapshot, off the loops:
//
//	limit_req_zone   ParseReqZone, then Zones.DeclareReq
//	limit_conn_zone  ParseConnZone, then Zones.DeclareConn
//	limit_req        AddReqLimit (to the level's list; a second one for a zone is an error)
//	limit_conn       AddConnLimit
//	*_status         ParseStatus (400-599, default 503)
//	*_log_level      ParseLogLevel (info, notice, warn, error; default error)
//	*_dry_run        ParseDryRun (default off)
//
// Then Zones.Open(the running snapshot's Zones) makes the zones (a zone of the same
// name, kind and size keeps its states across the reload, as nginx's shared zones
// do) and Zones.ReqLimits / ConnLimits turn each location's merged list into a
// ReqConf / ConnConf. nginx's inheritance: a level without limit_req takes its
// parent's whole list, and status, log level and dry run are inherited one by one;
// the same for limit_conn.
//
// Each request, in the preaccess phase, limit_req first (nginx runs its handler
// before limit_conn's), once per main request (after an internal redirect the
// status is already set and the limit is not applied again):
//
//	d := reqConf.Check(keys, now)        // keys[i]: limit i's zone key evaluated; now: Now(), read once per loop iteration
//	r.main.limitReqStatus = d.Status      // $limit_req_status
//	log d.AppendLog at reqConf.LogLevel (rejections), DelayLogLevel() (delays), alert (d.Full)
//	d.Code != 0: finalize the request with d.Code
//	d.Delay > 0: hold the request on the loop's timer for d.Delay, watching the
//	             client for a close but not reading the body, then go on with the
//	             next handler
//
//	c := connConf.Acquire(keys, &r.main.connHold)
//	r.main.limitConnStatus = c.Status     // $limit_conn_status
//	log c.AppendLog at connConf.LogLevel (crit when c.Full)
//	c.Code != 0: finalize the request with c.Code
//
// and when the main request is freed (after its log phase, or when the client
// goes away): r.main.connHold.Release(). Nothing here blocks, sleeps or starts a
// goroutine; a delay is a duration for the caller's timer. With keys known to
// their zones, nothing allocates.
//
// # The design: per-key atomics in a table shared by the loops
//
// A zone is a table split into up to 64 shards by key hash. Each key's state is
// one 64-bit word in a 64-byte entry (one cache line): limit_req's excess in
// milli-requests and the time of the last accounted request, limit_conn's count.
// A request hashes its key, finds the entry without a lock (a bucket's first key
// sits in the bucket itself), pins it with one atomic add (the pin is nginx's
// node->count: it keeps the entry from being evicted and its key from being
// rewritten while it is compared), updates the word with a compare-and-swap of
// nginx's arithmetic on the word it read, and unpins. Only a key that is not in
// the table takes its shard's mutex, to insert it; when the zone's bytes are used
// up, the insert evicts with a CLOCK hand. There is no lock, list or counter
// shared by requests on known keys.
//
// Three designs were measured on this 2-CPU machine doing the same work (one
// limit: look up, account), with 64 shards each: "locked" is nginx's shape (a
// mutex per shard over a map and an exact LRU list), "perdomain" gives each
// domain its own zone at rate/2 and burst/2 and shares nothing, "atomic" is this
// package. CPU time per request, pass/reject, medians of 7 interleaved runs of
// BenchmarkDesigns (the machine is shared with other work: single runs vary by
// half):
//
//	             one hot key              65536 keys
//	             1 thread   2 pinned      1 thread   2 pinned
//	locked       35/46      59/68         159/172    263/306
//	perdomain    35/34      43/42         134/124    236/153
//	atomic       40/36      56/53         111/121    155/137
//
// The locked shape is 5 ns cheaper on one thread and one key (two atomic
// operations to three), and costs 40-55% more with many keys on two threads: a
// request there moves the shard's lock word, the node and its LRU neighbours,
// here one entry. With two threads about 1% of its requests waited for the other
// thread's lock (a loop parked). The per-domain split is the cheapest on a hot
// key, where it shares nothing, but does not hold nginx's limit
// (TestPerDomainSplitDoesNotHold: a client served by one domain gets rate/2),
// and is no cheaper with many keys (each domain keeps its own copy of every key).
// The atomic table holds the limit exactly across loops (TestReqHotKeyExactAcrossCPUs)
// and no loop ever waits for another on a known key. The whole API adds ~15 ns:
// Check with one limit ~55 ns, two limits ~100 ns, limit_conn's Acquire and
// Release ~55 ns on one thread (BenchmarkReqCheck, BenchmarkConnAcquireRelease),
// no allocation.
//
// # What crosses NUMA domains
//
// On the steady path, only the entry of the key looked up: its cache line moves to
// the loop that serves the request when another loop served that key last. A key
// whose requests all land on one domain stays there. A hot key served by loops on
// two domains moves with each request that alternates between them: ~70 ns a
// move between this machine's two CPUs (BenchmarkLineTransfer), which took a hot
// key from 40 ns a request on one thread to 56 ns on two (consecutive requests
// on one CPU share a move). Across sockets a move costs more; it is the price of
// one limit for the whole process, paid only by keys hot on two domains at once.
// Inserting a new key also touches the shard's
// mutex and the zone's byte count. The per-domain split would move nothing, but
// cannot hold nginx's limit (TestPerDomainSplitDoesNotHold); reconciling
// per-domain counts moves the same lines less often and still lets a client over
// its limit between reconciliations.
//
// # Where it differs from nginx
//
//   - burst is at most 65535 (nginx takes any int): the excess shares the word
//     with the time.
//   - A key idle for 2^37 ms (4.4 years) reads as drained; nginx's ms = 1 for a
//     time more than a minute back (a wall clock that jumped) cannot happen on the
//     shared monotonic clock.
//   - Which old key an insert evicts is the CLOCK's choice, not the exact least
//     recently used: a key seen once lives for roughly 2/3 to 4/3 of a zone's
//     worth of new keys, a key seen again at least for a zone's worth, as under nginx's
//     LRU (TestActiveKeySurvivesFlood). The number of keys a zone holds is
//     nginx's (TestNginxZoneCapacity): 8095 limit_req states or 16191 limit_conn
//     counters per megabyte for short keys.
//   - Eviction looks at up to 256 entries of a shard and then takes the first
//     unpinned one it passed; in a shard whose entries are all held it fails and
//     tries one other shard that is not busy, so a zone almost full of held
//     limit_conn counters may refuse a new key while a few slots are free.
//   - limit_conn keeps a key whose count is back at 0 as a free slot for the next
//     key (nginx frees the node): the zone holds as many counted keys.
//   - limit_req_zone ... sync (NGINX Plus) is refused with its own message.
//   - A limit naming an undeclared zone is reported at the directive's line
//     (nginx names no place).
package limit
