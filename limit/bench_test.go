package limit

import (
	"testing"
)

// The API's cost per request on one loop, steady path (keys known): no
// allocation. Designs compared across CPUs: BenchmarkDesigns.
func BenchmarkReqCheck(b *testing.B) {
	z := reqZone(b, "z", 1<<40, 10<<20)
	z2 := reqZone(b, "z2", 1<<40, 10<<20)
	key := []byte{192, 0, 2, 1}
	for _, tc := range []struct {
		name string
		c    *ReqConf
		tick int // requests per millisecond: 1 passes all, more fills the burst
	}{
		{"one/pass", &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: 5000}}}, 1},
		{"one/reject", &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: 5000}}}, 1 << 30},
		{"two/pass", &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: 5000}, {Zone: z2, Burst: 5000}}}, 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			keys := [][]byte{key, key}[:len(tc.c.Limits)]
			now := int64(1 << 40)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%tc.tick == 0 {
					now++
				}
				tc.c.Check(keys, now)
			}
		})
	}
}

func BenchmarkConnAcquireRelease(b *testing.B) {
	z := connZone(b, "c", 10<<20)
	c := &ConnConf{Limits: []ConnLimit{{Zone: z, Conn: 10}}}
	keys := [][]byte{{192, 0, 2, 1}}
	var h ConnHold
	b.ReportAllocs()
	for b.Loop() {
		c.Acquire(keys, &h)
		h.Release()
	}
}

func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	z, z2 := reqZone(t, "z", 1000, 1<<20), reqZone(t, "z2", 1000, 1<<20)
	c := &ReqConf{Limits: []ReqLimit{{Zone: z, Burst: 5000}, {Zone: z2, Burst: 5000}}, Status: 503}
	keys := [][]byte{{192, 0, 2, 1}, {192, 0, 2, 2}}
	now := int64(1 << 33)
	c.Check(keys, now)
	var buf []byte
	if n := testing.AllocsPerRun(1000, func() {
		now++
		d := c.Check(keys, now)
		buf = d.AppendLog(buf[:0])
	}); n != 0 {
		t.Errorf("limit_req: %v allocations a request", n)
	}
	cz := connZone(t, "c", 1<<20)
	cc := &ConnConf{Limits: []ConnLimit{{Zone: cz, Conn: 1}}, Status: 503}
	var h, h2 ConnHold
	cc.Acquire(keys[:1], &h)
	h.Release()
	if n := testing.AllocsPerRun(1000, func() {
		cc.Acquire(keys[:1], &h)
		d := cc.Acquire(keys[:1], &h2) // rejected
		buf = d.AppendLog(buf[:0])
		h.Release()
	}); n != 0 {
		t.Errorf("limit_conn: %v allocations a request", n)
	}
}

// BenchmarkReqChurn: more keys than the zone holds, so every request inserts a
// key and evicts one (a flood of new clients): the insert path, still without
// allocation for keys of up to 24 bytes.
func BenchmarkReqChurn(b *testing.B) {
	z := reqZone(b, "z", 1000, 1<<20) // 8095 states
	c := &ReqConf{Limits: []ReqLimit{{Zone: z}}}
	keys := benchKeys() // 65536
	k := make([][]byte, 1)
	now := int64(1 << 40)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k[0] = keys[i%manyKeys]
		c.Check(k, now)
	}
}
