package conf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseFlag reads nginx's on|off (any case).
func ParseFlag(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf(`invalid value %q, it must be "on" or "off"`, s)
}

// ParseNumber reads a non-negative decimal integer, as ngx_atoi.
func ParseNumber(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("invalid number %q", s)
		}
		if n > (math.MaxInt32-int(c-'0'))/10 {
			return 0, fmt.Errorf("number %q is too large", s)
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// ParseSize reads a size with nginx's suffixes: k/K (KiB), m/M (MiB), g/G (GiB).
func ParseSize(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	mult := int64(1)
	digits := s
	switch s[len(s)-1] {
	case 'k', 'K':
		mult, digits = 1<<10, s[:len(s)-1]
	case 'm', 'M':
		mult, digits = 1<<20, s[:len(s)-1]
	case 'g', 'G':
		mult, digits = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseUint(digits, 10, 63)
	if err != nil || digits == "" || digits[0] == '+' || n > math.MaxInt64/uint64(mult) {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return int64(n) * mult, nil
}

// ParseBufferSize is ParseSize for a buffer: 1 byte to 1 GiB.
func ParseBufferSize(s string) (int, error) {
	n, err := ParseSize(s)
	if err == nil && (n < 1 || n > 1<<30) {
		err = fmt.Errorf("size %q out of range", s)
	}
	return int(n), err
}

var timeUnits = []struct {
	suffix string
	d      time.Duration
}{
	// Longest suffix first so "ms" is not read as "m" followed by "s".
	{"ms", time.Millisecond},
	{"y", 365 * 24 * time.Hour},
	{"M", 30 * 24 * time.Hour},
	{"w", 7 * 24 * time.Hour},
	{"d", 24 * time.Hour},
	{"h", time.Hour},
	{"m", time.Minute},
	{"s", time.Second},
}

// ParseTime reads an nginx time: one or more number+unit parts ("90s", "1m30s",
// "1h 30m", "500ms"), units y M w d h m s ms, each at most once and largest first; a
// bare number means seconds.
func ParseTime(s string) (time.Duration, error) {
	bad := fmt.Errorf("invalid time %q", s)
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, bad
	}
	var total time.Duration
	lastUnit := -1
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, bad
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil {
			return 0, bad
		}
		rest = rest[i:]
		unit := len(timeUnits) - 1 // seconds when no suffix follows
		if rest != "" && rest[0] != ' ' {
			unit = -1
			for u, tu := range timeUnits {
				if strings.HasPrefix(rest, tu.suffix) {
					unit = u
					rest = rest[len(tu.suffix):]
					break
				}
			}
			if unit < 0 {
				return 0, bad
			}
		}
		// Units must descend (nginx: "1h30m", never "30m1h"); ms is smallest.
		rank := unitRank(unit)
		if lastUnit >= 0 && rank <= lastUnit {
			return 0, bad
		}
		lastUnit = rank
		if n > int64(math.MaxInt64/timeUnits[unit].d) {
			return 0, fmt.Errorf("time %q is too large", s)
		}
		total += time.Duration(n) * timeUnits[unit].d
		if total < 0 {
			return 0, fmt.Errorf("time %q is too large", s)
		}
		rest = strings.TrimLeft(rest, " ")
	}
	return total, nil
}

// unitRank orders units from largest (0) to smallest, ms last.
func unitRank(u int) int {
	if u == 0 { // ms
		return len(timeUnits)
	}
	return u
}
