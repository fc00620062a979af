package limit

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/numaproxy/numaproxy/errorlog"
)

var origin = time.Now()

// Now is the limits' clock, nginx's ngx_current_msec: milliseconds on the
// process's monotonic clock, the same origin for every loop. A loop may read it
// once per iteration and pass the copy, as nginx caches its time per event cycle.
func Now() int64 { return int64(time.Since(origin) / time.Millisecond) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// delayLevel is nginx's delay_log_level: one level less severe than the limit's
// level, info staying info.
func delayLevel(l slog.Level) slog.Level {
	switch l {
	case errorlog.LevelError:
		return errorlog.LevelWarn
	case errorlog.LevelWarn:
		return errorlog.LevelNotice
	}
	return errorlog.LevelInfo
}
