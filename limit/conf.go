package limit

import (
	"log/slog"
	"math"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
)

// The directives' parsers, with nginx 1.22's messages (nginx -t). Each takes a
// statement's arguments (the name excluded) and returns typed values; the checks
// that span statements (a zone declared twice, a limit naming no zone) are the
// Zones type's.

// ReqZoneConfig is "limit_req_zone key zone=name:size rate=rate;".
type ReqZoneConfig struct {
	Key  string // as written: the caller compiles and evaluates it
	Name string
	Size int64
	Rate uint64 // milli-requests per second: N r/s is N*1000, N r/m is N*1000/60 rounded down
	Pos  conf.Pos
}

// ParseReqZone reads a limit_req_zone directive.
func ParseReqZone(s *conf.Stmt) (ReqZoneConfig, error) {
	if err := refuseSync(s); err != nil {
		return ReqZoneConfig{}, err
	}
	if len(s.Args) != 3 {
		return ReqZoneConfig{}, s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	cfg := ReqZoneConfig{Key: s.Args[0].Value, Rate: 1000, Pos: s.Pos}
	for _, a := range s.Args[1:] {
		v := a.Value
		switch {
		case strings.HasPrefix(v, "zone="):
			name, size, err := parseZone(s, v)
			if err != nil {
				return ReqZoneConfig{}, err
			}
			cfg.Name, cfg.Size = name, size
		case strings.HasPrefix(v, "rate="):
			num, scale := v[len("rate="):], uint64(1)
			if strings.HasSuffix(v, "r/s") {
				num = num[:len(num)-3]
			} else if strings.HasSuffix(v, "r/m") {
				num, scale = num[:len(num)-3], 60
			}
			n, ok := atoi(num)
			if !ok || n == 0 || n > math.MaxInt64/1000 {
				return ReqZoneConfig{}, s.Errorf("invalid rate %q", v)
			}
			cfg.Rate = n * 1000 / scale
		default:
			return ReqZoneConfig{}, s.Errorf("invalid parameter %q", v)
		}
	}
	if cfg.Name == "" {
		return ReqZoneConfig{}, s.Errorf("%q must have \"zone\" parameter", s.Name)
	}
	return cfg, nil
}

// ConnZoneConfig is "limit_conn_zone key zone=name:size;".
type ConnZoneConfig struct {
	Key  string
	Name string
	Size int64
	Pos  conf.Pos
}

// ParseConnZone reads a limit_conn_zone directive.
func ParseConnZone(s *conf.Stmt) (ConnZoneConfig, error) {
	if err := refuseSync(s); err != nil {
		return ConnZoneConfig{}, err
	}
	if len(s.Args) != 2 {
		return ConnZoneConfig{}, s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	cfg := ConnZoneConfig{Key: s.Args[0].Value, Pos: s.Pos}
	v := s.Args[1].Value
	if !strings.HasPrefix(v, "zone=") {
		return ConnZoneConfig{}, s.Errorf("invalid parameter %q", v)
	}
	name, size, err := parseZone(s, v)
	if err != nil {
		return ConnZoneConfig{}, err
	}
	if name == "" {
		return ConnZoneConfig{}, s.Errorf("%q must have \"zone\" parameter", s.Name)
	}
	cfg.Name, cfg.Size = name, size
	return cfg, nil
}

// refuseSync names NGINX Plus's "sync" (zone state shared across a cluster) rather
// than nginx's "invalid number of arguments".
func refuseSync(s *conf.Stmt) error {
	for _, a := range s.Args[1:] {
		if a.Value == "sync" {
			return s.Errorf("the \"sync\" parameter of %q is NGINX Plus's (zone state shared across a cluster); numaproxy does not have it", s.Name)
		}
	}
	return nil
}

// parseZone reads "zone=name:size" as nginx (sizes with k or m, at least 32k).
func parseZone(s *conf.Stmt, v string) (string, int64, error) {
	name, size, ok := strings.Cut(v[len("zone="):], ":")
	if !ok {
		return "", 0, s.Errorf("invalid zone size %q", v)
	}
	scale := uint64(1)
	switch size[max(len(size)-1, 0):] {
	case "k", "K":
		scale, size = 1<<10, size[:len(size)-1]
	case "m", "M":
		scale, size = 1<<20, size[:len(size)-1]
	}
	n, ok := atoi(size)
	if !ok || n > math.MaxInt64/scale {
		return "", 0, s.Errorf("invalid zone size %q", v)
	}
	if n*scale < minZoneSize {
		return "", 0, s.Errorf("zone %q is too small", v)
	}
	return name, int64(n * scale), nil
}

// ReqLimitConfig is "limit_req zone=name [burst=number] [nodelay | delay=number];".
type ReqLimitConfig struct {
	Zone  string
	Burst uint64 // milli-requests
	Delay uint64 // milli-requests; math.MaxUint64 for nodelay
	Pos   conf.Pos
}

// AddReqLimit reads a limit_req directive and appends it to the limits of its
// level, refusing a second one for the same zone.
func AddReqLimit(list []ReqLimitConfig, s *conf.Stmt) ([]ReqLimitConfig, error) {
	l := ReqLimitConfig{Pos: s.Pos}
	for _, a := range s.Args {
		v := a.Value
		switch {
		case strings.HasPrefix(v, "zone="):
			l.Zone = v[len("zone="):]
		case strings.HasPrefix(v, "burst="):
			n, ok := atoi(v[len("burst="):])
			if !ok || n == 0 {
				return nil, s.Errorf("invalid burst value %q", v)
			}
			if n > MaxBurst {
				return nil, s.Errorf("burst value %q is over %d, numaproxy's largest (nginx takes more)", v, MaxBurst)
			}
			l.Burst = n * 1000
		case strings.HasPrefix(v, "delay="):
			n, ok := atoi(v[len("delay="):])
			if !ok || n == 0 {
				return nil, s.Errorf("invalid delay value %q", v)
			}
			l.Delay = min(n, math.MaxUint64/1000) * 1000
		case v == "nodelay":
			l.Delay = math.MaxUint64
		default:
			return nil, s.Errorf("invalid parameter %q", v)
		}
	}
	if l.Zone == "" && !hasArg(s, "zone=") {
		return nil, s.Errorf("%q must have \"zone\" parameter", s.Name)
	}
	for _, o := range list {
		if o.Zone == l.Zone {
			return nil, s.Errorf("%q directive is duplicate", s.Name)
		}
	}
	return append(list, l), nil
}

// ConnLimitConfig is "limit_conn zone number;".
type ConnLimitConfig struct {
	Zone string
	Conn uint32
	Pos  conf.Pos
}

// AddConnLimit reads a limit_conn directive and appends it to the limits of its
// level, refusing a second one for the same zone.
func AddConnLimit(list []ConnLimitConfig, s *conf.Stmt) ([]ConnLimitConfig, error) {
	if len(s.Args) != 2 {
		return nil, s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	l := ConnLimitConfig{Zone: s.Args[0].Value, Pos: s.Pos}
	for _, o := range list {
		if o.Zone == l.Zone {
			return nil, s.Errorf("%q directive is duplicate", s.Name)
		}
	}
	n, ok := atoi(s.Args[1].Value)
	if !ok || n == 0 {
		return nil, s.Errorf("invalid number of connections %q", s.Args[1].Value)
	}
	if n > 65535 {
		return nil, s.Errorf("connection limit must be less 65536")
	}
	l.Conn = uint32(n)
	return append(list, l), nil
}

// ParseStatus reads limit_req_status or limit_conn_status (400 to 599).
func ParseStatus(s *conf.Stmt) (int, error) {
	n, ok := atoi(s.Args[0].Value)
	if !ok {
		return 0, s.Errorf("%q directive invalid number", s.Name)
	}
	if n < 400 || n > 599 {
		return 0, s.Errorf("value must be between 400 and 599")
	}
	return int(n), nil
}

// ParseLogLevel reads limit_req_log_level or limit_conn_log_level.
func ParseLogLevel(s *conf.Stmt) (slog.Level, error) {
	switch s.Args[0].Value {
	case "info":
		return errorlog.LevelInfo, nil
	case "notice":
		return errorlog.LevelNotice, nil
	case "warn":
		return errorlog.LevelWarn, nil
	case "error":
		return errorlog.LevelError, nil
	}
	return 0, s.Errorf("invalid value %q", s.Args[0].Value)
}

// ParseDryRun reads limit_req_dry_run or limit_conn_dry_run.
func ParseDryRun(s *conf.Stmt) (bool, error) {
	on, err := conf.ParseFlag(s.Args[0].Value)
	if err != nil {
		return false, s.InvalidValue(s.Args[0], `it must be "on" or "off"`)
	}
	return on, nil
}

func hasArg(s *conf.Stmt, prefix string) bool {
	for _, a := range s.Args {
		if strings.HasPrefix(a.Value, prefix) {
			return true
		}
	}
	return false
}

// atoi is ngx_atoi: decimal digits only, no sign, not past int64.
func atoi(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' || n > (math.MaxInt64-uint64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
