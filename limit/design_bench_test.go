package limit

import (
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// cpuTime is the CPU time used by the calling thread or the process, in ns.
func cpuTime(who int) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// The designs compared for state shared by loops on several NUMA domains (the
// numbers are in doc.go):
//
//	locked:    nginx's own shape: N shards by key hash, each a mutex over a map and
//	           an exact LRU list; every request takes its shard's lock and moves its
//	           node to the LRU head.
//	perdomain: each domain its own zone at rate/D and burst/D, nothing shared: the
//	           floor of any design that reconciles per-domain state, whose steady
//	           path is this plus the reconciliation. It does not hold nginx's limit
//	           (TestPerDomainSplitDoesNotHold).
//	atomic:    this package: lock-free lookups, a CAS on the key's word, CLOCK.
//
// Workloads: one hot key, or 65536 keys (as many clients) visited by every thread
// in its own random order; "pass" with a rate no request exceeds (every request
// writes its state), "reject" at 1r/s (every request after the first is turned
// away: reads only in nginx's bucket, a lock and an LRU move in nginx's shape).
// Parallel runs use b.RunParallel (-cpu 1,2); pinned runs put one locked thread on
// each CPU (numa.PinThread), as the loops run. cpu-ns/req is the CPU time of the
// threads (the process's, in parallel runs) over the requests: what one request
// costs a loop, with the time other processes took the CPUs left out.

type lockedZone struct {
	rate   uint64
	seed   maphash.Seed
	shards []lockedShard
	waits  atomic.Int64
}

type lockedShard struct {
	mu   sync.Mutex
	m    map[string]*lockedNode
	head lockedNode // LRU ring: head.next is the newest
	_    [64]byte
}

type lockedNode struct {
	prev, next *lockedNode
	key        string
	last       int64
	excess     uint64
}

func newLockedZone(rate uint64, shards int) *lockedZone {
	z := &lockedZone{rate: rate, seed: maphash.MakeSeed(), shards: make([]lockedShard, shards)}
	for i := range z.shards {
		s := &z.shards[i]
		s.m = map[string]*lockedNode{}
		s.head.prev, s.head.next = &s.head, &s.head
	}
	return z
}

func (z *lockedZone) check(key []byte, now int64, burst uint64) ReqStatus {
	s := &z.shards[maphash.Bytes(z.seed, key)%uint64(len(z.shards))]
	if !s.mu.TryLock() {
		z.waits.Add(1) // a loop would wait here for the other one
		s.mu.Lock()
	}
	n := s.m[string(key)]
	if n == nil {
		n = &lockedNode{key: string(key), last: now}
		s.m[n.key] = n
		n.prev, n.next = &s.head, s.head.next
		n.next.prev, s.head.next = n, n
		s.mu.Unlock()
		return ReqPassed
	}
	if s.head.next != n { // to the LRU head
		n.prev.next, n.next.prev = n.next, n.prev
		n.prev, n.next = &s.head, s.head.next
		n.next.prev, s.head.next = n, n
	}
	ms := max(now-n.last, 0)
	l := leak(z.rate, ms)
	var excess uint64
	if l < n.excess+1000 {
		excess = n.excess + 1000 - l
	}
	if excess > burst {
		s.mu.Unlock()
		return ReqRejected
	}
	n.excess = excess
	if ms != 0 {
		n.last = now
	}
	s.mu.Unlock()
	return ReqPassed
}

type benchDesign struct {
	name  string
	check func(k int, key []byte, now int64) ReqStatus // k: the thread (its domain)
	waits func() int64                                 // requests that waited for a lock
}

// designs are compared on the same work: one limit, lookup and account. (The
// whole API, ReqConf.Check, adds the same to each: BenchmarkReqCheck.)
func designs(b *testing.B, rate, burst uint64) []benchDesign {
	locked := newLockedZone(rate, 64)
	shared := reqZone(b, "a", rate, 10<<20)
	var perDomain [2]*ReqZone
	for d := range perDomain {
		perDomain[d] = reqZone(b, "d", max(rate/2, 1), 10<<20)
	}
	none := func() int64 { return 0 }
	return []benchDesign{
		{"locked", func(_ int, key []byte, now int64) ReqStatus { return locked.check(key, now, burst) }, locked.waits.Load},
		{"perdomain", func(k int, key []byte, now int64) ReqStatus { return perDomain[k%2].checkOne(key, now, burst/2) }, none},
		{"atomic", func(_ int, key []byte, now int64) ReqStatus { return shared.checkOne(key, now, burst) }, none},
	}
}

// checkOne is one limit's lookup and account, what ReqConf.Check does for a
// location with one limit_req.
func (z *ReqZone) checkOne(key []byte, now int64, burst uint64) ReqStatus {
	var p reqPin
	if rc, _ := z.lookup(key, now, burst, true, &p); rc == rcOK {
		return ReqPassed
	}
	return ReqRejected
}

const manyKeys = 65536

func benchKeys() [][]byte {
	keys := make([][]byte, manyKeys)
	for i := range keys {
		keys[i] = binary.BigEndian.AppendUint32(nil, 10<<24|uint32(i))
	}
	return keys
}

// order is thread k's walk over the keys.
func order(k int) []uint32 {
	o := make([]uint32, manyKeys)
	for i := range o {
		o[i] = uint32(i)
	}
	rand.New(rand.NewPCG(uint64(k), 7)).Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
	return o
}

func BenchmarkDesigns(b *testing.B) {
	keys := benchKeys()
	orders := [2][]uint32{order(0), order(1)}
	hot := [][]byte{{10, 0, 0, 1}}
	for _, path := range []struct {
		name         string
		rate, burst  uint64
		wantRejected bool
	}{{"pass", 1 << 40, 0, false}, {"reject", 1000, 0, true}} {
		for _, d := range designs(b, path.rate, path.burst) {
			// Warm up: every key known to every domain.
			for k := range 2 {
				for _, key := range keys {
					d.check(k, key, Now())
				}
			}
			for _, load := range []struct {
				name string
				keys func(k int, i uint32) []byte
			}{
				{"hot", func(int, uint32) []byte { return hot[0] }},
				{"many", func(k int, i uint32) []byte { return keys[orders[k%2][i%manyKeys]] }},
			} {
				name := d.name + "/" + load.name + "/" + path.name
				b.Run(name+"/parallel", func(b *testing.B) {
					b.ReportAllocs()
					var next atomic.Int32
					waits0 := d.waits()
					start := cpuTime(unix.RUSAGE_SELF)
					b.RunParallel(func(pb *testing.PB) {
						k := int(next.Add(1) - 1)
						var i uint32
						now := Now()
						for pb.Next() {
							if i%64 == 0 {
								now = Now()
							}
							d.check(k, load.keys(k, i), now)
							i++
						}
					})
					b.ReportMetric(float64(cpuTime(unix.RUSAGE_SELF)-start)/float64(b.N), "cpu-ns/req")
					b.ReportMetric(float64(d.waits()-waits0)/float64(b.N), "waits/req")
				})
				for _, threads := range []int{1, 2} {
					b.Run(name+"/pinned"+string(rune('0'+threads)), func(b *testing.B) {
						b.ReportAllocs()
						defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(threads, runtime.GOMAXPROCS(0))))
						var cpu atomic.Int64
						waits0 := d.waits()
						onCPUs(b, threads, func(k int) {
							start := cpuTime(unix.RUSAGE_THREAD)
							now := Now()
							for i := range uint32(b.N / threads) {
								if i%64 == 0 {
									now = Now()
								}
								d.check(k, load.keys(k, i), now)
							}
							cpu.Add(cpuTime(unix.RUSAGE_THREAD) - start)
						})
						b.ReportMetric(float64(cpu.Load())/float64(b.N), "cpu-ns/req")
						b.ReportMetric(float64(d.waits()-waits0)/float64(b.N), "waits/req")
					})
				}
			}
		}
	}
}

// The per-domain split holds the limit only while a client's requests spread
// evenly over the domains; steering puts a connection on the domain of the CPU
// that took its SYN (the RX queue of its 4-tuple's hash), so one client with one
// keep-alive connection is served by one domain and gets rate/D.
func TestPerDomainSplitDoesNotHold(t *testing.T) {
	const rate = 10 * 1000 // 10r/s
	var domains [2]*ReqConf
	for d := range domains {
		domains[d] = &ReqConf{Limits: []ReqLimit{{Zone: reqZone(t, "d", rate/2, 1<<20), Burst: 0}}}
	}
	whole := &ReqConf{Limits: []ReqLimit{{Zone: reqZone(t, "w", rate, 1<<20), Burst: 0}}}
	key := []byte{10, 0, 0, 1}
	var split, shared int
	for ms := int64(0); ms < 10_000; ms += 10 { // 100r/s for 10 s, all on domain 0
		if domains[0].Check([][]byte{key}, 1<<33+ms).Status == ReqPassed {
			split++
		}
		if whole.Check([][]byte{key}, 1<<33+ms).Status == ReqPassed {
			shared++
		}
	}
	if shared != 100 || split != 50 {
		t.Fatalf("over 10 s at 10r/s: shared zone passed %d (nginx 100), per-domain split %d", shared, split)
	}
}

// BenchmarkLineTransfer is the price of a cache line moving between the two
// CPUs: two pinned threads take turns writing one word, each waiting to see the
// other's write (a ping-pong): ns/op is one transfer. A hot key's entry moves
// like this each time the other loop serves it.
func BenchmarkLineTransfer(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	var line struct {
		_ [64]byte
		v atomic.Int64
		_ [64]byte
	}
	n := int64(b.N)
	b.ResetTimer()
	onCPUs(b, 2, func(k int) {
		for i := int64(k); i < n; i += 2 {
			for line.v.Load() != i {
			}
			line.v.Store(i + 1)
		}
	})
}
