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
}

// managerSleep is how often the manager looks for inactive entries and over
// max_size.
const managerSleep = time.Second

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
			z.Inactive, z.MaxSize = c.Inactive, c.MaxSize // read by the manager only
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
	t := time.NewTicker(managerSleep)
	defer t.Stop()
	for {
		select {
		case <-z.stop:
			return
		case <-t.C:
			z.manage()
		}
	}
}

// load indexes the files in PATH (nginx's cache loader): each complete entry whose
// name and key agree; temporary files a crash left behind are removed.
func (z *Zone) load(log *slog.Logger) {
	now := time.Now().UnixNano()
	var hb [headerSize]byte
	filepath.WalkDir(z.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
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
		if n, err := unix.Pread(fd, hb[:], 0); err != nil || n < headerSize || h.decode(hb[:]) != nil ||
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

// manage removes the entries not used for inactive and, beyond max_size, the least
// recently used ones; files are unlinked after the shard's lock is released.
func (z *Zone) manage() {
	now := time.Now().UnixNano()
	var victims []Key
	for i := range z.shard {
		s := &z.shard[i]
		s.mu.Lock()
		for e := s.lru.Back(); e != nil; {
			prev := e.Prev()
			n := e.Value.(*node)
			if now-n.lastAccess < int64(z.Inactive) {
				break // the rest were used later
			}
			if !n.updating {
				z.drop(s, e)
			}
			e = prev
		}
		s.mu.Unlock()
	}
	for z.MaxSize > 0 && z.size.Load() > z.MaxSize {
		// The oldest tail among the shards goes first.
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
			break
		}
		oldest.mu.Lock()
		for e := oldest.lru.Back(); e != nil; e = e.Prev() {
			if n := e.Value.(*node); n.exists && !n.updating {
				z.drop(oldest, e)
				break
			}
		}
		oldest.mu.Unlock()
	}
	z.delMu.Lock()
	victims, z.deletes = z.deletes, nil
	z.delMu.Unlock()
	var path []byte
	for _, k := range victims {
		path = z.Path(path[:0], k)
		unix.Unlink(string(path))
	}
}
