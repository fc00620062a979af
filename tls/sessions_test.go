package tls

import (
	"testing"
	"time"
)

// TestSessionCacheBoundedFIFO: a cache holds what fits in its size, the oldest
// entries go first, and an expired entry is not returned.
func TestSessionCacheBoundedFIFO(t *testing.T) {
	c := newSessionCache(10 * (100 + entryOverhead))
	now := time.Now()
	id := func(i int) [32]byte { return [32]byte{byte(i), byte(i >> 8)} }
	for i := range 25 {
		c.put(id(i), make([]byte, 100), now.Add(time.Minute))
	}
	if n := c.len(); n != 10 {
		t.Fatalf("%d entries, want 10", n)
	}
	for i := range 25 {
		k := id(i)
		got := c.get(k[:], now) != nil
		if got != (i >= 15) {
			t.Errorf("entry %d present %v", i, got)
		}
	}
	k := id(24)
	if c.get(k[:], now.Add(2*time.Minute)) != nil {
		t.Error("an expired entry was returned")
	}
	if c.get(k[:], now) != nil {
		t.Error("an expired entry stayed")
	}
	if c.get([]byte("short"), now) != nil {
		t.Error("a malformed identifier matched")
	}
	// An entry larger than the cache is not kept, nor does it evict others.
	c.put(id(99), make([]byte, 20*100), now.Add(time.Minute))
	if k := id(23); c.get(k[:], now) == nil || c.len() != 9 {
		t.Errorf("an oversized entry evicted others: %d left", c.len())
	}
	// Churn keeps the order's backing store bounded.
	for i := range 10000 {
		c.put(id(1000+i), make([]byte, 100), now.Add(time.Minute))
	}
	if len(c.order)-c.head != 10 || len(c.order) > 4096 {
		t.Errorf("order holds %d (head %d) for 10 entries", len(c.order), c.head)
	}
}

// TestTicketRingRotates: numaproxy's own ticket keys change every
// ticketRotation, the new key first, the previous ones kept to decrypt, up to
// ticketKeysKept.
func TestTicketRingRotates(t *testing.T) {
	t0 := time.Now().Add(1000 * time.Hour) // after whatever other tests made
	r0 := currentTicketRing(t0)
	if r := currentTicketRing(t0.Add(ticketRotation - time.Minute)); r != r0 {
		t.Fatal("rotated early")
	}
	r1 := currentTicketRing(t0.Add(ticketRotation))
	if r1 == r0 || len(r1.keys) < 2 || r1.keys[1] != r0.keys[0] || r1.keys[0] == r0.keys[0] {
		t.Fatalf("first rotation: %d keys", len(r1.keys))
	}
	r2 := currentTicketRing(t0.Add(2 * ticketRotation))
	r3 := currentTicketRing(t0.Add(3 * ticketRotation))
	if len(r3.keys) != ticketKeysKept || r3.keys[1] != r2.keys[0] || r3.keys[2] != r1.keys[0] {
		t.Errorf("third rotation: %d keys", len(r3.keys))
	}
}
