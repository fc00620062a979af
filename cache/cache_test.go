package cache

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func testZone(t *testing.T, c Config) *Zone {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
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

// managedZone is a zone without its loader and manager goroutine: the test runs
// the manager's iterations itself.
func managedZone(t *testing.T, c Config) *Zone {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	c.Name, c.KeysSize = t.Name(), 1<<20
	if c.Inactive == 0 {
		c.Inactive = time.Hour
	}
	return newZone(c)
}

// store writes a complete entry for text.
func store(t *testing.T, z *Zone, text, body string) Key {
	t.Helper()
	k := KeyOf([]byte(text))
	var w Writer
	if err := z.Create(&w, k, []byte(text), []byte("HTTP/1.1 200 OK\r\n\r\n"), Validity{ValidSec: time.Now().Unix() + 60}, time.Now().Unix()); err != nil {
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
	if err := z.Create(&w, k, []byte("k"), []byte("HTTP/1.1 200 OK\r\n\r\n"), Validity{ValidSec: 1}, 1); err != nil {
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
	z := managedZone(t, Config{Inactive: time.Hour, MaxSize: 8192})
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
	z.setParams(Config{Inactive: time.Nanosecond, MaxSize: 8192})
	z.manage()
	ents, _ := os.ReadDir(z.Dir)
	if len(ents) != 0 || z.Size() != 0 {
		t.Fatalf("inactive entries stayed: %v, size %d", ents, z.Size())
	}
}

// manager_files: an iteration removes at most that many files, then asks for a
// pause of manager_sleep; the one that finds nothing more to do waits longer.
func TestManagerFilesPerIteration(t *testing.T) {
	z := managedZone(t, Config{})
	for i := range 5 {
		store(t, z, strconv.Itoa(i), "x")
	}
	z.setParams(Config{Inactive: time.Nanosecond, ManagerFiles: 2, ManagerSleep: 7 * time.Millisecond})
	for _, left := range []int{3, 1} {
		if d := z.manage(); d != 7*time.Millisecond {
			t.Fatalf("an iteration that reached manager_files waits %v, not manager_sleep", d)
		}
		if n := countFiles(t, z.Dir); n != left {
			t.Fatalf("%d files left, want %d (2 removed per iteration)", n, left)
		}
	}
	if d := z.manage(); d != managerIdle || countFiles(t, z.Dir) != 0 {
		t.Fatalf("the last iteration: wait %v, %d files left", d, countFiles(t, z.Dir))
	}
	// max_size's removals count as well.
	for i := range 5 {
		store(t, z, strconv.Itoa(i), "x")
	}
	z.setParams(Config{Inactive: time.Hour, MaxSize: 4096, ManagerFiles: 3, ManagerSleep: 7 * time.Millisecond})
	if d := z.manage(); d != 7*time.Millisecond || countFiles(t, z.Dir) != 2 {
		t.Fatalf("max_size with manager_files=3: wait %v, %d files left", d, countFiles(t, z.Dir))
	}
	if d := z.manage(); d != managerIdle || countFiles(t, z.Dir) != 1 {
		t.Fatalf("max_size: wait %v, %d files left", d, countFiles(t, z.Dir))
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// loader_files and loader_sleep: the loader pauses after each loader_files files,
// so that a cache directory filled before the start loads that much more slowly.
func TestLoaderFilesAndSleep(t *testing.T) {
	dir := t.TempDir()
	filler := testZone(t, Config{Dir: dir, Name: t.Name() + "-filler", Levels: []int{1}})
	for i := range 6 {
		store(t, filler, strconv.Itoa(i), "x")
	}
	started := time.Now()
	z := testZone(t, Config{Dir: dir, Levels: []int{1}, LoaderFiles: 2, LoaderSleep: 300 * time.Millisecond})
	// After each second file a pause: 3 of 300 ms for 6 files.
	for !z.Loaded() {
		if time.Since(started) > 30*time.Second {
			t.Fatal("the loader did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if took := time.Since(started); took < 900*time.Millisecond {
		t.Fatalf("6 files loaded in %v with loader_files=2 loader_sleep=300ms", took)
	}
	if z.Size() != 6*4096 {
		t.Fatalf("loaded %d bytes, want 6 files of a block", z.Size())
	}
}

// min_free: the manager removes the least recently used entries while the file
// system of the cache has less than min_free available (a tmpfs of 1 MiB mounted
// for the test).
func TestManagerMinFree(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): min_free untested", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	z := managedZone(t, Config{Dir: dir, MinFree: 600 << 10})
	body := string(make([]byte, 100<<10))
	var keys []Key
	for i := range 8 {
		keys = append(keys, store(t, z, strconv.Itoa(i), body))
	}
	if available(dir) >= 600<<10 {
		t.Fatalf("the tmpfs has %d bytes free with 800 KiB stored", available(dir))
	}
	z.manage()
	if a := available(dir); a < 600<<10 {
		t.Fatalf("after the manager the tmpfs has %d bytes free, below min_free", a)
	}
	// 1 MiB - 8 * 100 KiB is about 224 KiB free: the 4 least recently used go.
	for i, k := range keys {
		_, err := os.Stat(string(z.Path(nil, k)))
		if gone := err != nil; gone != (i < 4) {
			t.Errorf("entry %d (of 8, oldest first): removed %v", i, gone)
		}
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

// A file of the previous format (version 1: no stale times, a 48-byte header), as
// a binary before this one wrote it, is still read, and found by the loader.
func TestVersion1FileRead(t *testing.T) {
	z := testZone(t, Config{})
	k := store(t, z, "key", "hello")
	path := string(z.Path(nil, k))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h fileHeader
	if err := h.decode(b); err != nil || h.size != headerSize {
		t.Fatalf("version 2 header: %v", err)
	}
	v1 := append([]byte(nil), b[:header1]...)
	binary.LittleEndian.PutUint32(v1[4:8], 1)
	binary.LittleEndian.PutUint64(v1[32:40], uint64(h.BodyStart-(headerSize-header1)))
	v1 = append(v1, b[headerSize:]...)
	if err := os.WriteFile(path, v1, 0o600); err != nil {
		t.Fatal(err)
	}
	e, _, err := z.Open(k, []byte("key"), nil, make([]byte, 4096))
	if err != nil {
		t.Fatalf("a version 1 file: %v", err)
	}
	defer unix.Close(e.Fd)
	if string(e.Head) != "HTTP/1.1 200 OK\r\n\r\n" || e.BodyLen != 5 || string(v1[e.BodyStart:]) != "hello" {
		t.Fatalf("version 1 file: head %q, body %d at %d", e.Head, e.BodyLen, e.BodyStart)
	}
	z2 := testZone(t, Config{Dir: z.Dir, Name: t.Name() + "-2"})
	for !z2.Loaded() {
		time.Sleep(10 * time.Millisecond)
	}
	if st := z2.Acquire(k, time.Now().UnixNano()); !st.Exists {
		t.Fatal("the loader did not index a version 1 file")
	}
}

// TestEntrySize: an entry larger than the buffer carries the size Open's fstat
// found (the connection sends its body without an fstat of its own); one read
// whole with its head carries none (its body goes out from the buffer).
func TestEntrySize(t *testing.T) {
	z := testZone(t, Config{})
	large := string(bytes.Repeat([]byte("0123456789abcdef"), 1024)) // 16 KiB
	kl, ks := store(t, z, "large", large), store(t, z, "small", "small body")
	e, _, err := z.Open(kl, []byte("large"), nil, make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(e.Fd)
	fi, err := os.Stat(string(z.Path(nil, kl)))
	if err != nil {
		t.Fatal(err)
	}
	if e.Size != fi.Size() || e.Size != e.BodyStart+e.BodyLen {
		t.Fatalf("large entry: Size %d, file %d, BodyStart+BodyLen %d", e.Size, fi.Size(), e.BodyStart+e.BodyLen)
	}
	e, _, err = z.Open(ks, []byte("small"), nil, make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(e.Fd)
	if e.Size != 0 || e.Read < e.BodyStart+e.BodyLen {
		t.Fatalf("small entry: Size %d, Read %d of %d", e.Size, e.Read, e.BodyStart+e.BodyLen)
	}
}
