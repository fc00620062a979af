package authbasic

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RecheckInterval is how long a reading of a user file is used before a request
// makes the file be checked again.
const RecheckInterval = time.Second

// epoch anchors monotonic readings shared by every loop.
var epoch = time.Now()

func monotime() int64 { return int64(time.Since(epoch)) }

// UserFile is one auth_basic_user_file of a configuration snapshot. nginx opens and
// reads the file on every request, so an edit counts at once; doing that on an
// event loop would block it on the file system. Instead the file is read once
// (Load, at reload), and the first request more than RecheckInterval after the
// last check has a goroutine stat it, and read it again if its identity, size or
// times changed; that request (and any that come while the check runs) waits for
// the answer, the others use the reading they find. So an edit counts for requests
// that start a second after it, and no loop ever touches the file.
type UserFile struct {
	Path string

	cur     atomic.Pointer[fileState]
	checked atomic.Int64 // monotime of the last check; 0: never read
	log     atomic.Pointer[slog.Logger]

	mu      sync.Mutex
	loading bool
	waiters []waiter
}

// waiter is a request (or Load) waiting for a check: fn runs on loop, or right
// away when loop is nil.
type waiter struct {
	loop Runner
	fn   func()
}

// fileState is one reading: a table, or the error nginx's open or read would meet.
type fileState struct {
	table *Table
	op    string        // the call that failed: "open" or "pread"
	errno syscall.Errno // its error (0: table is good)
	id    fileID
}

type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

// Load reads the file now (a missing or unreadable file is a state too, answered
// per request as nginx answers it) and logs what is wrong with its lines. log is
// kept for the reads that follow. It blocks: call it off the event loops.
func (f *UserFile) Load(log *slog.Logger) {
	if log != nil {
		f.log.Store(log)
	}
	f.mu.Lock()
	if f.loading {
		// A check is running: its answer will do.
		done := make(chan struct{})
		f.waiters = append(f.waiters, waiter{fn: func() { close(done) }})
		f.mu.Unlock()
		<-done
		return
	}
	f.loading = true
	f.mu.Unlock()
	f.refresh()
}

// Table returns the current reading's table, nil when the file could not be read.
func (f *UserFile) Table() *Table {
	if st := f.cur.Load(); st != nil {
		return st.table
	}
	return nil
}

// state returns the reading to use now, or nil after registering w for the check
// it started (or joined).
func (f *UserFile) state(w waiter) *fileState {
	if last := f.checked.Load(); last != 0 && monotime()-last < int64(RecheckInterval) {
		return f.cur.Load()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if last := f.checked.Load(); last != 0 && monotime()-last < int64(RecheckInterval) {
		return f.cur.Load() // a check ended while we took the lock
	}
	f.waiters = append(f.waiters, w)
	if !f.loading {
		f.loading = true
		go f.refresh()
	}
	return nil
}

// refresh checks the file, reads it if it changed, then wakes the waiters.
func (f *UserFile) refresh() {
	old := f.cur.Load()
	st := f.read(old)
	if st != old {
		f.cur.Store(st)
		f.report(st)
	}
	f.checked.Store(max(monotime(), 1))
	f.mu.Lock()
	ws := f.waiters
	f.waiters = nil
	f.loading = false
	f.mu.Unlock()
	for _, w := range ws {
		if w.loop == nil {
			w.fn()
		} else {
			_ = w.loop.Run(w.fn) // an error: the loop is gone, and the request with it
		}
	}
}

// read returns old when the file has not changed since, else a new reading.
func (f *UserFile) read(old *fileState) *fileState {
	var st unix.Stat_t
	if err := unix.Stat(f.Path, &st); err != nil {
		errno := errnoOf(err)
		if old != nil && old.op == "open" && old.errno == errno && old.id == (fileID{}) {
			return old
		}
		return &fileState{op: "open", errno: errno}
	}
	id := fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	if old != nil && old.id == id {
		return old
	}
	file, err := os.Open(f.Path)
	if err != nil {
		return &fileState{op: "open", errno: errnoOf(err), id: id}
	}
	defer file.Close()
	data, err := io.ReadAll(file)
	if err != nil {
		return &fileState{op: "pread", errno: errnoOf(err), id: id}
	}
	// The identity of what was read: a write between stat and read shows up in
	// the next check.
	if err := unix.Fstat(int(file.Fd()), &st); err == nil {
		id = fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	}
	t, warns := ParseTable(data)
	s := &fileState{table: t, id: id}
	if log := f.logger(); log != nil {
		for _, w := range warns {
			log.Warn("auth_basic_user_file \""+f.Path+"\" "+w.String(), "file", f.Path)
		}
	}
	return s
}

func (f *UserFile) report(st *fileState) {
	log := f.logger()
	if log == nil {
		return
	}
	if st.errno != 0 {
		log.Warn("auth_basic_user_file \""+f.Path+"\": "+st.op+"() failed: "+st.errno.Error(), "file", f.Path)
		return
	}
	log.Info("auth_basic_user_file \""+f.Path+"\" read", "users", st.table.Len())
}

func (f *UserFile) logger() *slog.Logger { return f.log.Load() }

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}
