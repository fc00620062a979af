package conf

import (
	"net/netip"
	"time"

	"github.com/numaproxy/numaproxy/pcre"
)

// Config is one complete, validated configuration snapshot. It is built by Load and
// never changed afterwards: a reload builds a new one.
type Config struct {
	File     string       // the main file, absolute
	Prefix   string       // the -p prefix, absolute; relative paths resolve against it
	Sources  []SourceFile // every file read, in the order read (for -T)
	Warnings []*Error     // problems that do not stop the config from loading

	Main   Main
	Events Events
	HTTP   *HTTP // nil without an http block

	registry *Registry
	mains    map[*Module]any
}

// SourceFile is one file the configuration was read from, as read.
type SourceFile struct {
	Name    string
	Content []byte
}

// Main holds the main context's core directives.
type Main struct {
	WorkerProcesses       int // 0 means auto: one per CPU the process may use
	WorkerRlimitNofile    int // 0: leave the limit as it is
	WorkerShutdownTimeout time.Duration
	PidFile               string // absolute; "" when pid is off
	ErrorLogs             []ErrorLog
	WorkerPriority        *int   // nil: leave the nice value as it is
	WorkerRlimitCore      int64  // -1: leave the limit as it is
	WorkingDirectory      string // absolute; "": stay where started
	Env                   []EnvVar
	User                  *User // nil: the process keeps the user that started it
	Daemon                bool  // daemon on: start in the background
}

// User is the user directive, resolved when the configuration is read by root (or by
// the user it names): the account the process switches to once it serves.
type User struct {
	Name, Group string
	UID, GID    int
	Groups      []int // supplementary groups, as initgroups(Name, GID) sets them
	Pos         Pos
}

// EnvVar is one env directive: keep Name from the environment, or (Set) give it Value.
type EnvVar struct {
	Name, Value string
	Set         bool
}

// ErrorLog is one error_log destination.
type ErrorLog struct {
	Path  string // absolute path, or "stderr"
	Level string // debug info notice warn error crit alert emerg
}

// Events holds the events block.
type Events struct {
	WorkerConnections int
}

// HTTP holds the http block.
type HTTP struct {
	Servers []*Server
	Pos     Pos
	confs   moduleConfs
}

// Server is one server block.
type Server struct {
	Listens   []Listen
	Names     []ServerName
	Locations []*Location // top-level locations, in file order
	Pos       Pos
	confs     moduleConfs
}

// Listen is one listen directive.
type Listen struct {
	Addr          netip.AddrPort // unspecified address for "*:80" or "80"
	Text          string         // as written, for messages
	DefaultServer bool
	ReusePort     bool
	Bind          bool // every address has its own socket anyway: nginx's bind is always on
	SSL           bool // connections on the address speak TLS (any listen of it saying ssl)
	ProxyProtocol bool // connections on the address start with a PROXY protocol header (any listen of it saying so)
	Socket        SocketOptions
	Pos           Pos
}

// SocketOptions are the listen parameters that set options on the listening socket
// (accepted connections inherit them). Zero values leave the system default.
type SocketOptions struct {
	Backlog   int // 0: nginx's 511
	RcvBuf    int // SO_RCVBUF
	SndBuf    int // SO_SNDBUF
	KeepAlive int // SO_KEEPALIVE: 0 unset, 1 on, -1 off
	// TCP_KEEPIDLE, TCP_KEEPINTVL (seconds) and TCP_KEEPCNT of so_keepalive=idle:intvl:cnt;
	// 0: the system's.
	KeepIdle, KeepIntvl, KeepCnt int
	DeferAccept                  bool // TCP_DEFER_ACCEPT
	FastOpen                     int  // TCP_FASTOPEN queue length; 0: off
}

// ServerNameKind tells how a server_name matches.
type ServerNameKind int

const (
	NameExact          ServerNameKind = iota
	NameWildcardPrefix                // *.example.com (and .example.com's wildcard half)
	NameWildcardSuffix                // www.example.*
	NameRegex                         // ~^www\d+\.example\.com$
)

// ServerName is one server_name entry, lower-cased like nginx.
type ServerName struct {
	Kind  ServerNameKind
	Name  string       // for wildcards, without the "*." or ".*"
	Regex *pcre.Regexp // NameRegex only
	Pos   Pos
}

// LocationKind is a location's modifier.
type LocationKind int

const (
	LocPrefix        LocationKind = iota // location /path
	LocExact                             // location = /path
	LocPrefixNoRegex                     // location ^~ /path
	LocRegex                             // location ~ re
	LocRegexCaseless                     // location ~* re
	LocNamed                             // location @name
	// LocIf is the implicit location of an "if" block inside a location, as
	// nginx's: never searched for, entered when its condition holds; it inherits
	// from the enclosing location (its Parent) as a nested location does.
	LocIf
	// LocLimitExcept is the implicit location of a "limit_except" block, as
	// nginx's: never searched for, entered for the methods it limits; it inherits
	// from the enclosing location (its Parent) as a nested location does.
	LocLimitExcept
)

// Location is one location block.
type Location struct {
	Kind      LocationKind
	Path      string // the prefix, exact path, regex source or @name (an if's: its parent's)
	Regex     *pcre.Regexp
	Locations []*Location // nested, in file order
	Parent    *Location   // nil at server level
	Pos       Pos
	confs     moduleConfs
}

// MainConf returns module m's snapshot-wide config (from Module.NewMain).
func (c *Config) MainConf(m *Module) any { return c.mains[m] }

// Conf returns module m's http-level config of the http block.
func (h *HTTP) Conf(m *Module) any { return h.confs.get(m) }

// Conf returns module m's config for this server, merged with the http block's.
func (s *Server) Conf(m *Module) any { return s.confs.get(m) }

// Conf returns module m's config for this location, merged with its parents'.
func (l *Location) Conf(m *Module) any { return l.confs.get(m) }

// Owner is the location an if or limit_except block's implicit location stands
// in, itself for any other (nil for nil): the one whose path and kind a module
// reads, as nginx gives the block's location its enclosing location's name.
func (l *Location) Owner() *Location {
	for l.Implicit() {
		l = l.Parent
	}
	return l
}

// Implicit reports the implicit location of an if or limit_except block.
func (l *Location) Implicit() bool {
	return l != nil && (l.Kind == LocIf || l.Kind == LocLimitExcept)
}
