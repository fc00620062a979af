package static

import (
	"time"

	"golang.org/x/sys/unix"
)

// Files looks files up for one event loop: through the location's open_file_cache
// or straight from the file system. One per loop and configuration snapshot; it has
// no locks and must not be shared.
type Files struct {
	caches map[*CacheSpec]*Cache
	name   []byte // the NUL-terminated name of the lookup in progress
}

// NewFiles makes a loop's Files.
func NewFiles() *Files { return &Files{caches: map[*CacheSpec]*Cache{}} }

// Open looks path up under the location's settings into f; f.OK says whether it was
// found, f.Errno why not (0: an internal failure). spec is
// the location's open_file_cache (nil: none). f must be Closed once the response
// no longer needs it.
func (fs *Files) Open(f *File, path []byte, spec *CacheSpec, o *OpenOptions) {
	*f = File{Fd: -1}
	fs.name = append(append(fs.name[:0], path...), 0)
	if spec == nil {
		l := lookup{name: fs.name, opts: *o, fd: -1}
		if o.TestOnly {
			var st unix.Stat_t
			if l.stat(&st) {
				l.fill(&st)
			}
			f.FileInfo = l.info
			return
		}
		l.run()
		f.FileInfo, f.Fd, f.owned = l.info, l.fd, l.fd >= 0
		return
	}
	c := fs.caches[spec]
	if c == nil {
		c = newCache(spec)
		fs.caches[spec] = c
	}
	c.open(f, fs.name, o)
}

// Close closes every cache's descriptors that no request holds; the held ones close
// when their requests Close them.
func (fs *Files) Close() {
	for _, c := range fs.caches {
		c.Close()
	}
}

// Cache is one loop's open_file_cache for one CacheSpec: nginx's
// ngx_open_file_cache_t, an LRU of descriptors and stat results (and, with
// open_file_cache_errors, of lookup errors) keyed by file name.
type Cache struct {
	spec    *CacheSpec
	entries map[string]*cacheEntry
	lru     cacheEntry // sentinel: lru.next is the most recently used, lru.prev the least
	now     int64
}

type cacheEntry struct {
	name     string
	fd       int
	info     FileInfo // info.Errno != 0: a cached error
	symlinks SymlinkMode
	from     int
	created  int64 // last (re)validation
	accessed int64
	uses     int  // lookups since the entry was made
	count    int  // Files holding it
	close    bool // out of the cache: close the descriptor when the last holder lets go

	prev, next *cacheEntry
}

// newCache makes an empty cache.
func newCache(spec *CacheSpec) *Cache {
	c := &Cache{spec: spec, entries: map[string]*cacheEntry{}}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	return c
}

// Len is the number of entries.
func (c *Cache) Len() int { return len(c.entries) }

// open is nginx's ngx_open_cached_file; name is NUL-terminated. A hit within
// open_file_cache_valid makes no system call and allocates nothing.
func (c *Cache) open(f *File, name []byte, o *OpenOptions) {
	c.now = o.Now
	key := name[:len(name)-1]
	l := lookup{name: name, opts: *o, fd: -1}
	file := c.entries[string(key)]

	if file == nil {
		if !l.run() && (l.info.Errno == 0 || !o.Errors) {
			c.fail(f, nil, &l)
			return
		}
		file = c.create(key)
		c.update(file, &l)
		c.found(f, file, o)
		return
	}

	file.uses++
	c.unlink(file)

	if file.fd < 0 && file.info.Errno == 0 && !file.info.IsDir {
		// Not used often enough to keep its descriptor: open it again.
		if !l.run() && (l.info.Errno == 0 || !o.Errors) {
			c.fail(f, file, &l)
			return
		}
		c.update(file, &l)
		c.found(f, file, o)
		return
	}

	if c.now-file.created < o.Valid && o.Symlinks == file.symlinks && o.From == file.from {
		if file.info.Errno == 0 && !file.info.IsDir {
			file.count++
		}
		c.found(f, file, o)
		return
	}

	// Expired: check the name again, keeping the descriptor if it is the same file.
	l.opts.TestDir = file.info.IsDir
	l.fd, l.ino = file.fd, file.info.Ino
	if !l.run() && (l.info.Errno == 0 || !o.Errors) {
		c.fail(f, file, &l)
		return
	}
	switch {
	case l.info.IsDir:
		if file.info.IsDir || file.info.Errno != 0 {
			c.update(file, &l)
			c.found(f, file, o)
			return
		}
	case l.info.OK:
		if file.info.IsDir || file.info.Errno != 0 {
			c.update(file, &l)
			c.found(f, file, o)
			return
		}
		if l.info.Ino == file.info.Ino {
			l.info.DirectIO = file.info.DirectIO
			c.update(file, &l)
			c.found(f, file, o)
			return
		}
	default:
		if file.info.Errno != 0 || file.info.IsDir {
			c.update(file, &l)
			c.found(f, file, o)
			return
		}
	}
	// The file changed (or went away): drop the old descriptor now, or, while a
	// request still sends from it, when that request lets go.
	if file.count == 0 {
		if file.fd >= 0 {
			unix.Close(file.fd)
		}
		c.update(file, &l)
		c.found(f, file, o)
		return
	}
	delete(c.entries, file.name)
	file.close = true
	file = c.create(key)
	c.update(file, &l)
	c.found(f, file, o)
}

func (c *Cache) create(key []byte) *cacheEntry {
	if len(c.entries) >= c.spec.Max {
		c.expire(0)
	}
	file := &cacheEntry{name: string(key), fd: -1, uses: 1}
	c.entries[file.name] = file
	return file
}

// update records a lookup in the entry.
func (c *Cache) update(file *cacheEntry, l *lookup) {
	file.fd = l.fd
	file.symlinks, file.from = l.opts.Symlinks, l.opts.From
	if l.info.OK {
		file.info = l.info
		file.close = false
		if !l.info.IsDir {
			file.count++
		}
	} else {
		file.info = FileInfo{Errno: l.info.Errno, Op: l.info.Op}
	}
	file.created = c.now
}

// found hands the entry to f and makes it the most recently used.
func (c *Cache) found(f *File, file *cacheEntry, o *OpenOptions) {
	file.accessed = c.now
	c.pushFront(file)
	if file.info.Errno != 0 {
		f.FileInfo = FileInfo{Errno: file.info.Errno, Op: file.info.Op}
		return
	}
	f.FileInfo, f.Fd = file.info, file.fd
	if !file.info.IsDir {
		f.entry, f.cache, f.minUses = file, c, o.MinUses
	}
}

// fail drops the entry of a lookup whose error is not cached.
func (c *Cache) fail(f *File, file *cacheEntry, l *lookup) {
	if file != nil {
		delete(c.entries, file.name)
		if file.count == 0 {
			if file.fd >= 0 {
				unix.Close(file.fd)
			}
		} else {
			file.close = true
		}
	}
	if l.fd >= 0 {
		unix.Close(l.fd)
	}
	f.FileInfo = FileInfo{Errno: l.info.Errno, Op: l.info.Op}
}

// release is a File's Close: nginx's ngx_open_file_cleanup.
func (c *Cache) release(file *cacheEntry, minUses int) {
	file.count--
	c.closeEntry(file, minUses)
	c.expire(1) // drop one or two inactive entries
}

// closeEntry is nginx's ngx_close_cached_file: a descriptor used fewer than minUses
// times is closed (the entry stays, counting uses); one out of the cache is closed
// when no request holds it.
func (c *Cache) closeEntry(file *cacheEntry, minUses int) {
	if !file.close {
		file.accessed = c.now
		c.unlink(file)
		c.pushFront(file)
		if file.uses >= minUses || file.count > 0 {
			return
		}
	}
	if file.count > 0 {
		return
	}
	if file.fd >= 0 {
		unix.Close(file.fd)
		file.fd = -1
	}
}

// expire is nginx's ngx_expire_old_cached_files: n == 0 drops the least recently
// used entry by force, and then, as n == 1 does, one or two entries not used for
// inactive.
func (c *Cache) expire(n int) {
	inactive := int64(c.spec.Inactive / time.Second)
	for ; n < 3; n++ {
		file := c.lru.prev
		if file == &c.lru {
			return
		}
		if n != 0 && c.now-file.accessed <= inactive {
			return
		}
		c.unlink(file)
		delete(c.entries, file.name)
		if file.info.Errno == 0 && !file.info.IsDir {
			file.close = true
			c.closeEntry(file, 0)
		}
	}
}

// Close drops every entry, closing the descriptors no request holds.
func (c *Cache) Close() {
	for _, file := range c.entries {
		c.unlink(file)
		file.close = true
		c.closeEntry(file, 0)
	}
	clear(c.entries)
}

func (c *Cache) unlink(e *cacheEntry) {
	if e.prev != nil {
		e.prev.next, e.next.prev = e.next, e.prev
		e.prev, e.next = nil, nil
	}
}

func (c *Cache) pushFront(e *cacheEntry) {
	c.unlink(e)
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}
