package limit

import (
	"fmt"
	"testing"
)

// A zone holds as many keys as nginx 1.22's slab allocator fits in a shared zone
// of the same size (computed from ngx_slab.c; checked against nginx itself in
// TestNginxZoneCapacity).
func TestZoneCapacity(t *testing.T) {
	for _, tc := range []struct {
		size      int64
		keyLen    int
		req, conn int
	}{
		{32 << 10, 4, 191, 383},
		{1 << 20, 4, 8095, 16191},
		{1 << 20, 16, 8095, 16191},
		{1 << 20, 40, 8095, 8095},
		{1 << 20, 100, 4047, 4047},
		{10 << 20, 4, 81375, 162751},
	} {
		rz := reqZone(t, "r", 1000, tc.size)
		cz := connZone(t, "c", tc.size)
		rc := &ReqConf{Limits: []ReqLimit{{Zone: rz}}}
		for i := range max(tc.req, tc.conn) + 500 {
			key := fmt.Appendf(nil, "%0*d", tc.keyLen, i)
			rc.Check([][]byte{key}, 1<<33)
			var h ConnHold
			(&ConnConf{Limits: []ConnLimit{{Zone: cz, Conn: 1}}}).Acquire([][]byte{key}, &h)
			h.Release()
		}
		if rz.Len() != tc.req || cz.Len() != tc.conn {
			t.Errorf("%d bytes, %d-byte keys: limit_req %d keys (nginx %d), limit_conn %d (nginx %d)", tc.size, tc.keyLen, rz.Len(), tc.req, cz.Len(), tc.conn)
		}
	}
}

// Under a flood of new keys, as nginx's LRU keeps a key used at least once per
// zone's worth of new keys, the CLOCK keeps it (it is evicted only after the hand
// passed it twice unused), and the keys it evicts are ones not used since the
// hand last passed.
func TestActiveKeySurvivesFlood(t *testing.T) {
	for _, size := range []int64{32 << 10, 1 << 20} {
		z := reqZone(t, "z", 16, size) // 1r/m: a key kept is rejected, a key lost passes
		capacity := zoneBudget(size, reqHeadSize) / 128
		c := &ReqConf{Limits: []ReqLimit{{Zone: z}}, Status: 503}
		active := [][]byte{[]byte("active client")}
		now := int64(1 << 33)
		c.Check(active, now)
		for i := range 20 * capacity {
			c.Check([][]byte{fmt.Appendf(nil, "flood %d", i)}, now)
			if i%(capacity*9/10) == 0 && c.Check(active, now).Status != ReqRejected {
				t.Fatalf("zone of %d states: the active key was evicted after %d new keys", capacity, i)
			}
		}
		if z.Len() != capacity {
			t.Fatalf("%d states, want %d", z.Len(), capacity)
		}
	}
}
