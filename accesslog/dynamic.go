package accesslog

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// CacheConf is open_log_file_cache: descriptors of the files of logs whose paths
// have variables stay open between lines (nil: off, each line opens and closes its
// file, as nginx without the cache).
type CacheConf struct {
	Max      int
	Inactive time.Duration // closed when unused this long
	MinUses  int           // uses within Inactive before a descriptor is kept
	Valid    time.Duration // how often a kept file's name is checked again
}

// dynCache is a writer's open_log_file_cache: nginx's is per worker, this one per
// domain writer.
type dynCache struct {
	files map[string]*dynFile
}

type dynFile struct {
	fd      int // -1 until MinUses is reached
	uses    int
	first   time.Time // of the uses counted towards MinUses
	last    time.Time
	checked time.Time
	dev     uint64
	ino     uint64
}

// record layout in a dynamic sink's chunk: 2-byte path length, the path, 4-byte
// line length, the line.
func appendDynRecord(dst []byte, path, line []byte) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(path)))
	dst = append(dst, path...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(line)))
	return append(dst, line...)
}

// writeDynamic writes each record of c to its file, through the cache of c's log.
func (w *writer) writeDynamic(c *chunk) {
	cc := c.s.cache
	now := time.Now()
	failed := 0
	for rec := c.buf; len(rec) >= 2; {
		pl := int(binary.LittleEndian.Uint16(rec))
		path := rec[2 : 2+pl]
		rec = rec[2+pl:]
		ll := int(binary.LittleEndian.Uint32(rec))
		line := rec[4 : 4+ll]
		rec = rec[4+ll:]
		if err := w.dyn.write(cc, string(path), line, now); err != nil {
			failed++
			w.logError(err)
		}
	}
	c.ls.stats.failed.Add(uint64(failed))
	c.lines -= failed
	if cc != nil {
		w.dyn.expire(cc, now)
	}
}

func (d *dynCache) write(cc *CacheConf, path string, line []byte, now time.Time) error {
	if cc == nil {
		fd, err := openLogFile(path)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return writevAll(fd, [][]byte{line})
	}
	if d.files == nil {
		d.files = map[string]*dynFile{}
	}
	f := d.files[path]
	if f == nil {
		if len(d.files) >= cc.Max {
			d.evictOldest()
		}
		f = &dynFile{fd: -1, first: now}
		d.files[path] = f
	}
	if now.Sub(f.first) > cc.Inactive && f.fd < 0 {
		f.uses, f.first = 0, now
	}
	f.uses++
	f.last = now
	if f.fd >= 0 && now.Sub(f.checked) >= cc.Valid {
		// The file may have been rotated or removed: reopen it by name if the name
		// no longer leads to the open file.
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil || st.Dev != f.dev || st.Ino != f.ino {
			unix.Close(f.fd)
			f.fd = -1
		}
		f.checked = now
	}
	if f.fd < 0 {
		fd, err := openLogFile(path)
		if err != nil {
			delete(d.files, path)
			return err
		}
		if f.uses < cc.MinUses {
			defer unix.Close(fd)
			return writevAll(fd, [][]byte{line})
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			f.dev, f.ino = st.Dev, st.Ino
		}
		f.fd, f.checked = fd, now
	}
	return writevAll(f.fd, [][]byte{line})
}

// expire closes descriptors unused for Inactive.
func (d *dynCache) expire(cc *CacheConf, now time.Time) {
	for path, f := range d.files {
		if now.Sub(f.last) > cc.Inactive {
			if f.fd >= 0 {
				unix.Close(f.fd)
			}
			delete(d.files, path)
		}
	}
}

func (d *dynCache) evictOldest() {
	var oldest string
	var t time.Time
	for path, f := range d.files {
		if oldest == "" || f.last.Before(t) {
			oldest, t = path, f.last
		}
	}
	if f := d.files[oldest]; f != nil && f.fd >= 0 {
		unix.Close(f.fd)
	}
	delete(d.files, oldest)
}

func (d *dynCache) closeAll() {
	for path, f := range d.files {
		if f.fd >= 0 {
			unix.Close(f.fd)
		}
		delete(d.files, path)
	}
}

// dropDynamicCaches closes the cached descriptors of every writer (reopen), on the
// writers' own goroutines.
func dropDynamicCaches() {
	writers.mu.Lock()
	defer writers.mu.Unlock()
	for _, w := range writers.by {
		w.dynDrop.Store(true)
	}
}
