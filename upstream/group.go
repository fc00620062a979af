package upstream

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/resolver"
)

// Method is a group's balancing method.
type Method int

const (
	RoundRobin Method = iota // smooth weighted round robin, nginx's default
	LeastConn
	IPHash
	Hash           // hash KEY
	HashConsistent // hash KEY consistent (ketama)
	Random
	RandomTwo // random two [least_conn]: the one of two random picks with fewer connections
)

var methodNames = map[Method]string{
	RoundRobin: "round_robin", LeastConn: "least_conn", IPHash: "ip_hash", Hash: "hash",
	HashConsistent: "hash consistent", Random: "random", RandomTwo: "random two",
}

func (m Method) String() string { return methodNames[m] }

// Group is one upstream block, or the implicit group of a proxy_pass to host:port.
type Group struct {
	Name     string
	Pos      conf.Pos
	Implicit bool // made for a proxy_pass host:port, not declared with upstream

	Peers  []*Peer // primary servers
	Backup []*Peer // used only when every primary server is unavailable

	Method  Method
	HashKey string // the hash directive's key, with $variables the proxy evaluates

	Sticky *Sticky // sticky cookie; nil: none

	Keepalive         int // idle connections each loop keeps per group; 0: none
	KeepaliveTimeout  time.Duration
	KeepaliveRequests int

	// single: one primary server and no backup. As nginx, such a server is never
	// considered unavailable: max_fails and fail_timeout do not apply to it.
	single bool
	tries  int // servers not marked down, primary and backup: nginx's peer.tries

	// Servers with resolve (nginx 1.27.3+): their peers come from DNS at run time
	// and are not in Peers or Backup; each loop keeps its own versions of the
	// group with them (Resolved).
	Resolve         []*ResolveServer
	Zone            string           // the zone directive's name
	Resolver        *resolver.Config // the group's or the http level's, when Resolve
	ResolverTimeout time.Duration

	origin    *Group // the configured group of a version made by Resolved
	methodSet bool
	points    []ketamaPoint // HashConsistent
}

// ResolveServer is a "server name resolve": the name, its port and what the
// server directive says of the peers its addresses make.
type ResolveServer struct {
	Host string
	Port uint16
	PeerConfig
}

// Origin is the configured group of a version made by Resolved, else g itself.
func (g *Group) Origin() *Group {
	if g.origin != nil {
		return g.origin
	}
	return g
}

// Resolved makes a version of g (a configured group) with its fixed servers and,
// for each of g.Resolve, a peer per address of addrs[i]. The peers are new, for
// one loop alone; a peer whose address prev (the version it replaces, or nil) had
// keeps its failure state.
func (g *Group) Resolved(addrs [][]netip.Addr, prev *Group) *Group {
	ng := *g
	ng.origin, ng.Peers, ng.Backup, ng.points = g, nil, nil, nil
	old := map[PeerKey]*Peer{}
	if prev != nil {
		for _, p := range prev.all() {
			old[p.Key()] = p
		}
	}
	add := func(p *Peer) {
		if o := old[p.Key()]; o != nil && o.Name == p.Name {
			p.fails.Store(o.fails.Load())
			p.accessed.Store(o.accessed.Load())
			p.checked.Store(o.checked.Load())
		}
		if len(ng.Peers)+len(ng.Backup) >= maxPeers {
			return
		}
		if p.Backup {
			ng.Backup = append(ng.Backup, p)
		} else {
			ng.Peers = append(ng.Peers, p)
		}
	}
	for _, p := range g.all() {
		add(&Peer{Addr: p.Addr, Unix: p.Unix, PeerConfig: p.PeerConfig})
	}
	for i, rs := range g.Resolve {
		for _, a := range addrs[i] {
			pc := rs.PeerConfig
			add(&Peer{Addr: netip.AddrPortFrom(a, rs.Port), PeerConfig: pc})
		}
	}
	_ = ng.finish() // at most maxPeers; no primary peer is allowed here
	return &ng
}

// Tries is how many servers one request may try: those not marked down.
func (g *Group) Tries() int { return g.tries }

// Peer is one server address of a group. A server name that resolves to several
// addresses gives one Peer per address, as in nginx.
type Peer struct {
	Addr netip.AddrPort // the zero value for a unix-domain socket
	Unix string         // the path of a unix-domain socket ("server unix:/path"); "" for TCP
	PeerConfig

	index int // in Peers or Backup

	// Failure state shared by every loop (nginx keeps it per worker without a zone),
	// nginx's fails, accessed and checked.
	fails    atomic.Int32
	accessed atomic.Int64 // unix nanos of the last failure
	checked  atomic.Int64 // unix nanos of the last failure, or of the pick that opened a window

	health Health // active health checks' verdict, shared by every loop
	route  string // what a sticky cookie calls it (Route)
}

// PeerConfig is what the server directive says about a peer.
type PeerConfig struct {
	Name        string // as written, with the port: "backend1.example.com:8080"
	Weight      int
	MaxFails    int           // 0: never marked failed
	FailTimeout time.Duration // how long a failed peer rests, and the window failures count in
	MaxConns    int           // per loop; 0: no limit
	SlowStart   time.Duration // NGINX Plus's slow_start: the weight's ramp after a recovery
	RouteParam  string        // NGINX Plus's route=: the server's name in a sticky cookie
	Down        bool
	Backup      bool
	Pos         conf.Pos
}

// Available reports whether the peer may be tried at now: not down, and not resting
// after max_fails failures within fail_timeout.
func (p *Peer) Available(now time.Time) bool {
	if p.Down || p.health.down.Load() {
		return false
	}
	if p.MaxFails == 0 || int(p.fails.Load()) < p.MaxFails {
		return true
	}
	return now.UnixNano()-p.checked.Load() > int64(p.FailTimeout)
}

// picked is called on the chosen peer. A pick more than fail_timeout after the last
// check opens a new window (nginx's "checked"): a resting peer is being probed, so its
// rest restarts now and other requests wait for the probe's outcome, and a success
// after it clears the failures.
func (p *Peer) picked(now time.Time) {
	if n := now.UnixNano(); n-p.checked.Load() > int64(p.FailTimeout) {
		p.checked.Store(n)
	}
}

// Failed records a failed attempt (connect error, timeout, invalid header, or a
// status listed in proxy_next_upstream).
func (p *Peer) Failed(now time.Time) {
	p.fails.Add(1)
	n := now.UnixNano()
	p.accessed.Store(n)
	p.checked.Store(n)
}

// Succeeded ends an attempt that did not fail. As nginx, it clears the failures
// only when a pick opened a window after the last failure: max_fails counts the
// failures within fail_timeout, successes between them notwithstanding.
func (p *Peer) Succeeded() {
	if p.fails.Load() != 0 && p.accessed.Load() < p.checked.Load() {
		p.fails.Store(0)
		if p.SlowStart > 0 {
			p.health.upSince.Store(time.Now().UnixNano())
		}
	}
}

// Fails is the current count of failures.
func (p *Peer) Fails() int { return int(p.fails.Load()) }

// Tried records which peers one request has tried, for retries (up to 256 peers per
// group; nginx's tried bitmap).
type Tried struct {
	bits [4]uint64
}

const maxPeers = 256

func (t *Tried) has(i int) bool { return t.bits[i>>6]&(1<<(i&63)) != 0 }
func (t *Tried) set(i int)      { t.bits[i>>6] |= 1 << (i & 63) }

// Reset forgets every try.
func (t *Tried) Reset() { t.bits = [4]uint64{} }

// PeerKey identifies a peer's address from one snapshot to the next (upstream
// keep-alive connections are kept by it across a reload). It is comparable.
type PeerKey struct {
	Addr netip.AddrPort
	Unix string
}

// Key returns the peer's PeerKey.
func (p *Peer) Key() PeerKey { return PeerKey{Addr: p.Addr, Unix: p.Unix} }

// AppendAddr appends the peer's address as $upstream_addr shows it: host:port,
// or unix:/path.
func (p *Peer) AppendAddr(dst []byte) []byte {
	if p.Unix != "" {
		return append(append(dst, "unix:"...), p.Unix...)
	}
	return p.Addr.AppendTo(dst)
}

// String is AppendAddr's text, for logs.
func (p *Peer) String() string { return string(p.AppendAddr(nil)) }

// NewAddrGroup makes the group of a proxy_pass target found for a request (its
// URL made of variables, its name resolved at run time; nginx's
// ngx_http_upstream_create_round_robin_peer): one peer per address, weight 1,
// tried in turn by proxy_next_upstream. As nginx, whose peers of such a target
// live for one request, a failure does not mark a peer down for the next
// requests (max_fails=0). unixPath makes it one unix-domain peer. name is the
// "host:port" as evaluated.
func NewAddrGroup(name string, addrs []netip.AddrPort, unixPath string) *Group {
	g := &Group{Name: name, Implicit: true, KeepaliveTimeout: 60 * time.Second, KeepaliveRequests: 1000}
	if unixPath != "" {
		addrs = []netip.AddrPort{{}}
	}
	for _, a := range addrs {
		g.Peers = append(g.Peers, &Peer{Addr: a, Unix: unixPath, PeerConfig: PeerConfig{Name: name, Weight: 1, FailTimeout: 10 * time.Second}})
	}
	if len(g.Peers) > maxPeers {
		g.Peers = g.Peers[:maxPeers]
	}
	_ = g.finish() // cannot fail: primary peers only, at most maxPeers
	return g
}
