package cache

import (
	"encoding/hex"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Config is one proxy_cache_path.
type Config struct {
	Dir      string
	Levels   []int // 1 or 2 hex digits per level, from the end of the name
	Name     string
	KeysSize int64 // keys_zone's size
	Inactive time.Duration
	MaxSize  int64 // 0: no limit
	MinFree  int64 // bytes the file system of Dir keeps free; 0: no limit

	// The manager's and loader's iterations, as nginx's: at most Files files
	// removed (loaded) and Threshold spent in one, then a pause of Sleep. Zero:
	// nginx's defaults (100 files, 200 ms, 50 ms).
	ManagerFiles     int
	ManagerSleep     time.Duration
	ManagerThreshold time.Duration
	LoaderFiles      int
	LoaderSleep      time.Duration
	LoaderThreshold  time.Duration
}

// withDefaults fills the iterations' parameters a Config leaves zero.
func (c Config) withDefaults() Config {
	if c.ManagerFiles <= 0 {
		c.ManagerFiles = 100
	}
	if c.ManagerSleep <= 0 {
		c.ManagerSleep = 50 * time.Millisecond
	}
	if c.ManagerThreshold <= 0 {
		c.ManagerThreshold = 200 * time.Millisecond
	}
	if c.LoaderFiles <= 0 {
		c.LoaderFiles = 100
	}
	if c.LoaderSleep <= 0 {
		c.LoaderSleep = 50 * time.Millisecond
	}
	if c.LoaderThreshold <= 0 {
		c.LoaderThreshold = 200 * time.Millisecond
	}
	return c
}

// managerIdle is how long the manager waits when its last iteration finished its
// work (nginx waits until the next entry becomes inactive, 10 s at most; a shorter
// wait only looks more often).
const managerIdle = time.Second

// zones are the zones of the process: a reload's zone of the same name, path and
// size takes over its index, as nginx's shared zones survive a reload.
var (
	zonesMu sync.Mutex
	zones   = map[string]*Zone{}
)

// Open returns the zone c names, started (loader and manager) the first time.
func Open(c Config, log *slog.Logger) (*Zone, error) {
	zonesMu.Lock()
	defer zonesMu.Unlock()
	if z := zones[c.Name]; z != nil {
		if z.Dir == c.Dir && z.KeysSize == c.KeysSize && equalLevels(z.Levels, c.Levels) {
			z.setParams(c) // the manager's limits of the new configuration
			return z, nil
		}
		close(z.stop)
		delete(zones, c.Name)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	z := newZone(c)
	zones[c.Name] = z
	go z.run(log)
	return z, nil
}

func equalLevels(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// run is the zone's cache loader, then its cache manager: both off the loops.
func (z *Zone) run(log *slog.Logger) {
	z.load(log)
	z.loaded.Store(true)
	for z.sleep(z.manage()) {
	}
}

// sleep pauses the loader or the manager for d; false: the zone was closed.
func (z *Zone) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-z.stop:
		return false
	case <-t.C:
		return true
	}
}

// setParams publishes the limits the manager reads (Open, and a reload's).
func (z *Zone) setParams(c Config) {
	c = c.withDefaults()
	z.params.Store(&c)
}

// load indexes the files in PATH (nginx's cache loader): each complete entry whose
// name and key agree; temporary files a crash left behind are removed.
// At most loader_files files are looked at and loader_threshold spent in one
// iteration, then it pauses for loader_sleep.
func (z *Zone) load(log *slog.Logger) {
	p := z.params.Load()
	now := time.Now().UnixNano()
	var hb [headerSize]byte
	files, start := 0, time.Now()
	filepath.WalkDir(z.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if files++; files >= p.LoaderFiles || time.Since(start) >= p.LoaderThreshold {
			if !z.sleep(p.LoaderSleep) {
				return filepath.SkipAll
			}
			files, start = 0, time.Now()
		}
		select {
		case <-z.stop:
			return filepath.SkipAll
		default:
		}
		name := d.Name()
		if strings.HasPrefix(name, tempPrefix) {
			// Only files of processes that are gone: a binary upgrade's old
			// process may still be writing its own.
			if !pidAlive(name[len(tempPrefix):]) {
				os.Remove(path)
			}
			return nil
		}
		var k Key
		if len(name) != 2*len(k) || path != string(z.Path(nil, keyFromHex(name, &k))) {
			return nil // not an entry of this layout
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		defer unix.Close(fd)
		var h fileHeader
		var st unix.Stat_t
		if n, err := unix.Pread(fd, hb[:], 0); err != nil || n < header1 || h.decode(hb[:n]) != nil ||
			unix.Fstat(fd, &st) != nil || st.Size != h.BodyStart+h.BodyLen {
			log.Warn("cache file is invalid, removed", "path", path)
			os.Remove(path)
			return nil
		}
		s := z.shardOf(k)
		s.mu.Lock()
		if s.m[k] == nil {
			n := z.insert(s, k)
			n.uses, n.exists, n.validSec, n.size, n.lastAccess = 1, true, h.ValidSec, blocks(st.Size), now
			n.gen = z.gens.Add(1)
			n.updatingSec, n.errorSec = h.UpdatingSec, h.ErrorSec
			z.size.Add(n.size)
		}
		s.mu.Unlock()
		return nil
	})
}

func keyFromHex(name string, k *Key) Key {
	hex.Decode(k[:], []byte(name))
	return *k
}

// pidAlive reads "PID.N" and reports the process running.
func pidAlive(s string) bool {
	i := strings.IndexByte(s, '.')
	if i <= 0 {
		return false
	}
	pid := 0
	for _, c := range s[:i] {
		if c < '0' || c > '9' {
			return false
		}
		pid = pid*10 + int(c-'0')
	}
	return pid == os.Getpid() || unix.Kill(pid, 0) == nil
}

// manage is one iteration of the cache manager: it removes the entries not used
// for inactive, then the least recently used ones while the zone is beyond max_size
// or the file system has less than min_free available, each file unlinked after
// the shard's lock is released. An iteration removes at most manager_files files
// and lasts at most about manager_threshold; then the next comes after
// manager_sleep (nginx's), or after managerIdle when this one was done.
func (z *Zone) manage() time.Duration {
	p := z.params.Load()
	now := time.Now().UnixNano()
	start := time.Now()
	files := 0
	// more counts a removal against the iteration's limits.
	more := func() bool {
		files++
		return files < p.ManagerFiles && time.Since(start) < p.ManagerThreshold
	}
	var path []byte
	for i := range z.shard {
		s := &z.shard[i]
		spent := false
		s.mu.Lock()
		for e := s.lru.Back(); e != nil && !spent; {
			prev := e.Prev()
			n := e.Value.(*node)
			if now-n.lastAccess < int64(p.Inactive) {
				break // the rest were used later
			}
			if !n.updating {
				z.drop(s, e)
				spent = n.exists && !more()
			}
			e = prev
		}
		s.mu.Unlock()
		path = z.unlinkDropped(path)
		if spent {
			return p.ManagerSleep
		}
	}
	for z.overLimit(p) {
		if !z.dropOldest() {
			break
		}
		path = z.unlinkDropped(path)
		if !more() {
			return p.ManagerSleep
		}
	}
	z.unlinkDropped(path)
	return managerIdle
}

// overLimit reports the zone beyond max_size or its file system below min_free.
func (z *Zone) overLimit(p *Config) bool {
	if p.MaxSize > 0 && z.size.Load() > p.MaxSize {
		return true
	}
	return p.MinFree > 0 && available(z.Dir) < p.MinFree
}

// available is what the file system of dir has free for an unprivileged user
// (statfs's f_bavail, as nginx's ngx_fs_available); an error counts as enough.
func available(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 1<<63 - 1
	}
	return int64(st.Bavail) * st.Bsize
}

// dropOldest removes the least recently used entry with a file that nobody
// fetches, the oldest tail among the shards; false when there is none.
func (z *Zone) dropOldest() bool {
	var oldest *shard
	var at int64
	for i := range z.shard {
		s := &z.shard[i]
		s.mu.Lock()
		for e := s.lru.Back(); e != nil; e = e.Prev() {
			if n := e.Value.(*node); n.exists && !n.updating {
				if oldest == nil || n.lastAccess < at {
					oldest, at = s, n.lastAccess
				}
				break
			}
		}
		s.mu.Unlock()
	}
	if oldest == nil {
		return false
	}
	oldest.mu.Lock()
	defer oldest.mu.Unlock()
	for e := oldest.lru.Back(); e != nil; e = e.Prev() {
		if n := e.Value.(*node); n.exists && !n.updating {
			z.drop(oldest, e)
			return true
		}
	}
	return true // it was used meanwhile: look again
}

// unlinkDropped unlinks the files of the entries dropped so far (by the manager,
// or evicted from a full keys zone by a loop); path is scratch.
func (z *Zone) unlinkDropped(path []byte) []byte {
	z.delMu.Lock()
	victims := z.deletes
	z.deletes = nil
	z.delMu.Unlock()
	for _, k := range victims {
		path = z.Path(path[:0], k)
		unix.Unlink(string(path))
	}
	return path
}
