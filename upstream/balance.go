package upstream

import (
	"hash/crc32"
	"net/netip"
	"sort"
	"strconv"
	"time"
)

// Balancer is one loop's view of a group: round-robin weights and connection counts
// are the loop's own; failure state is the group's (shared, atomic).
type Balancer struct {
	g         *Group
	current   []int // smooth round robin: current weight, primary peers then backup
	effective []int // smooth round robin: effective weight, lowered by failures
	conns     []int // active connections from this loop
	rng       uint64
}

// NewBalancer makes a loop's balancer for g; seed varies random picks between loops.
func (g *Group) NewBalancer(seed uint64) *Balancer {
	n := len(g.Peers) + len(g.Backup)
	b := &Balancer{g: g, current: make([]int, n), effective: make([]int, n), conns: make([]int, n), rng: seed | 1}
	for _, p := range g.all() {
		b.effective[p.index] = p.Weight
	}
	return b
}

// Group returns the balancer's group.
func (b *Balancer) Group() *Group { return b.g }

func (g *Group) all() []*Peer {
	return append(append(make([]*Peer, 0, len(g.Peers)+len(g.Backup)), g.Peers...), g.Backup...)
}

// Pick chooses a peer this request has not tried, by the group's method, and counts a
// connection to it; nil when no peer is available (nginx's "no live upstreams"). key is
// the evaluated hash key (hash methods), client the client address (ip_hash).
func (b *Balancer) Pick(now time.Time, key []byte, client netip.Addr, tried *Tried) *Peer {
	if len(b.conns) == 0 {
		return nil // a group whose servers with resolve have no address now
	}
	if b.g.single {
		// nginx's peers->single, for every method: the lone server is used unless it
		// is marked down or at max_conns, whatever its failures.
		p := b.g.Peers[0]
		if p.Down || p.health.down.Load() || (p.MaxConns > 0 && b.conns[0] >= p.MaxConns) {
			return nil
		}
		tried.set(0)
		b.conns[0]++
		return p
	}
	var p *Peer
	switch b.g.Method {
	case LeastConn:
		p = b.leastConn(now, b.g.Peers, tried)
	case IPHash:
		p = b.ipHash(now, client, tried)
	case Hash:
		p = b.hash(now, key, tried)
	case HashConsistent:
		p = b.consistent(now, key, tried)
	case Random, RandomTwo:
		p = b.random(now, tried, b.g.Method == RandomTwo)
	default:
		p = b.roundRobin(now, b.g.Peers, tried)
	}
	if p == nil && len(b.g.Backup) > 0 {
		// Backup servers take over only when every primary one is unavailable.
		if b.g.Method == LeastConn {
			p = b.leastConn(now, b.g.Backup, tried)
		} else {
			p = b.roundRobin(now, b.g.Backup, tried)
		}
	}
	if p != nil {
		tried.set(p.index)
		b.conns[p.index]++
		p.picked(now)
	}
	return p
}

// Done ends a connection to p: failed says whether the attempt counts as a failure.
// A lone server (nginx's single peer) keeps no failure state.
func (b *Balancer) Done(p *Peer, now time.Time, failed bool) {
	b.Release(p)
	if b.g.single {
		return
	}
	i := p.index
	if !failed {
		p.Succeeded()
		return
	}
	p.Failed(now)
	// As nginx: a failure lowers the peer's effective weight, which climbs back by one
	// on each later selection.
	if p.MaxFails > 0 {
		b.effective[i] -= p.Weight / p.MaxFails
	}
	if b.effective[i] < 0 {
		b.effective[i] = 0
	}
}

// Release ends a connection to p whose outcome says nothing about p (the proxy's own
// error, a cached connection the server had closed): p's failure state is unchanged.
func (b *Balancer) Release(p *Peer) {
	if b.conns[p.index] > 0 {
		b.conns[p.index]--
	}
}

// Conns is this loop's count of active connections to p.
func (b *Balancer) Conns(p *Peer) int { return b.conns[p.index] }

// usable: not tried, available, and under max_conns.
func (b *Balancer) usable(p *Peer, now time.Time, tried *Tried) bool {
	return !tried.has(p.index) && p.Available(now) && (p.MaxConns == 0 || b.conns[p.index] < p.MaxConns)
}

// roundRobin is nginx's smooth weighted round robin: every usable peer gains its
// effective weight, the one with the most current weight wins and loses the total.
// With weights 5, 1, 1 it yields a a b a c a a.
func (b *Balancer) roundRobin(now time.Time, peers []*Peer, tried *Tried) *Peer {
	return b.smooth(now, peers, tried, nil)
}

// smooth is the round robin over the usable peers; with tiedWith set, only over
// those as loaded as it (least_conn's tie-break).
func (b *Balancer) smooth(now time.Time, peers []*Peer, tried *Tried, tiedWith *Peer) *Peer {
	var best *Peer
	total := 0
	for _, p := range peers {
		if !b.usable(p, now, tried) || (tiedWith != nil && !b.sameLoad(p, tiedWith)) {
			continue
		}
		i := p.index
		w := b.effective[i]
		if p.SlowStart > 0 {
			w = min(w, p.weightAt(now))
		}
		b.current[i] += w
		total += w
		if b.effective[i] < p.Weight {
			b.effective[i]++
		}
		if best == nil || b.current[i] > b.current[best.index] {
			best = p
		}
	}
	if best != nil {
		b.current[best.index] -= total
	}
	return best
}

// lessLoaded and sameLoad compare connections per weight without dividing.
func (b *Balancer) lessLoaded(p, q *Peer) bool {
	return b.conns[p.index]*q.Weight < b.conns[q.index]*p.Weight
}
func (b *Balancer) sameLoad(p, q *Peer) bool {
	return b.conns[p.index]*q.Weight == b.conns[q.index]*p.Weight
}

// leastConn picks the usable peer with the fewest connections for its weight; ties
// are settled by smooth round robin among the tied peers.
func (b *Balancer) leastConn(now time.Time, peers []*Peer, tried *Tried) *Peer {
	var best *Peer
	ties := 0
	for _, p := range peers {
		if !b.usable(p, now, tried) {
			continue
		}
		switch {
		case best == nil || b.lessLoaded(p, best):
			best, ties = p, 1
		case b.sameLoad(p, best):
			ties++
		}
	}
	if ties <= 1 {
		return best
	}
	return b.smooth(now, peers, tried, best)
}

// maxHashTries is how many re-hashes the hash methods try before falling back to
// round robin, as nginx.
const maxHashTries = 20

// byWeight maps w in [0, total weight) to a peer, walking the weights.
func (g *Group) byWeight(w int) *Peer {
	for _, p := range g.Peers {
		if w < p.Weight {
			return p
		}
		w -= p.Weight
	}
	return g.Peers[len(g.Peers)-1]
}

func (g *Group) totalWeight() int {
	t := 0
	for _, p := range g.Peers {
		t += p.Weight
	}
	return t
}

// ipHash is nginx's ip_hash: the first three octets of an IPv4 address (all of an
// IPv6 one) pick the peer, so a client keeps its server.
func (b *Balancer) ipHash(now time.Time, client netip.Addr, tried *Tried) *Peer {
	addr := client.Unmap()
	var octets []byte
	if addr.Is4() {
		a := addr.As4()
		octets = a[:3]
	} else {
		a := addr.As16()
		octets = a[:]
	}
	total := b.g.totalWeight()
	hash := 89
	for tries := 0; tries < maxHashTries; tries++ {
		for _, o := range octets {
			hash = (hash*113 + int(o)) % 6271
		}
		if p := b.g.byWeight(hash % total); b.usable(p, now, tried) {
			return p
		}
	}
	return b.roundRobin(now, b.g.Peers, tried)
}

// hash is nginx's hash KEY, compatible with Cache::Memcached: each try adds
// ((crc32([REHASH] KEY) >> 16) & 0x7fff) to the running hash.
func (b *Balancer) hash(now time.Time, key []byte, tried *Tried) *Peer {
	total := b.g.totalWeight()
	sum := uint32(0)
	var num [20]byte
	for rehash := 0; rehash < maxHashTries; rehash++ {
		crc := uint32(0)
		if rehash > 0 {
			crc = crc32.Update(crc, crc32.IEEETable, strconv.AppendInt(num[:0], int64(rehash), 10))
		}
		crc = crc32.Update(crc, crc32.IEEETable, key)
		sum += (crc >> 16) & 0x7fff
		if p := b.g.byWeight(int(sum % uint32(total))); b.usable(p, now, tried) {
			return p
		}
	}
	return b.roundRobin(now, b.g.Peers, tried)
}

// ketamaPoint is one point of the consistent-hash ring.
type ketamaPoint struct {
	hash  uint32
	peers []*Peer // the peers of one server name
}

// buildRing places weight×160 points per server name, each the crc32 of
// "HOST\0PORT" followed by the previous point (Cache::Memcached::Fast's ring, which
// nginx uses), so adding or removing a server moves only the keys near its points.
func (g *Group) buildRing() {
	byName := map[string][]*Peer{}
	var names []string
	for _, p := range g.Peers {
		if _, ok := byName[p.Name]; !ok {
			names = append(names, p.Name)
		}
		byName[p.Name] = append(byName[p.Name], p)
	}
	g.points = g.points[:0]
	for _, name := range names {
		host, port := name, ""
		if i := lastColon(name); i >= 0 {
			host, port = name[:i], name[i+1:]
		}
		base := crc32.ChecksumIEEE([]byte(host + "\x00" + port))
		var prev [4]byte
		for j := 0; j < byName[name][0].Weight*160; j++ {
			h := crc32.Update(base, crc32.IEEETable, prev[:])
			g.points = append(g.points, ketamaPoint{hash: h, peers: byName[name]})
			prev = [4]byte{byte(h), byte(h >> 8), byte(h >> 16), byte(h >> 24)}
		}
	}
	sort.SliceStable(g.points, func(i, j int) bool { return g.points[i].hash < g.points[j].hash })
}

func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return i
		}
		if s[i] == ']' {
			return -1
		}
	}
	return -1
}

// consistent walks the ring from the key's point to the first usable server.
func (b *Balancer) consistent(now time.Time, key []byte, tried *Tried) *Peer {
	pts := b.g.points
	if len(pts) == 0 {
		return nil
	}
	h := crc32.ChecksumIEEE(key)
	start := sort.Search(len(pts), func(i int) bool { return pts[i].hash >= h })
	for i := 0; i < maxHashTries; i++ {
		for _, p := range pts[(start+i)%len(pts)].peers {
			if b.usable(p, now, tried) {
				return p
			}
		}
	}
	return b.roundRobin(now, b.g.Peers, tried)
}

// random picks by weight at random; with two, it draws twice and keeps the peer with
// fewer connections for its weight (nginx's "random two least_conn").
func (b *Balancer) random(now time.Time, tried *Tried, two bool) *Peer {
	first := b.randomPick(now, tried)
	if !two || first == nil {
		return first
	}
	tried.set(first.index)
	second := b.randomPick(now, tried)
	tried.bits[first.index>>6] &^= 1 << (first.index & 63)
	if second != nil && b.lessLoaded(second, first) {
		return second
	}
	return first
}

func (b *Balancer) randomPick(now time.Time, tried *Tried) *Peer {
	total := 0
	for _, p := range b.g.Peers {
		if b.usable(p, now, tried) {
			total += p.Weight
		}
	}
	if total == 0 {
		return nil
	}
	w := int(b.next() % uint64(total))
	for _, p := range b.g.Peers {
		if !b.usable(p, now, tried) {
			continue
		}
		if w < p.Weight {
			return p
		}
		w -= p.Weight
	}
	return nil
}

// next is xorshift64*: cheap, lock-free, per loop.
func (b *Balancer) next() uint64 {
	b.rng ^= b.rng >> 12
	b.rng ^= b.rng << 25
	b.rng ^= b.rng >> 27
	return b.rng * 2685821657736338717
}
