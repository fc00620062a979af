package cache

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func testZone(t *testing.T, c Config) *Zone {
	t.Helper()
	c.Dir = t.TempDir()
	if c.Name == "" {
		c.Name = t.Name()
	}
	if c.KeysSize == 0 {
		c.KeysSize = 1 << 20
	}
	if c.Inactive == 0 {
		c.Inactive = time.Hour
	}
	z, err := Open(c, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(z.stop) })
	return z
}

// store writes a complete entry for text.
func store(t *testing.T, z *Zone, text, body string) Key {
	t.Helper()
	k := KeyOf([]byte(text))
	var w Writer
	if err := z.Create(&w, k, []byte(text), []byte("HTTP/1.1 200 OK\r\n\r\n"), time.Now().Unix()+60, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestEntryRoundTripAndLevels(t *testing.T) {
	z := testZone(t, Config{Levels: []int{1, 2}})
	k := store(t, z, "key", "hello")
	path := string(z.Path(nil, k))
	rel, _ := filepath.Rel(z.Dir, path)
	if len(rel) != 1+1+2+1+32 {
		t.Fatalf("levels 1:2: %s", rel)
	}
	st := z.Acquire(k, time.Now().UnixNano())
	if !st.Exists {
		t.Fatal("the zone does not know the stored entry")
	}
	e, _, err := z.Open(k, []byte("key"), nil, make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(e.Fd)
	if string(e.Head) != "HTTP/1.1 200 OK\r\n\r\n" || e.BodyLen != 5 {
		t.Fatalf("head %q, body %d", e.Head, e.BodyLen)
	}
	// Another key text with the same file (a collision, or a foreign file) is a miss.
	if _, _, err := z.Open(k, []byte("other"), nil, make([]byte, 4096)); err == nil {
		t.Fatal("a file of another key was opened")
	}
}

// A file cut short (a crash, a full disk) or with a foreign header is never served.
func TestDamagedEntryIsAMiss(t *testing.T) {
	z := testZone(t, Config{})
	k := store(t, z, "key", "hello world")
	path := string(z.Path(nil, k))
	fi, _ := os.Stat(path)
	if err := os.Truncate(path, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := z.Open(k, []byte("key"), nil, make([]byte, 4096)); err == nil {
		t.Fatal("a truncated file was opened")
	}
	os.WriteFile(path, []byte("garbage that is long enough to hold a header, and some more bytes"), 0o600)
	if _, _, err := z.Open(k, []byte("key"), nil, make([]byte, 4096)); err == nil {
		t.Fatal("a foreign file was opened")
	}
}

// An aborted write leaves nothing behind, and nothing the zone would serve.
func TestAbortLeavesNothing(t *testing.T) {
	z := testZone(t, Config{})
	k := KeyOf([]byte("k"))
	var w Writer
	if err := z.Create(&w, k, []byte("k"), []byte("HTTP/1.1 200 OK\r\n\r\n"), 1, 1); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("partial"))
	w.Abort()
	ents, _ := os.ReadDir(z.Dir)
	if len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
	if z.Acquire(k, 1).Exists {
		t.Fatal("an aborted entry exists")
	}
}

func TestLockAndAge(t *testing.T) {
	z := testZone(t, Config{})
	k := KeyOf([]byte("k"))
	if !z.Lock(k, 0, 100) || z.Lock(k, 50, 100) {
		t.Fatal("a second request took the lock")
	}
	if !z.Lock(k, 150, 100) {
		t.Fatal("the lock did not age")
	}
	z.Unlock(k)
	if !z.Lock(k, 160, 100) {
		t.Fatal("unlocked, the lock was not free")
	}
}

// The keys zone holds what its size allows: the least recently used key goes.
func TestKeysZoneEvictsLeastRecentlyUsed(t *testing.T) {
	z := testZone(t, Config{KeysSize: 8192}) // one key per shard
	var a, b Key
	a[0], b[0] = 1, 1+shards // the same shard
	z.Acquire(a, 1)
	z.Acquire(b, 2)
	if st := z.Acquire(a, 3); st.Uses != 1 {
		t.Fatalf("a was not evicted by b: uses %d", st.Uses)
	}
}

// The manager removes inactive entries and their files, and keeps max_size.
func TestManagerInactiveAndMaxSize(t *testing.T) {
	z := testZone(t, Config{Inactive: time.Hour, MaxSize: 8192})
	k1 := store(t, z, "one", "1")
	k2 := store(t, z, "two", "2")
	k3 := store(t, z, "three", "3")
	z.Acquire(k1, time.Now().UnixNano()) // k2 is now the least recently used
	z.manage()
	if _, err := os.Stat(string(z.Path(nil, k2))); err == nil {
		t.Fatal("max_size: the least recently used file stayed")
	}
	for _, k := range []Key{k1, k3} {
		if _, err := os.Stat(string(z.Path(nil, k))); err != nil {
			t.Fatalf("max_size: a recent file went: %v", err)
		}
	}
	z.Inactive = time.Nanosecond
	z.manage()
	ents, _ := os.ReadDir(z.Dir)
	if len(ents) != 0 || z.Size() != 0 {
		t.Fatalf("inactive entries stayed: %v, size %d", ents, z.Size())
	}
}

// BenchmarkAcquire is a hit's zone lookup, from one loop and from every CPU at
// once on keys spread over the shards (the shared zone's contention).
func BenchmarkAcquire(b *testing.B) {
	z := newZone(Config{Dir: b.TempDir(), Name: b.Name(), KeysSize: 64 << 20, Inactive: time.Hour})
	keys := make([]Key, 4096)
	for i := range keys {
		keys[i] = KeyOf([]byte{byte(i), byte(i >> 8)})
		z.Acquire(keys[i], 1)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			z.Acquire(keys[i&4095], int64(i))
			i++
		}
	})
}
