package limit

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/errorlog"
)

func reqZone(t testing.TB, name string, rate uint64, size int64) *ReqZone {
	t.Helper()
	z, err := NewReqZone(ReqZoneConfig{Name: name, Key: "$k", Size: size, Rate: rate}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// The table's decisions equal nginx's code transliterated (refZone), request by
// request, over random sequences with one to three limits per location, empty keys,
// bursts, delay= and nodelay, dry runs, times going back a little (a loop's stale
// clock) and ties in the same millisecond. Simulated time stays under a minute so
// that no node expires (expiry is the CLOCK's, checked on its own).
func TestReqMatchesNginxModel(t *testing.T) {
	rates := []uint64{1000, 10000, 500, 7000, 16, 200000}
	delays := []uint64{0, 1000, 3000, math.MaxUint64}
	var seen [6]int
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		nz := 1 + rng.IntN(3)
		zones := make([]*ReqZone, nz)
		refs := make([]*refZone, nz)
		for i := range zones {
			rate := rates[rng.IntN(len(rates))]
			name := string(rune('a' + i))
			zones[i] = reqZone(t, name, rate, 1<<20)
			refs[i] = newRefZone(name, rate, 1<<20)
		}
		// Two locations: each a list of limits over distinct zones.
		var confs []*ReqConf
		var refConfs [][]refLimit
		for range 2 {
			c := &ReqConf{Status: 503 + rng.IntN(2)*26, DryRun: rng.IntN(4) == 0}
			var rl []refLimit
			for _, zi := range rng.Perm(nz)[:1+rng.IntN(nz)] {
				burst := uint64(rng.IntN(6)) * 1000
				delay := delays[rng.IntN(len(delays))]
				c.Limits = append(c.Limits, ReqLimit{Zone: zones[zi], Burst: burst, Delay: delay})
				rl = append(rl, refLimit{z: refs[zi], burst: burst, delay: delay})
			}
			confs, refConfs = append(confs, c), append(refConfs, rl)
		}
		now := int64(1) << 40
		for req := range 300 {
			switch r := rng.IntN(10); {
			case r < 5: // same millisecond
			case r < 9:
				now += int64(rng.IntN(400))
			default:
				now -= int64(rng.IntN(5)) // another loop's older clock
			}
			ci := rng.IntN(len(confs))
			c, rl := confs[ci], refConfs[ci]
			keys := make([][]byte, len(c.Limits))
			skeys := make([]string, len(c.Limits))
			for i := range keys {
				if k := rng.IntN(5); k > 0 {
					skeys[i] = string(rune('0' + k))
					keys[i] = []byte(skeys[i])
				}
			}
			got := c.Check(keys, now)
			seen[got.Status]++
			st, code, delay, zone, excess := refCheck(rl, skeys, now, c.DryRun, c.Status)
			gotZone := ""
			if got.Zone != nil && got.Status != ReqPassed {
				gotZone = got.Zone.Name
			}
			if got.Status != st || got.Code != code || got.Delay != delay || gotZone != zone || (st != ReqPassed && got.Excess != excess) {
				t.Fatalf("seed %d request %d at %d keys %q: got %v %d %v zone %q excess %d, nginx %v %d %v zone %q excess %d",
					seed, req, now, skeys, got.Status, got.Code, got.Delay, gotZone, got.Excess, st, code, delay, zone, excess)
			}
		}
		for _, z := range zones {
			for i := range z.t.shards {
				s := &z.t.shards[i]
				for j := range s.fresh {
					if p := s.ents[j].pins.Load(); p > 1 {
						t.Fatalf("seed %d: zone %s entry %d left pinned (%d)", seed, z.Name, j, p)
					}
				}
			}
		}
	}
	for st, n := range seen {
		if n < 100 {
			t.Errorf("only %d decisions %q", n, ReqStatus(st))
		}
	}
	t.Logf("decisions none/passed/delayed/rejected/delayed dry/rejected dry: %v", seen)
}

// A burst at one instant, as nginx: with burst=B the first B+1 requests pass (a
// new key starts at excess 0), the first delayed ones wait 1/rate each more, and a
// request that finds the bucket over the burst is rejected without being counted.
func TestReqBurstAndDelays(t *testing.T) {
	z := reqZone(t, "z", 10000, 1<<20) // 10r/s
	key := [][]byte{[]byte("k")}
	now := int64(5_000_000)
	for _, tc := range []struct {
		name  string
		delay uint64
		want  []time.Duration // -1: rejected
	}{
		{"burst=3", 0, []time.Duration{0, 100, 200, 300, -1, -1}},
		{"burst=3 nodelay", math.MaxUint64, []time.Duration{0, 0, 0, 0, -1, -1}},
		{"burst=3 delay=2", 2000, []time.Duration{0, 0, 0, 100, -1, -1}},
	} {
		c := &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: 3000, Delay: tc.delay}}, Status: 503}
		now += 3_600_000
		for i, want := range tc.want {
			d := c.Check(key, now)
			switch {
			case want < 0 && (d.Status != ReqRejected || d.Code != 503):
				t.Errorf("%s: request %d: %+v, want rejected", tc.name, i, d)
			case want == 0 && (d.Status != ReqPassed || d.Delay != 0):
				t.Errorf("%s: request %d: %+v, want passed", tc.name, i, d)
			case want > 0 && (d.Status != ReqDelayed || d.Delay != want*time.Millisecond):
				t.Errorf("%s: request %d: %+v, want delayed %dms", tc.name, i, d, want)
			}
		}
		// 250 ms later 2.5 requests drained: excess 3000-2500+1000 = 1500.
		d := c.Check(key, now+250)
		if tc.delay == 0 && (d.Status != ReqDelayed || d.Delay != 150*time.Millisecond || d.Excess != 1500) {
			t.Errorf("%s: after 250ms: %+v", tc.name, d)
		}
	}
}

// rate=1r/m is 16 milli-requests a second in nginx (1000/60 rounded down), and the
// drain of each interval is rounded down: a request every 50 ms drains nothing.
func TestReqRounding(t *testing.T) {
	z := reqZone(t, "z", 16, 1<<20)
	c := &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: 5000, Delay: math.MaxUint64}}, Status: 503}
	key := [][]byte{[]byte("k")}
	now := int64(1 << 33)
	for i := range 6 {
		if d := c.Check(key, now+int64(i)*50); d.Status != ReqPassed {
			t.Fatalf("request %d: %v", i, d.Status)
		}
	}
	if d := c.Check(key, now+300); d.Status != ReqRejected || d.Excess != 6000 {
		t.Fatalf("7th: %+v (nginx: excess 6.000, nothing drained in 50 ms steps)", d)
	}
	// 62.5 s drain one request: at 63 s excess 5000-1008+1000.
	if d := c.Check(key, now+250+63000); d.Status != ReqPassed {
		t.Fatalf("after 63s: %+v", d)
	}
}

func TestReqStatusAndLog(t *testing.T) {
	z := reqZone(t, "perip", 1000, 1<<20)
	c := &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: 1000}}, Status: 429, DryRun: true}
	key := [][]byte{[]byte("k")}
	if d := c.Check(key, 1<<33); d.Status != ReqPassed || d.Status.String() != "PASSED" {
		t.Fatal(d)
	}
	d := c.Check(key, 1<<33)
	if d.Status != ReqDelayedDryRun || d.Delay != 0 || d.Code != 0 {
		t.Fatal(d)
	}
	if got := string(d.AppendLog(nil)); got != `delaying request, dry run, excess: 1.000, by zone "perip"` {
		t.Error(got)
	}
	d = c.Check(key, 1<<33+1)
	if d.Status != ReqRejectedDryRun || d.Code != 0 || d.Status.String() != "REJECTED_DRY_RUN" {
		t.Fatal(d)
	}
	if got := string(d.AppendLog(nil)); got != `limiting requests, dry run, excess: 1.999 by zone "perip"` {
		t.Error(got)
	}
	c.DryRun = false
	d = c.Check(key, 1<<33+2)
	if d.Status != ReqRejected || d.Code != 429 {
		t.Fatal(d)
	}
	if got := string(d.AppendLog(nil)); got != `limiting requests, excess: 1.998 by zone "perip"` {
		t.Error(got)
	}
	if d := c.Check([][]byte{nil}, 1<<33); d.Status != ReqNone || d.Status.String() != "" {
		t.Fatal(d)
	}
	if d := c.Check([][]byte{make([]byte, MaxReqKey+1)}, 1<<33); d.Status != ReqNone {
		t.Fatal("a key over 65535 bytes is skipped", d)
	}
	if c.LogLevel = errorlog.LevelWarn; c.DelayLogLevel() != errorlog.LevelNotice {
		t.Error(c.DelayLogLevel())
	}
}

// Keys of every length: inline, long, and long ones reusing a freed entry.
func TestReqLongKeys(t *testing.T) {
	z := reqZone(t, "z", 1000, minZoneSize)
	c := &ReqConf{Limits: []ReqLimit{{Zone: z}}, Status: 503}
	now := int64(1 << 33)
	for i := range 2000 {
		key := make([]byte, 1+i%200)
		for j := range key {
			key[j] = byte(i + j)
		}
		if d := c.Check([][]byte{key}, now); d.Status != ReqPassed {
			t.Fatalf("new key %d: %+v", i, d)
		}
		if d := c.Check([][]byte{key}, now); d.Status != ReqRejected {
			t.Fatalf("key %d again: %+v", i, d)
		}
		now += 10
	}
}

func TestReqZoneReuse(t *testing.T) {
	cfg := ReqZoneConfig{Name: "z", Key: "$binary_remote_addr", Size: 1 << 20, Rate: 1000}
	z1, _ := NewReqZone(cfg, nil)
	c := &ReqConf{Limits: []ReqLimit{{Zone: z1}}, Status: 503}
	c.Check([][]byte{[]byte("a")}, 1<<33)
	cfg.Rate = 2000 // a reload may change the rate and keep the states
	z2, err := NewReqZone(cfg, z1)
	if err != nil || z2.t != z1.t || z2.rate != 2000 || z2.Len() != 1 {
		t.Fatal(err)
	}
	cfg.Size = 2 << 20
	if z3, _ := NewReqZone(cfg, z2); z3.t == z2.t || z3.Len() != 0 {
		t.Fatal("a new size is a new zone")
	}
	cfg.Key = "$remote_addr"
	if _, err := NewReqZone(cfg, z2); err == nil || err.Error() != `limit_req "z" uses the "$remote_addr" key while previously it used the "$binary_remote_addr" key` {
		t.Fatal(err)
	}
}
