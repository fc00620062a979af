package limit

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/numa"
)

// onCPUs runs fn(k) for k in 0..n-1 at once, each on a locked thread pinned to CPU
// k modulo the CPUs this process may use, as the loops run.
func onCPUs(t testing.TB, n int, fn func(k int)) {
	t.Helper()
	set, err := numa.ThreadAffinity(0)
	if err != nil {
		t.Fatal(err)
	}
	cpus := set.CPUs()
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			defer numa.SetThreadAffinity(0, set) // the thread goes back to the scheduler as it was
			if err := numa.PinThread(cpus[k%len(cpus)]); err != nil {
				t.Error(err)
				return
			}
			fn(k)
		}()
	}
	wg.Wait()
}

// Two loops on two CPUs hammer one key: every request that passes is accounted
// exactly once. With a rate that drains a whole number of milli-requests per ms,
// nginx's bucket gives (passed-1)*1000 = excess now + rate*(last-first)/1000 as
// long as it never runs empty: the first request of a new key is free, each later
// one adds 1000, the drain is exact. A lost update (two loops accounting from the
// same state) breaks it.
func TestReqHotKeyExactAcrossCPUs(t *testing.T) {
	// 100r/s burst=500: a full bucket takes 5 s to drain, longer than both
	// threads are ever kept off their CPUs by the other processes here.
	rate, burst := uint64(100*1000), uint64(500)
	z := reqZone(t, "hot", rate, 1<<20)
	c := &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: burst * 1000, Delay: 0}}, Status: 503}
	key := []byte{10, 0, 0, 1}
	dur := 1500 * time.Millisecond
	if testing.Short() || raceEnabled {
		dur = 300 * time.Millisecond
	}
	var passed, rejected, total [2]int
	var first int64
	var ready sync.WaitGroup
	ready.Add(2)
	start := make(chan struct{})
	var deadline time.Time
	onCPUs(t, 2, func(k int) {
		ready.Done()
		if k == 0 {
			// The bucket starts full so that it never drains to 0, where nginx
			// drops whatever drained beyond it.
			ready.Wait()
			first = Now()
			for range burst + 1 {
				if d := c.Check([][]byte{key}, first); d.Status != ReqPassed && d.Status != ReqDelayed {
					t.Error(d)
				}
			}
			deadline = time.Now().Add(dur)
			close(start)
		}
		<-start
		keys := [][]byte{key}
		for time.Now().Before(deadline) {
			for range 64 {
				switch c.Check(keys, Now()).Status {
				case ReqPassed, ReqDelayed:
					passed[k]++
				default:
					rejected[k]++
				}
				total[k]++
			}
		}
	})
	h := z.t.hash(key)
	s := z.t.shard(h)
	i := s.lookup(h, key)
	w := s.ents[i].word.Load()
	s.unpin(i)
	excess, last := w>>lastBits, int64(w&lastMask)
	n := int(burst) + 1 + passed[0] + passed[1]
	if uint64(n-1)*1000 != excess+rate*uint64(last-first)/1000 {
		t.Fatalf("%d passed, but excess %d and %d ms drained at %dr/s account for %d", n, excess, last-first, rate/1000, 1+(excess+rate*uint64(last-first)/1000)/1000)
	}
	secs := float64(last-first) / 1000
	t.Logf("%d requests on 2 CPUs (%d and %d), %d passed (%d+%d after the first %d) over %.3fs at %dr/s burst=%d: R*T+B+1 = %.0f",
		total[0]+total[1], total[0], total[1], n, passed[0], passed[1], burst+1, secs, rate/1000, burst, float64(rate/1000)*secs+float64(burst)+1)
	if passed[0] == 0 || passed[1] == 0 {
		t.Errorf("one CPU never passed: %v", passed)
	}
}

// limit_conn across CPUs: never more than the limit held at once, every count
// given back.
func TestConnAcrossCPUs(t *testing.T) {
	const limit = 2
	z := connZone(t, "c", 1<<20)
	c := &ConnConf{Limits: []ConnLimit{{Zone: z, Conn: limit}}, Status: 503}
	var held, most atomic.Int64
	var passed, rejected, spin atomic.Int64
	deadline := time.Now().Add(300 * time.Millisecond)
	onCPUs(t, 4, func(k int) {
		keys := [][]byte{[]byte("one client")}
		var h ConnHold
		for time.Now().Before(deadline) {
			if d := c.Acquire(keys, &h); d.Status == ConnPassed {
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				passed.Add(1)
				for i := 0; i < 1000; i++ { // hold it a while
					spin.Add(1)
				}
				held.Add(-1)
				h.Release()
			} else {
				rejected.Add(1)
			}
		}
	})
	if most.Load() > limit || z.count("one client") != 0 {
		t.Fatalf("at most %d held at once (limit %d), %d left", most.Load(), limit, z.count("one client"))
	}
	t.Logf("%d passed, %d rejected, at most %d held", passed.Load(), rejected.Load(), most.Load())
}

// Many keys through a small zone from several CPUs at once: evictions race with
// lookups. Afterwards no entry is left pinned, the byte count matches the entries
// and each key's bucket is consistent with what nginx would allow.
func TestTableChurnAcrossCPUs(t *testing.T) {
	z := reqZone(t, "small", 1000, minZoneSize) // 191 states
	cz := connZone(t, "smallc", minZoneSize)
	c := &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: 2000}}, Status: 503}
	cc := &ConnConf{Limits: []ConnLimit{{Zone: cz, Conn: 2}}, Status: 503}
	n := 20000
	if raceEnabled {
		n = 3000
	}
	onCPUs(t, 4, func(k int) {
		var h ConnHold
		keys := make([][]byte, 1)
		for i := range n {
			key := fmt.Appendf(nil, "%d", (i*7+k*13)%600) // 600 keys for 191 (and 383) places
			if i%50 == 0 {
				key = fmt.Appendf(key[:0], "a long key that does not fit in place %d", i%300)
			}
			keys[0] = key
			d := c.Check(keys, Now())
			if d.Status == ReqRejected && d.Full {
				t.Errorf("zone full with nothing held")
			}
			cc.Acquire(keys, &h)
			h.Release()
		}
	})
	for _, tb := range []*table{z.t, cz.t} {
		var bytes int64
		for i := range tb.shards {
			s := &tb.shards[i]
			live := 0
			for j := range s.fresh {
				e := &s.ents[j]
				switch p := e.pins.Load(); {
				case p > 1:
					t.Fatalf("entry %d/%d left pinned (%d)", i, j, p)
				case p == 1 && e.life == alive:
					live++
					bytes += int64(tb.pol.cost(int(e.klen)))
					if got := s.lookup(e.hash.Load(), s.keyOf(j)); got != j {
						t.Fatalf("entry %d/%d not found by its key (%d)", i, j, got)
					} else {
						s.unpin(got)
					}
				}
			}
			if live != s.live {
				t.Fatalf("shard %d: %d live entries, counted %d", i, live, s.live)
			}
		}
		if bytes != tb.used.Load() || bytes > tb.budget {
			t.Fatalf("entries take %d bytes, counted %d, budget %d", bytes, tb.used.Load(), tb.budget)
		}
	}
	for _, e := range []int{z.Len(), cz.Len()} {
		if e == 0 {
			t.Fatal("empty")
		}
	}
}
