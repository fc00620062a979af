// Package errorlog writes the error log in nginx's format through log/slog:
//
//	2026/11/29 21:44:06 [notice] 4242#4242: signal 1 (SIGHUP) received, reconfiguring
//
// Its levels are nginx's (debug ... emerg), its destinations the error_log directive's
// (files or stderr, several at once, each with its own lowest level), and Reopen
// re-creates the files for log rotation (SIGUSR1).
package errorlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// nginx's levels mapped onto slog's scale; slog's Debug, Info, Warn and Error are
// nginx's debug, info, warn and error.
const (
	LevelDebug  = slog.LevelDebug
	LevelInfo   = slog.LevelInfo
	LevelNotice = slog.Level(2)
	LevelWarn   = slog.LevelWarn
	LevelError  = slog.LevelError
	LevelCrit   = slog.Level(12)
	LevelAlert  = slog.Level(16)
	LevelEmerg  = slog.Level(20)
)

var levelNames = []struct {
	level slog.Level
	name  string
}{
	{LevelDebug, "debug"}, {LevelInfo, "info"}, {LevelNotice, "notice"}, {LevelWarn, "warn"},
	{LevelError, "error"}, {LevelCrit, "crit"}, {LevelAlert, "alert"}, {LevelEmerg, "emerg"},
}

// ParseLevel reads an nginx level name.
func ParseLevel(name string) (slog.Level, error) {
	for _, l := range levelNames {
		if l.name == name {
			return l.level, nil
		}
	}
	return 0, fmt.Errorf("unknown log level %q", name)
}

// LevelName is the nginx name of a level: the highest named level not above it.
func LevelName(level slog.Level) string {
	name := levelNames[0].name
	for _, l := range levelNames {
		if level >= l.level {
			name = l.name
		}
	}
	return name
}

// Destination is one place the log goes.
type Destination struct {
	Path  string // a file path, or "stderr"
	Level slog.Level
}

// Log is a set of destinations. It is safe for concurrent use.
type Log struct {
	mu    sync.Mutex
	sinks []sink
	pid   string
}

type sink struct {
	dest Destination
	w    io.Writer
	file *os.File // nil for stderr
}

// Open opens every destination (creating folders as nginx's installer would not, so
// that a fresh checkout can log to logs/ without a setup step).
func Open(dests []Destination) (*Log, error) {
	l := &Log{pid: strconv.Itoa(os.Getpid())}
	for _, d := range dests {
		s, err := openSink(d)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.sinks = append(l.sinks, s)
	}
	return l, nil
}

// Stderr is a log to standard error at level, for before the configuration is read.
func Stderr(level slog.Level) *Log {
	l, _ := Open([]Destination{{Path: "stderr", Level: level}})
	return l
}

func openSink(d Destination) (sink, error) {
	if d.Path == "stderr" {
		return sink{dest: d, w: os.Stderr}, nil
	}
	if err := os.MkdirAll(filepath.Dir(d.Path), 0o755); err != nil {
		return sink{}, fmt.Errorf("open() %q failed: %w", d.Path, err)
	}
	f, err := os.OpenFile(d.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return sink{}, fmt.Errorf("open() %q failed: %w", d.Path, err)
	}
	return sink{dest: d, w: f, file: f}, nil
}

// Reopen re-opens every file destination, for log rotation. A destination that cannot
// be reopened keeps its old file, and the error is returned.
func (l *Log) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var firstErr error
	for i, s := range l.sinks {
		if s.file == nil {
			continue
		}
		ns, err := openSink(s.dest)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		s.file.Close()
		l.sinks[i] = ns
	}
	return firstErr
}

// Reconfigure replaces the destinations (after a reload changed error_log). Loggers
// made from l keep working and write to the new ones; if one cannot be opened,
// nothing changes and the error is returned.
func (l *Log) Reconfigure(dests []Destination) error {
	var sinks []sink
	for _, d := range dests {
		s, err := openSink(d)
		if err != nil {
			for _, o := range sinks {
				if o.file != nil {
					o.file.Close()
				}
			}
			return err
		}
		sinks = append(sinks, s)
	}
	l.mu.Lock()
	old := l.sinks
	l.sinks = sinks
	l.mu.Unlock()
	for _, s := range old {
		if s.file != nil {
			s.file.Close()
		}
	}
	return nil
}

// Close closes the files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sinks {
		if s.file != nil {
			s.file.Close()
		}
	}
	l.sinks = nil
	return nil
}

// MinLevel is the lowest level any destination takes.
func (l *Log) MinLevel() slog.Level {
	l.mu.Lock()
	defer l.mu.Unlock()
	min := LevelEmerg + 1
	for _, s := range l.sinks {
		if s.dest.Level < min {
			min = s.dest.Level
		}
	}
	return min
}

// Logger returns a slog.Logger writing to this log.
func (l *Log) Logger() *slog.Logger { return slog.New(&handler{log: l}) }

func (l *Log) write(level slog.Level, line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sinks {
		if level >= s.dest.Level {
			s.w.Write(line)
		}
	}
}

// handler formats records as nginx does; attributes follow the message as key=value.
type handler struct {
	log    *Log
	attrs  []slog.Attr
	groups string
}

func (h *handler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.log.MinLevel()
}

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	buf := make([]byte, 0, 128+len(r.Message))
	buf = t.AppendFormat(buf, "2006/01/02 15:04:05")
	buf = append(buf, " ["...)
	buf = append(buf, LevelName(r.Level)...)
	buf = append(buf, "] "...)
	buf = append(buf, h.log.pid...)
	buf = append(buf, '#')
	buf = strconv.AppendInt(buf, int64(syscall.Gettid()), 10)
	buf = append(buf, ": "...)
	buf = append(buf, r.Message...)
	for _, a := range h.attrs {
		buf = appendAttr(buf, h.groups, a)
	}
	r.Attrs(func(a slog.Attr) bool {
		buf = appendAttr(buf, h.groups, a)
		return true
	})
	buf = append(buf, '\n')
	h.log.write(r.Level, buf)
	return nil
}

func appendAttr(buf []byte, prefix string, a slog.Attr) []byte {
	if a.Equal(slog.Attr{}) {
		return buf
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			buf = appendAttr(buf, prefix+a.Key+".", g)
		}
		return buf
	}
	buf = append(buf, ", "...)
	buf = append(buf, prefix...)
	buf = append(buf, a.Key...)
	buf = append(buf, '=')
	v := a.Value.Resolve().String()
	if needsQuote(v) {
		return strconv.AppendQuote(buf, v)
	}
	return append(buf, v...)
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == '"' || c == '=' || c == ',' || c >= 0x7f {
			return true
		}
	}
	return false
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	nh := *h
	nh.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &nh
}

func (h *handler) WithGroup(name string) slog.Handler {
	nh := *h
	nh.groups = h.groups + name + "."
	return &nh
}

// Errno renders an OS error the way nginx's messages do: "(2: No such file or
// directory)"; other errors in parentheses as they are.
func Errno(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg := errno.Error()
		if msg != "" && msg[0] >= 'a' && msg[0] <= 'z' {
			msg = string(msg[0]-'a'+'A') + msg[1:]
		}
		return fmt.Sprintf("(%d: %s)", int(errno), msg)
	}
	return "(" + err.Error() + ")"
}
