package limit

import (
	"fmt"
	"testing"
)

func connZone(t testing.TB, name string, size int64) *ConnZone {
	t.Helper()
	z, err := NewConnZone(ConnZoneConfig{Name: name, Key: "$k", Size: size}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// count is the counter of key in z (0 when absent).
func (z *ConnZone) count(key string) uint64 {
	for i := range z.t.shards {
		s := &z.t.shards[i]
		for j := range s.fresh {
			if s.ents[j].life == alive && string(s.keyOf(j)) == key {
				return s.ents[j].word.Load()
			}
		}
	}
	return 0
}

func TestConnLimits(t *testing.T) {
	a, b := connZone(t, "a", 1<<20), connZone(t, "b", 1<<20)
	c := &ConnConf{Limits: []ConnLimit{{Zone: a, Conn: 2}, {Zone: b, Conn: 1}}, Status: 503}
	keys := [][]byte{[]byte("client"), []byte("server")}
	var h1, h2, h3 ConnHold
	if d := c.Acquire(keys, &h1); d.Status != ConnPassed || h1.Held() != 2 {
		t.Fatal(d, h1.Held())
	}
	// b is at its limit: the request is rejected and gives back what it took in a.
	d := c.Acquire(keys, &h2)
	if d.Status != ConnRejected || d.Code != 503 || d.Zone != b || h2.Held() != 0 || a.count("client") != 1 {
		t.Fatal(d, h2.Held(), a.count("client"))
	}
	if got := string(d.AppendLog(nil)); got != `limiting connections by zone "b"` {
		t.Error(got)
	}
	// Without b's key only a counts.
	if d := c.Acquire([][]byte{[]byte("client"), nil}, &h2); d.Status != ConnPassed || a.count("client") != 2 {
		t.Fatal(d)
	}
	if d := c.Acquire([][]byte{[]byte("client"), nil}, &h3); d.Status != ConnRejected || d.Zone != a {
		t.Fatal(d)
	}
	h1.Release()
	h1.Release() // twice is once
	if a.count("client") != 1 || b.count("server") != 0 {
		t.Fatal(a.count("client"), b.count("server"))
	}
	if d := c.Acquire(keys, &h3); d.Status != ConnPassed {
		t.Fatal(d)
	}
	h2.Release()
	h3.Release()
	if a.count("client") != 0 {
		t.Fatal(a.count("client"))
	}
	if d := c.Acquire([][]byte{nil, nil}, &h1); d.Status != ConnNone || d.Status.String() != "" {
		t.Fatal(d)
	}
	if d := c.Acquire([][]byte{make([]byte, MaxConnKey+1), nil}, &h1); d.Status != ConnNone {
		t.Fatal("a key over 255 bytes is skipped", d)
	}
}

// In a dry run a rejected request goes on and holds nothing, as nginx's cleanup of
// the request's counters before it declines.
func TestConnDryRun(t *testing.T) {
	a := connZone(t, "a", 1<<20)
	c := &ConnConf{Limits: []ConnLimit{{Zone: a, Conn: 1}}, Status: 503, DryRun: true}
	var h1, h2 ConnHold
	k := [][]byte{[]byte("k")}
	c.Acquire(k, &h1)
	d := c.Acquire(k, &h2)
	if d.Status != ConnRejectedDryRun || d.Code != 0 || h2.Held() != 0 || a.count("k") != 1 || d.Status.String() != "REJECTED_DRY_RUN" {
		t.Fatal(d, a.count("k"))
	}
	if got := string(d.AppendLog(nil)); got != `limiting connections, dry run, by zone "a"` {
		t.Error(got)
	}
}

// A zone full of held counters rejects a new key (nginx: the slab allocation
// fails); a counter back at 0 makes room.
func TestConnZoneFull(t *testing.T) {
	z := connZone(t, "small", minZoneSize)
	c := &ConnConf{Limits: []ConnLimit{{Zone: z, Conn: 1}}, Status: 503}
	var holds []*ConnHold
	for i := 0; ; i++ {
		h := &ConnHold{}
		d := c.Acquire([][]byte{fmt.Appendf(nil, "key%d", i)}, h)
		if d.Status == ConnRejected {
			if !d.Full || string(d.AppendLog(nil)) != `ngx_slab_alloc() failed: no memory in limit_conn_zone "small"` {
				t.Fatal(d)
			}
			break
		}
		holds = append(holds, h)
	}
	// nginx 1.22 holds 383 in a 32k zone (6 pages of 64 64-byte nodes, less the
	// tree's head).
	if n := len(holds); n != 383 {
		t.Fatalf("%d keys held in 32k", n)
	}
	holds[7].Release()
	var h ConnHold
	for i := range 1000 { // some new key hashes to the shard that has room
		if d := c.Acquire([][]byte{fmt.Appendf(nil, "new%d", i)}, &h); d.Status == ConnPassed {
			return
		}
	}
	t.Fatal("no room after a release")
}
