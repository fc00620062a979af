// Package steering keeps each TCP connection on the NUMA domain where its SYN
// arrived, the Linux counterpart of FreeBSD's TCP_REUSPORT_LB_NUMA: an
// sk_reuseport BPF program attached to a SO_REUSEPORT group picks a listener
// of the arrival CPU's domain, falls back to the kernel's hash over the whole
// group when that domain has no live listener, and moves the queued
// connections of a closing listener to another listener of their domain.
// It also counts SYNs per client address in LRU maps created on each domain's
// NUMA node.
//
// One Steering serves one reuseport group (one listening address). It needs
// Linux 5.14 (BPF_SK_REUSEPORT_SELECT_OR_MIGRATE) and CAP_BPF with
// CAP_NET_ADMIN, or root; Load returns an error wrapping ErrUnsupported when
// the kernel or the process cannot, and SetIncomingCPU is then the degraded
// per-CPU alternative.
//
// Migration of a closing listener's queue happens whenever the program is
// attached: the kernel consults a select-or-migrate program even with
// net.ipv4.tcp_migrate_req=0 (measured on 6.18, TestMigrateKeepsDomain).
// The sysctl only matters without the program: then the queue is migrated by
// hash, ignoring domains, and with neither every queued connection is reset.
//
// The program never drops: SK_DROP from an sk_reuseport program answers the
// SYN with a RST (TestSKDropAnswersRST), so there is no per-client SYN rate
// limit here.
package steering

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Limits compiled into the BPF program (steering.c).
const (
	MaxDomains     = 16 // domains a Config may have
	MaxPerDomain   = 64 // listeners a domain may have
	MaxNodes       = 64 // NUMA node numbers a Config may use: 0 to MaxNodes-1
	noDomain       = ^uint32(0)
	defaultEntries = 65536
)

// ErrUnsupported is wrapped by Load's error when BPF steering cannot run here:
// no CAP_BPF/CAP_SYS_ADMIN, bpf() disabled, or a kernel without sk_reuseport
// select-or-migrate programs. The caller logs it once and falls back (see
// SetIncomingCPU).
var ErrUnsupported = errors.New("bpf reuseport steering unsupported")

// ErrNotListed is returned by RemoveListener for an fd that AddListener did
// not add to that domain.
var ErrNotListed = errors.New("listener not in domain")

// Config describes the domains a Steering chooses between.
type Config struct {
	// Domains is the number of domains, 1 to MaxDomains.
	Domains int
	// MaxPerDomain is the number of listener slots per domain, 1 to
	// MaxPerDomain (default 1).
	MaxPerDomain int
	// CPUDomain maps a CPU number to its domain. A CPU not listed has no
	// domain: its connections go to the kernel's hash. Ignored when
	// UseNumaNodeID is set.
	CPUDomain map[int]int
	// DomainNode[d] is the NUMA node whose memory holds domain d's conntrack
	// maps. Nil means domain d is node d.
	DomainNode []int
	// ConntrackEntries is the size of each node's two LRU maps (default
	// 65536: about 17 MiB of kernel memory per node per Steering, measured).
	ConntrackEntries int
	// UseNumaNodeID makes the program take the domain from
	// bpf_get_numa_node_id() instead of CPUDomain: domain d is then node d,
	// DomainNode must be nil or the identity, and every node below Domains
	// must be online (its conntrack maps are created on it).
	UseNumaNodeID bool
}

func (c *Config) normalize() error {
	if c.Domains < 1 || c.Domains > MaxDomains {
		return fmt.Errorf("steering: %d domains, want 1 to %d", c.Domains, MaxDomains)
	}
	if c.MaxPerDomain == 0 {
		c.MaxPerDomain = 1
	}
	if c.MaxPerDomain < 1 || c.MaxPerDomain > MaxPerDomain {
		return fmt.Errorf("steering: %d listeners per domain, want 1 to %d", c.MaxPerDomain, MaxPerDomain)
	}
	if c.ConntrackEntries == 0 {
		c.ConntrackEntries = defaultEntries
	}
	if c.ConntrackEntries < 1 {
		return fmt.Errorf("steering: %d conntrack entries", c.ConntrackEntries)
	}
	if c.DomainNode == nil {
		c.DomainNode = make([]int, c.Domains)
		for d := range c.DomainNode {
			c.DomainNode[d] = d
		}
	}
	if len(c.DomainNode) != c.Domains {
		return fmt.Errorf("steering: %d domain nodes for %d domains", len(c.DomainNode), c.Domains)
	}
	for d, n := range c.DomainNode {
		if n < 0 || n >= MaxNodes {
			return fmt.Errorf("steering: domain %d on node %d, want 0 to %d", d, n, MaxNodes-1)
		}
		if c.UseNumaNodeID && n != d {
			return fmt.Errorf("steering: domain %d on node %d: with UseNumaNodeID domain d is node d", d, n)
		}
	}
	if !c.UseNumaNodeID {
		for cpu, d := range c.CPUDomain {
			if cpu < 0 || d < 0 || d >= c.Domains {
				return fmt.Errorf("steering: cpu %d in domain %d of %d", cpu, d, c.Domains)
			}
		}
	}
	return nil
}

type slot struct {
	fd     int
	cookie uint64
}

// Steering is a loaded steering program and its maps.
type Steering struct {
	mu      sync.Mutex
	cfg     Config
	objs    steeringObjects
	slots   [][]slot          // per domain, in sockarray order
	clients map[int]*ebpf.Map // per node
	flows   map[int]*ebpf.Map // per node
	nodes   []int
	closed  bool
}

// Load checks cfg, loads the program and its maps, fills the CPU and node
// tables and creates each node's conntrack maps on that node.
func Load(cfg Config) (*Steering, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if err := probe(); err != nil {
		return nil, err
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("steering: %w", err)
	}
	spec, nodes, err := newSpec(cfg, ncpu)
	if err != nil {
		return nil, err
	}
	s := &Steering{
		cfg:     cfg,
		slots:   make([][]slot, cfg.Domains),
		clients: map[int]*ebpf.Map{},
		flows:   map[int]*ebpf.Map{},
		nodes:   nodes,
	}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, unsupported("steering: load", err)
	}
	if err := s.fill(spec, ncpu); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newSpec returns the program's collection spec sized and configured for a
// normalized cfg, and the distinct nodes of cfg.DomainNode, ascending.
func newSpec(cfg Config, ncpu int) (*ebpf.CollectionSpec, []int, error) {
	spec, err := loadSteering()
	if err != nil {
		return nil, nil, fmt.Errorf("steering: %w", err)
	}
	nodes := slices.Clone(cfg.DomainNode)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	outer := uint32(nodes[len(nodes)-1] + 1)

	spec.Maps[steeringMapSocks].MaxEntries = uint32(cfg.Domains * cfg.MaxPerDomain)
	spec.Maps[steeringMapDomainCount].MaxEntries = uint32(cfg.Domains)
	spec.Maps[steeringMapDomainNode].MaxEntries = uint32(cfg.Domains)
	spec.Maps[steeringMapCpuDomain].MaxEntries = uint32(ncpu)
	spec.Maps[steeringMapStats].MaxEntries = uint32(cfg.Domains + 1)
	for _, name := range []string{steeringMapCtClients, steeringMapCtFlows} {
		m := spec.Maps[name]
		m.MaxEntries = outer
		// The template every inner map must match: same flags, so it
		// carries BPF_F_NUMA_NODE too, here on the first node.
		m.InnerMap.MaxEntries = uint32(cfg.ConntrackEntries)
		m.InnerMap.Flags |= unix.BPF_F_NUMA_NODE
		m.InnerMap.NumaNode = uint32(nodes[0])
	}
	use := uint32(0)
	if cfg.UseNumaNodeID {
		use = 1
	}
	for name, v := range map[string]uint32{
		steeringVarNumDomains:    uint32(cfg.Domains),
		steeringVarMaxPerDomain:  uint32(cfg.MaxPerDomain),
		steeringVarNumNodes:      outer,
		steeringVarUseNumaNodeId: use,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, nil, fmt.Errorf("steering: set %s: %w", name, err)
		}
	}
	return spec, nodes, nil
}

func (s *Steering) fill(spec *ebpf.CollectionSpec, ncpu int) error {
	for cpu := range ncpu {
		d := noDomain
		if v, ok := s.cfg.CPUDomain[cpu]; ok {
			d = uint32(v)
		}
		if err := s.objs.CpuDomain.Put(uint32(cpu), d); err != nil {
			return fmt.Errorf("steering: cpu_domain[%d]: %w", cpu, err)
		}
	}
	for d, n := range s.cfg.DomainNode {
		if err := s.objs.DomainNode.Put(uint32(d), uint32(n)); err != nil {
			return fmt.Errorf("steering: domain_node[%d]: %w", d, err)
		}
	}
	for _, n := range s.nodes {
		for _, t := range []struct {
			outer *ebpf.Map
			spec  *ebpf.MapSpec
			into  map[int]*ebpf.Map
		}{
			{s.objs.CtClients, spec.Maps[steeringMapCtClients].InnerMap, s.clients},
			{s.objs.CtFlows, spec.Maps[steeringMapCtFlows].InnerMap, s.flows},
		} {
			ms := t.spec.Copy()
			ms.Flags |= unix.BPF_F_NUMA_NODE
			ms.NumaNode = uint32(n)
			m, err := ebpf.NewMap(ms)
			if err != nil {
				return fmt.Errorf("steering: conntrack map on node %d: %w", n, err)
			}
			t.into[n] = m
			if err := t.outer.Put(uint32(n), m); err != nil {
				return fmt.Errorf("steering: conntrack map on node %d: %w", n, err)
			}
		}
	}
	return nil
}

// probe loads a two-instruction select-or-migrate program: the cheapest way
// to learn whether this kernel and these privileges can run the real one.
func probe() error {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SkReuseport,
		AttachType:   ebpf.AttachSkReuseportSelectOrMigrate,
		License:      "Dual MIT/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("steering: probe sk_reuseport select-or-migrate program (needs Linux 5.14, CAP_BPF and CAP_NET_ADMIN): %w: %w", ErrUnsupported, err)
	}
	return p.Close()
}

// unsupported wraps err, adding ErrUnsupported when it says the kernel or the
// process's privileges, not the program, are at fault.
func unsupported(op string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) ||
		errors.Is(err, unix.ENOSYS) || errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnsupported, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Close releases the program and the maps. A group the program is attached
// to keeps running it (the kernel holds its own references) until Detach or
// until its last listener closes.
func (s *Steering) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, m := range s.clients {
		errs = append(errs, m.Close())
	}
	for _, m := range s.flows {
		errs = append(errs, m.Close())
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// Attach sets the program on the reuseport group of listener fd
// (SO_ATTACH_REUSEPORT_EBPF: one member sets it for the whole group).
func (s *Steering) Attach(fd int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("steering: attach: closed")
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_EBPF, s.objs.SelectOrMigrate.FD()); err != nil {
		return fmt.Errorf("steering: attach to fd %d: setsockopt SO_ATTACH_REUSEPORT_EBPF: %w", fd, err)
	}
	return nil
}

// Detach removes any BPF program from the reuseport group of listener fd
// (SO_DETACH_REUSEPORT_BPF); the kernel then hashes over the whole group.
func Detach(fd int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DETACH_REUSEPORT_BPF, 0); err != nil {
		return fmt.Errorf("steering: detach from fd %d: setsockopt SO_DETACH_REUSEPORT_BPF: %w", fd, err)
	}
	return nil
}

// Refuse makes the program answer every new connection (a real SYN) with a RST
// while on is true; connections already queued stay. A reload that removes a listen
// address refuses first, empties the accept queues, then closes the listeners, so
// nothing queued is reset.
func (s *Steering) Refuse(on bool) error {
	v := uint32(0)
	if on {
		v = 1
	}
	if err := s.objs.Control.Put(uint32(0), v); err != nil {
		return fmt.Errorf("steering: control map: %w", err)
	}
	return nil
}

// SetIncomingCPU sets SO_INCOMING_CPU on listener fd: the degraded mode when
// BPF is unavailable. With one listener per CPU, each set to its CPU, Linux
// 6.1 and later hash a reuseport group's SYN to the listener whose incoming
// CPU is the CPU that processed the SYN (TestDegradedIncomingCPU).
func SetIncomingCPU(fd, cpu int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU, cpu); err != nil {
		return fmt.Errorf("steering: fd %d: setsockopt SO_INCOMING_CPU %d: %w", fd, cpu, err)
	}
	return nil
}

// AddListener puts listener fd in the next free slot of domain and makes it
// selectable. fd must be a TCP (not MPTCP) listener of the attached group and
// must stay open until RemoveListener; a socket sits in one slot at most.
func (s *Steering) AddListener(domain, fd int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("steering: add listener: closed")
	}
	if domain < 0 || domain >= s.cfg.Domains {
		return fmt.Errorf("steering: add listener fd %d: domain %d of %d", fd, domain, s.cfg.Domains)
	}
	n := len(s.slots[domain])
	if n == s.cfg.MaxPerDomain {
		return fmt.Errorf("steering: add listener fd %d: domain %d full (%d)", fd, domain, n)
	}
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return fmt.Errorf("steering: add listener fd %d: getsockopt SO_COOKIE: %w", fd, err)
	}
	key := s.key(domain, n)
	// Slot first, count second: the program never counts an unfilled slot.
	if err := s.objs.Socks.Update(key, uint64(fd), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("steering: add listener fd %d: sockarray[%d]: %w", fd, key, err)
	}
	if err := s.objs.DomainCount.Put(uint32(domain), uint32(n+1)); err != nil {
		_ = s.objs.Socks.Delete(key)
		return fmt.Errorf("steering: add listener fd %d: domain_count[%d]: %w", fd, domain, err)
	}
	s.slots[domain] = append(s.slots[domain], slot{fd: fd, cookie: cookie})
	return nil
}

// RemoveListener takes listener fd out of domain: the domain's last listener
// moves into its slot and the count shrinks, so the slots stay dense.
// Call it before closing fd; a listener closed first has already been emptied
// from its slot by the kernel, and RemoveListener then only repacks.
//
// The program runs concurrently with these steps; every intermediate state
// is safe because it probes all of the domain's counted slots and skips
// empty ones: (1) delete fd's slot — no new SYN selects fd from now on
// (the kernel's fallback hash, used when a whole domain is empty, may still
// pick it while it stays open); (2) delete the last slot; (3) put the last
// listener in fd's slot — between (2) and (3) that listener is briefly
// unselectable and its SYNs go to the domain's others; (4) decrement the
// count. A SYN may fall back to the group hash only if every slot it probes is
// empty, which needs the domain's only listener to be the one removed.
func (s *Steering) RemoveListener(domain, fd int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("steering: remove listener: closed")
	}
	if domain < 0 || domain >= s.cfg.Domains {
		return fmt.Errorf("steering: remove listener fd %d: domain %d of %d", fd, domain, s.cfg.Domains)
	}
	sl := s.slots[domain]
	i := slices.IndexFunc(sl, func(x slot) bool { return x.fd == fd })
	if i < 0 {
		return fmt.Errorf("steering: remove listener fd %d from domain %d: %w", fd, domain, ErrNotListed)
	}
	last := len(sl) - 1
	var errs []error
	if err := s.objs.Socks.Delete(s.key(domain, i)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("sockarray[%d]: %w", s.key(domain, i), err))
	}
	keep := slices.Clone(sl[:last])
	if i != last {
		moved := sl[last]
		if err := s.objs.Socks.Delete(s.key(domain, last)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("sockarray[%d]: %w", s.key(domain, last), err))
		}
		keep[i] = moved
		cookie, err := unix.GetsockoptUint64(moved.fd, unix.SOL_SOCKET, unix.SO_COOKIE)
		switch {
		case err != nil || cookie != moved.cookie:
			// The moved listener was closed (its fd may even be reused):
			// the kernel emptied its slot; drop it as well.
			keep = slices.Delete(keep, i, i+1)
		default:
			if err := s.objs.Socks.Update(s.key(domain, i), uint64(moved.fd), ebpf.UpdateAny); err != nil {
				errs = append(errs, fmt.Errorf("move fd %d to sockarray[%d]: %w", moved.fd, s.key(domain, i), err))
				keep = slices.Delete(keep, i, i+1)
			}
		}
	}
	if err := s.objs.DomainCount.Put(uint32(domain), uint32(len(keep))); err != nil {
		errs = append(errs, fmt.Errorf("domain_count[%d]: %w", domain, err))
	}
	s.slots[domain] = keep
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("steering: remove listener fd %d from domain %d: %w", fd, domain, err)
	}
	return nil
}

func (s *Steering) key(domain, k int) uint32 { return uint32(domain*s.cfg.MaxPerDomain + k) }

// Listeners returns the listener fds of domain in slot order.
func (s *Steering) Listeners(domain int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if domain < 0 || domain >= len(s.slots) {
		return nil
	}
	fds := make([]int, len(s.slots[domain]))
	for i, x := range s.slots[domain] {
		fds[i] = x.fd
	}
	return fds
}

// DomainStats are the program's counters for one domain, summed over CPUs.
type DomainStats struct {
	Domain          int    // -1: packets that arrived on a CPU without a domain
	Selected        uint64 // given to a listener of the domain
	Fallback        uint64 // no live listener in the domain: kernel hash over the group
	Migrated        uint64 // queued connection of a closing listener moved within the domain
	MigrateFallback uint64 // queued connection of unknown domain, or none left there: kernel hash
	NotSYN          uint64 // packets that were not a TCP SYN (stray ACK, RST, syncookie ACK): steered, not counted in conntrack
}

// Stats returns one DomainStats per domain and, last, the no-domain row.
func (s *Steering) Stats() ([]DomainStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("steering: stats: closed")
	}
	out := make([]DomainStats, 0, s.cfg.Domains+1)
	for d := 0; d <= s.cfg.Domains; d++ {
		var per []steeringDomainStats
		if err := s.objs.Stats.Lookup(uint32(d), &per); err != nil {
			return nil, fmt.Errorf("steering: stats[%d]: %w", d, err)
		}
		ds := DomainStats{Domain: d}
		if d == s.cfg.Domains {
			ds.Domain = -1
		}
		for _, p := range per {
			ds.Selected += p.Selected
			ds.Fallback += p.Fallback
			ds.Migrated += p.Migrated
			ds.MigrateFallback += p.MigrateFallback
			ds.NotSYN += p.NotSyn
		}
		out = append(out, ds)
	}
	return out, nil
}

// ConntrackNodes returns the NUMA nodes that have conntrack maps, ascending.
func (s *Steering) ConntrackNodes() []int { return slices.Clone(s.nodes) }

// Client is what one node's conntrack map holds about a client address.
type Client struct {
	Addr     netip.Addr    // IPv4 clients as plain IPv4
	SYNs     []uint32      // SYNs received per domain (index = domain)
	LastSeen time.Duration // CLOCK_MONOTONIC time of the last SYN
}

// Clients lists the client entries of node's conntrack map.
func (s *Steering) Clients(node int) ([]Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.clients[node]
	if !ok || s.closed {
		return nil, fmt.Errorf("steering: no conntrack map on node %d", node)
	}
	var (
		k   steeringClientKey
		v   steeringClientVal
		out []Client
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		out = append(out, Client{
			Addr:     netip.AddrFrom16(k.Addr).Unmap(),
			SYNs:     slices.Clone(v.Syns[:s.cfg.Domains]),
			LastSeen: time.Duration(v.LastSeenNs),
		})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("steering: conntrack node %d: %w", node, err)
	}
	return out, nil
}

// ClientCount is the number of client entries in node's conntrack map: its
// occupancy, walked key by key (one bpf() call each) without reading the values.
func (s *Steering) ClientCount(node int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.clients[node]
	if !ok || s.closed {
		return 0, fmt.Errorf("steering: no conntrack map on node %d", node)
	}
	var k, next steeringClientKey
	n := 0
	for err := m.NextKey(nil, &next); ; err = m.NextKey(&k, &next) {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("steering: conntrack node %d: %w", node, err)
		}
		n++
		k = next
	}
}

// FlowDomain returns the domain the program recorded for the connection
// between client and server when it steered its SYN; ok is false when no
// node's map holds it (never seen, or evicted).
func (s *Steering) FlowDomain(client, server netip.AddrPort) (domain int, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, false, errors.New("steering: flow domain: closed")
	}
	k := steeringFlowKey{
		Client:     client.Addr().As16(),
		Server:     server.Addr().As16(),
		ClientPort: htons(client.Port()),
		ServerPort: htons(server.Port()),
	}
	for _, n := range s.nodes {
		var v steeringFlowVal
		err := s.flows[n].Lookup(&k, &v)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("steering: conntrack node %d: %w", n, err)
		}
		return int(v.Domain), true, nil
	}
	return 0, false, nil
}

// htons converts a port to the network byte order the program stores, as a
// little-endian host reads it (the generated types exist for bpfel only).
func htons(p uint16) uint16 { return p<<8 | p>>8 }
