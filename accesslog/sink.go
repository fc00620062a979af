package accesslog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// sinkKind is where a log's lines go.
type sinkKind uint8

const (
	sinkFile    sinkKind = iota // a file named in the configuration
	sinkDynamic                 // files named by variables, per line (records: path, line)
	sinkSyslog                  // a syslog server (records: one message each)
)

// sink is one destination lines are handed to the writers for. A loop keeps one
// buffer per sink; sinks are shared by every snapshot that names them (by path,
// or by the syslog parameters), so a reload keeps their files and buffers.
type sink struct {
	id   int // index in the loops' buffer tables
	kind sinkKind
	key  string // the registry's key: the path, or "syslog:..."

	// sinkFile
	path   string
	gzip   int // 0: none, else the level (for the check of conflicting logs)
	buffer int // buffer=, 0 for none (idem)
	mu     sync.RWMutex
	fd     int          // -1 when closed
	gen    atomic.Int64 // the last configuration generation that used it

	// sinkSyslog
	peer *syslogPeer
	// sinkDynamic: open_log_file_cache of the logs (the key includes it)
	cache *CacheConf
}

// registry holds every sink of the process.
var registry struct {
	mu    sync.Mutex
	sinks []*sink // by id
	byKey map[string]*sink
	gen   int64 // configuration generation (one per Init)
}

// fileMode is nginx's NGX_FILE_DEFAULT_ACCESS for the files it creates.
const fileMode = 0o644

// openLogFile opens path to append, creating it (and its directory, as the error
// log does) with nginx's permissions.
func openLogFile(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, fileMode)
	if err == unix.ENOENT {
		if mkErr := os.MkdirAll(filepath.Dir(path), 0o755); mkErr == nil {
			fd, err = unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, fileMode)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("open() %q failed: %w", path, err)
	}
	return fd, nil
}

// fileSink finds or opens the sink of the file at path (absolute). A file named by
// several access_log directives must have the same buffer and gzip everywhere, as
// nginx requires; gen is the configuration generation naming it.
func fileSink(path string, buffer, gzip int, gen int64) (*sink, error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if s := registry.byKey[path]; s != nil {
		if s.gen.Load() == gen && (s.buffer != buffer || s.gzip != gzip) {
			return nil, fmt.Errorf("access_log %q already defined with conflicting parameters", path)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fd < 0 {
			fd, err := openLogFile(path)
			if err != nil {
				return nil, err
			}
			s.fd = fd
		}
		s.buffer, s.gzip = buffer, gzip
		s.gen.Store(gen)
		return s, nil
	}
	fd, err := openLogFile(path)
	if err != nil {
		return nil, err
	}
	s := &sink{kind: sinkFile, key: path, path: path, buffer: buffer, gzip: gzip, fd: fd}
	s.gen.Store(gen)
	addSinkLocked(s)
	return s, nil
}

// otherSink finds or makes the sink called key (syslog, variable paths).
func otherSink(key string, make func() *sink, gen int64) *sink {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	s := registry.byKey[key]
	if s == nil {
		s = make()
		s.key, s.fd = key, -1
		addSinkLocked(s)
	}
	s.gen.Store(gen)
	return s
}

func addSinkLocked(s *sink) {
	if registry.byKey == nil {
		registry.byKey = map[string]*sink{}
	}
	s.id = len(registry.sinks)
	registry.sinks = append(registry.sinks, s)
	registry.byKey[s.key] = s
}

// nextGeneration starts a configuration's generation; files no configuration of
// the last two generations names are closed then (a request of the snapshot
// before may still log to them meanwhile).
func nextGeneration() int64 {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.gen++
	for _, s := range registry.sinks {
		if s.kind == sinkFile && s.gen.Load() < registry.gen-2 {
			s.mu.Lock()
			if s.fd >= 0 {
				unix.Close(s.fd)
				s.fd = -1
			}
			s.mu.Unlock()
		}
	}
	return registry.gen
}

// reopen opens the file again (log rotation), keeping the old descriptor if that
// fails.
func (s *sink) reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return nil
	}
	fd, err := openLogFile(s.path)
	if err != nil {
		return err
	}
	unix.Close(s.fd)
	s.fd = fd
	return nil
}

// write writes bufs to the file in one system call where it can.
func (s *sink) write(bufs [][]byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fd < 0 {
		return fmt.Errorf("write() to %q: the file is closed", s.path)
	}
	for len(bufs) > 0 {
		n := min(len(bufs), 1024) // IOV_MAX
		if err := writevAll(s.fd, bufs[:n]); err != nil {
			return fmt.Errorf("write() to %q failed: %w", s.path, err)
		}
		bufs = bufs[n:]
	}
	return nil
}

// writevAll writes every byte of bufs, resuming after a short write.
func writevAll(fd int, bufs [][]byte) error {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	for total > 0 {
		n, err := unix.Writev(fd, bufs)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return unix.EIO
		}
		total -= n
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
			n = 0
		}
	}
	return nil
}

// Files are the paths of the access log files open now (not those named by
// variables, which are opened as lines come).
func Files() []string {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	var paths []string
	for _, s := range registry.sinks {
		s.mu.RLock()
		if s.kind == sinkFile && s.fd >= 0 {
			paths = append(paths, s.path)
		}
		s.mu.RUnlock()
	}
	return paths
}

// Reopen reopens every log file, for rotation (SIGUSR1): lines the loops buffered
// are handed on first, so that they land in the file they were written for. An
// error names the first file that could not be reopened; the others are reopened
// all the same.
func Reopen() error {
	flushLoops()
	registry.mu.Lock()
	sinks := append([]*sink(nil), registry.sinks...)
	registry.mu.Unlock()
	syncWriters()
	var first error
	for _, s := range sinks {
		if s.kind != sinkFile {
			continue
		}
		if err := s.reopen(); err != nil && first == nil {
			first = err
		}
	}
	dropDynamicCaches()
	return first
}
