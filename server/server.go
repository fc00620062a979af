// Package server assembles the running data path from a configuration snapshot: one
// event loop per CPU, grouped by NUMA domain, each with its HTTP worker, its own
// listener on every address and its own buffer pool; reload, drain and stop.
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/numa"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/numa/pool"
	steer "github.com/numaproxy/numaproxy/numa/steering"
	"github.com/numaproxy/numaproxy/proxyproto"
	"github.com/numaproxy/numaproxy/tls"
	"golang.org/x/sys/unix"
)

// Server is the running data path: one event loop per CPU, each with its HTTP
// worker and its own listener on every address. A reload that changes the loops
// (worker_processes, worker_cpu_affinity, numa, numa_domains) starts a new set of
// loops on the same listen addresses and retires the old set gracefully.
type Server struct {
	*loopSet // the current loops
	opts     Options
	log      *slog.Logger

	mu  sync.Mutex
	old map[*loopSet]bool // sets being retired
	// rolling counts retiring sets.
	rolling sync.WaitGroup

	monitor                 atomic.Pointer[Monitor] // monitor.go
	started                 time.Time
	reloads, reloadFailures atomic.Uint64
}

// loopSet is one generation of loops with their listeners, pools and steering.
type loopSet struct {
	plan     *domains.Plan
	cpus     []int
	loops    []*eventloop.Loop
	workers  []*httpcore.Worker
	layers   []*tls.Layer // each loop's handler: TLS around its worker
	gates    []*ppGate    // each loop's PROXY protocol addresses
	router   *tlsRouter
	tlsStats []*tls.Stats                             // each loop's handshake counters
	domain   []int                                    // domain of each loop
	pools    []*pool.Domain                           // per domain
	locals   []*pool.Local                            // per loop
	steer    *steering                                // per-address BPF programs
	addrs    map[netip.AddrPort][]*eventloop.Listener // each address's listener on each loop
	log      *slog.Logger
	// retiring counts addresses whose listeners are being taken away.
	retiring sync.WaitGroup
}

// Options are what a start may take from outside the configuration.
type Options struct {
	SysfsRoot string // default numa.DefaultSysfsRoot
	// Inherited are listening sockets handed over by the previous binary (binary
	// upgrade), by address: they are used instead of new sockets, in order, one per
	// loop, so the kernel's accept queues carry over.
	Inherited map[netip.AddrPort][]int
}

// Start builds the loops and listeners of cfg and starts them.
func Start(cfg *conf.Config, snap *httpcore.Snapshot, log *slog.Logger) (*Server, error) {
	return StartWith(cfg, snap, log, Options{})
}

// StartWith is Start with options.
func StartWith(cfg *conf.Config, snap *httpcore.Snapshot, log *slog.Logger, opts Options) (*Server, error) {
	if opts.SysfsRoot == "" {
		opts.SysfsRoot = numa.DefaultSysfsRoot
	}
	plan, cpus, err := layout(cfg, opts)
	if err != nil {
		return nil, err
	}
	ls, err := newLoopSet(cfg, snap, plan, cpus, nil, opts.Inherited, log)
	if err != nil {
		return nil, err
	}
	log.Log(nil, errorlog.LevelNotice, plan.String())
	srv := &Server{loopSet: ls, opts: opts, log: log, old: map[*loopSet]bool{}, started: time.Now()}
	srv.publish(srv.started)
	return srv, nil
}

// layout is the domains and the CPUs of the loops cfg asks for on this machine.
func layout(cfg *conf.Config, opts Options) (*domains.Plan, []int, error) {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		return nil, nil, err
	}
	topo, err := numa.ReadTopology(opts.SysfsRoot)
	if err != nil {
		return nil, nil, err
	}
	plan, err := domains.Resolve(domains.ConfigOf(cfg), topo, allowed)
	if err != nil {
		return nil, nil, err
	}
	cpus, err := loopCPUs(cfg.Main, domains.ConfigOf(cfg).CPUAffinity, plan)
	if err != nil {
		return nil, nil, err
	}
	return plan, cpus, nil
}

// newLoopSet builds and starts loops on cpus, with pools (reused when given),
// listeners on every address of snap (adopting inherited sockets first) and
// steering.
func newLoopSet(cfg *conf.Config, snap *httpcore.Snapshot, plan *domains.Plan, cpus []int, pools []*pool.Domain,
	inherited map[netip.AddrPort][]int, log *slog.Logger) (*loopSet, error) {
	s := &loopSet{plan: plan, cpus: cpus, pools: pools, addrs: map[netip.AddrPort][]*eventloop.Listener{}, log: log,
		router: newTLSRouter(snap, nil)}
	if usesTLS(snap) {
		log.Log(nil, errorlog.LevelNotice, tls.Probe().String())
	}
	if s.pools == nil {
		if err := s.makePools(); err != nil {
			return nil, err
		}
	}
	for _, cpu := range cpus {
		if err := s.addLoop(cfg, snap, cpu); err != nil {
			s.stop()
			return nil, err
		}
	}
	// The program runs even without NUMA: it refuses new connections to an address a
	// reload removes while its queues empty, and moves queued ones off a closing listener.
	s.steer = newSteering(plan, len(s.loops), log)
	if err := s.listen(cfg, snap, inherited); err != nil {
		s.stop()
		return nil, err
	}
	for _, l := range s.loops {
		if err := l.Start(); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

// makePools makes one buffer pool per domain, bound to the domain's node; without
// NUMA the one domain's pool places pages by first touch. Either way the buffers are
// off the Go heap and idle ones go back to the kernel (pool.Config.ReleaseDelay).
func (s *loopSet) makePools() error {
	for _, d := range s.plan.Domains {
		p, err := pool.NewDomain(d.ID, d.Node, pool.Config{})
		if err != nil {
			return fmt.Errorf("buffer pool of domain %d: %w", d.ID, err)
		}
		if d.Node >= 0 && !p.Bound() {
			s.log.Warn("buffer pool memory could not be bound to its node; pages go where the loop first touches them",
				"domain", d.ID, "node", d.Node, "error", errString(p.BindErr()))
		}
		s.pools = append(s.pools, p)
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// addLoop makes the loop for cpu with its worker, pool and start hook.
func (s *loopSet) addLoop(cfg *conf.Config, snap *httpcore.Snapshot, cpu int) error {
	dom := s.plan.DomainOf(cpu)
	if dom < 0 {
		dom = 0
	}
	w := httpcore.NewWorker(snap, s.log, dom)
	// Connections of addresses without ssl pass through the layer to the worker. Each
	// loop counts its own handshakes: no counter is shared between loops.
	ts := &tls.Stats{}
	layer := tls.NewLayer(w, s.router, tls.Options{KTLS: true, Stats: ts, PlainHTTP: true})
	// The PROXY protocol header comes before the TLS handshake: its layer is the
	// outer one. Connections of other addresses pass through it.
	gate := &ppGate{r: s.router}
	pp := proxyproto.NewLayer(layer, proxyproto.Options{Expect: gate.expect, TimeoutFor: gate.timeout, KeepPeerAddr: true})
	// HoldP: GOMAXPROCS is the number of loops plus one (eventloop sets it).
	lc := eventloop.Config{CPU: cpu, Handler: pp, Logger: s.log, MaxConns: cfg.Events.WorkerConnections, HoldP: true}
	local, err := s.pools[dom].NewLocal()
	if err != nil {
		return err
	}
	s.locals = append(s.locals, local)
	lc.Pool = pool.NewHeapFallback(local)
	if s.plan.Enabled {
		lc.OnStart = memoryPolicyHook(s.plan.Domains[dom].Node, s.log)
	}
	l, err := eventloop.New(lc)
	if err != nil {
		return err
	}
	w.SetLoop(l)
	s.loops, s.workers, s.domain = append(s.loops, l), append(s.workers, w), append(s.domain, dom)
	s.layers, s.tlsStats = append(s.layers, layer), append(s.tlsStats, ts)
	s.gates = append(s.gates, gate)
	return nil
}

// loopCPUs is where the loops go: worker_cpu_affinity's CPUs, else one loop per CPU
// of the plan (worker_processes auto) or N loops spread over the domains in turn.
func loopCPUs(m conf.Main, affinity []string, plan *domains.Plan) ([]int, error) {
	allowed := plan.CPUs()
	n := m.WorkerProcesses
	if n == 0 {
		n = allowed.Count()
	}
	if affinity != nil {
		sets, err := numa.ParseCPUAffinity(affinity, n, allowed)
		if err != nil {
			return nil, err
		}
		return numa.FirstCPUs(sets), nil
	}
	// Take the domains' CPUs in turn (d0c0, d1c0, d0c1, ...) so every domain gets loops.
	var order []int
	for i := 0; len(order) < allowed.Count(); i++ {
		for _, d := range plan.Domains {
			if cpus := d.CPUs.CPUs(); i < len(cpus) {
				order = append(order, cpus[i])
			}
		}
	}
	cpus := make([]int, n)
	for i := range cpus {
		cpus[i] = order[i%len(order)]
	}
	return cpus, nil
}

// listen opens, on every loop, a listener for each address of snap it lacks.
func (s *loopSet) listen(cfg *conf.Config, snap *httpcore.Snapshot, inheritedFDs map[netip.AddrPort][]int) error {
	for _, a := range snap.Routes.Addrs() {
		opts := listenOptionsOf(cfg, a.Addr)
		if lns := s.addrs[a.Addr]; lns != nil {
			for _, ln := range lns {
				if err := ln.SetOptions(opts); err != nil {
					s.log.Warn("setting listen options: " + err.Error())
				}
			}
			continue
		}
		inherited := inheritedFDs[a.Addr]
		var fds []listenerFD
		var lns []*eventloop.Listener
		for i, l := range s.loops {
			ln, err := s.newListener(a.Addr, opts, &inherited)
			if err != nil {
				return err
			}
			if err := l.AddListener(ln); err != nil {
				ln.Close()
				return err
			}
			lns = append(lns, ln)
			fds = append(fds, listenerFD{fd: ln.Fd(), domain: s.domain[i], cpu: l.CPU()})
		}
		// Inherited sockets beyond the loops are closed; with the program attached
		// their queued connections migrate to this process's listeners.
		for _, fd := range inherited {
			unix.Close(fd)
		}
		delete(inheritedFDs, a.Addr)
		if s.steer != nil {
			s.steer.add(a.Addr, fds)
		}
		s.addrs[a.Addr] = lns
	}
	return nil
}

// newListener adopts the next inherited socket of addr, else opens a new one.
func (s *loopSet) newListener(addr netip.AddrPort, opts eventloop.ListenOptions, inherited *[]int) (*eventloop.Listener, error) {
	for len(*inherited) > 0 {
		fd := (*inherited)[0]
		*inherited = (*inherited)[1:]
		ln, err := eventloop.ListenerFromFD(fd)
		if err == nil && ln.Addr() == addr {
			if err := ln.SetOptions(opts); err != nil {
				s.log.Warn("setting listen options: " + err.Error())
			}
			return ln, nil
		}
		if err == nil {
			ln.Close()
		}
		s.log.Warn("an inherited socket was not a listener of its address; a new one is opened", "addr", addr.String(), "fd", fd)
	}
	ln, err := eventloop.ListenWith(addr, opts)
	if err != nil {
		return nil, fmt.Errorf("bind() to %s failed %s", addr, errorlog.Errno(err))
	}
	return ln, nil
}

// ListenerFDs returns the listening sockets by address, for a binary upgrade.
func (s *loopSet) ListenerFDs() map[netip.AddrPort][]int {
	out := map[netip.AddrPort][]int{}
	for addr, lns := range s.addrs {
		for _, ln := range lns {
			out[addr] = append(out[addr], ln.Fd())
		}
	}
	return out
}

// ReleaseSteering takes the listeners out of this process's BPF socket arrays (a
// socket can be in one array only) so that a new binary can steer them; until it
// does, the kernel's hash spreads connections. RestoreSteering undoes it when the
// new binary did not start.
func (s *loopSet) ReleaseSteering() {
	if s.steer == nil {
		return
	}
	for addr, st := range s.steer.perAddr {
		// Emptying the slots frees the sockets even while the attached program (and
		// so its maps) lives on in the kernel; then the program is detached.
		for i, ln := range s.addrs[addr] {
			if err := st.RemoveListener(s.domain[i], ln.Fd()); err != nil {
				s.log.Error("releasing a listener from BPF steering: " + err.Error())
			}
		}
		if lns := s.addrs[addr]; len(lns) > 0 {
			steer.Detach(lns[0].Fd())
		}
	}
	s.steer.close()
	s.steer.perAddr = map[netip.AddrPort]*steer.Steering{}
}

// RestoreSteering steers the listeners again after ReleaseSteering.
func (s *loopSet) RestoreSteering() {
	if s.steer == nil {
		return
	}
	for addr, lns := range s.addrs {
		var fds []listenerFD
		for i, ln := range lns {
			fds = append(fds, listenerFD{fd: ln.Fd(), domain: s.domain[i], cpu: s.loops[i].CPU()})
		}
		s.steer.add(addr, fds)
	}
}

// listenOptionsOf is the socket options of the listen directive that sets them for
// addr (the configuration allows one).
func listenOptionsOf(cfg *conf.Config, addr netip.AddrPort) eventloop.ListenOptions {
	for _, srv := range cfg.HTTP.Servers {
		for _, l := range srv.Listens {
			if l.Addr != addr || l.Socket == (conf.SocketOptions{}) {
				continue
			}
			o := l.Socket
			lo := eventloop.ListenOptions{Backlog: o.Backlog, RcvBuf: o.RcvBuf, SndBuf: o.SndBuf, KeepAlive: o.KeepAlive,
				KeepIdle: o.KeepIdle, KeepIntvl: o.KeepIntvl, KeepCnt: o.KeepCnt, FastOpen: o.FastOpen}
			if o.DeferAccept {
				// nginx's value: how long a connection waited in the queue cannot be
				// known, so the wait is the shortest the kernel has.
				lo.DeferAccept = 1
			}
			return lo
		}
	}
	return eventloop.ListenOptions{}
}

// Reload switches every worker to snap, opens listeners for new addresses and
// retires those of addresses snap no longer has. When cfg asks for other loops, a
// new set of loops takes over the same addresses and the old set drains.
func (s *Server) Reload(cfg *conf.Config, snap *httpcore.Snapshot) error {
	err := s.reload(cfg, snap)
	loaded := time.Now()
	if err != nil {
		s.reloadFailures.Add(1)
		loaded = s.Monitor().Loaded
	} else {
		s.reloads.Add(1)
	}
	s.publish(loaded) // a failed reload may have opened listeners
	return err
}

func (s *Server) reload(cfg *conf.Config, snap *httpcore.Snapshot) error {
	plan, cpus, err := layout(cfg, s.opts)
	if err != nil {
		return err
	}
	if plan.String() != s.plan.String() || !slices.Equal(cpus, s.cpus) {
		return s.rollover(cfg, snap, plan, cpus)
	}
	return s.loopSet.reload(cfg, snap)
}

func (s *loopSet) reload(cfg *conf.Config, snap *httpcore.Snapshot) error {
	// Before the new listeners: the loops take the new router first (their task
	// queues keep the order), so a new ssl address is never served in the clear.
	s.router = newTLSRouter(snap, s.router)
	s.setRouter(s.router)
	if err := s.listen(cfg, snap, nil); err != nil {
		return err
	}
	for _, w := range s.workers {
		if err := w.Reload(snap); err != nil {
			return err
		}
	}
	for addr := range s.addrs {
		if snap.Routes.Addr(addr) == nil || snap.Routes.Addr(addr).Addr != addr {
			s.retire(addr)
		}
	}
	return nil
}

// rollover starts the loops cfg asks for beside the current ones, on the same
// addresses (new sockets join each SO_REUSEPORT group and the new program takes the
// group over), then retires the old loops: their listeners take what is queued and
// close (what races in migrates), and they drain within worker_shutdown_timeout.
func (s *Server) rollover(cfg *conf.Config, snap *httpcore.Snapshot, plan *domains.Plan, cpus []int) error {
	var reuse []*pool.Domain
	if plan.String() == s.plan.String() {
		reuse = s.pools // same domains: the arenas carry over
	}
	ns, err := newLoopSet(cfg, snap, plan, cpus, reuse, nil, s.log)
	if err != nil {
		return err
	}
	old := s.loopSet
	if reuse != nil {
		old.pools = nil // now the new set's
	}
	for _, w := range old.workers {
		w.Reload(snap) // what the old loops still accept is served with the new configuration
	}
	old.setRouter(newTLSRouter(snap, old.router))
	s.loopSet = ns
	s.mu.Lock()
	s.old[old] = true
	s.mu.Unlock()
	s.rolling.Add(1)
	go func() {
		defer s.rolling.Done()
		old.retireAll(cfg.Main.WorkerShutdownTimeout)
		s.mu.Lock()
		delete(s.old, old)
		s.mu.Unlock()
	}()
	s.log.Log(nil, errorlog.LevelNotice, fmt.Sprintf("loops rolled over: %d loops on CPUs %v, %s", len(cpus), cpus, plan))
	return nil
}

// retireAll takes a replaced set of loops away: out of its programs' socket arrays,
// listeners emptied and closed, connections drained, then pools and programs freed.
func (s *loopSet) retireAll(timeout time.Duration) {
	for addr, st := range s.steer.perAddr {
		for i, ln := range s.addrs[addr] {
			st.RemoveListener(s.domain[i], ln.Fd())
		}
	}
	for _, lns := range s.addrs {
		for i, ln := range lns {
			if err := s.loops[i].RemoveListener(ln); err != nil && !errors.Is(err, eventloop.ErrLoopClosed) {
				s.log.Error("closing a listener of retired loops: " + err.Error())
			}
		}
	}
	s.addrs = map[netip.AddrPort][]*eventloop.Listener{}
	s.drain(timeout)
}

// retireGrace is how long a removed address keeps accepting after it started
// refusing new connections: handshakes already under way complete into the accept
// queue within a round trip, and are served rather than reset.
var retireGrace = time.Second

// retireMaxWait bounds how long a removed address waits for busy loops (at
// worker_connections) to take what is queued on it.
var retireMaxWait = 60 * time.Second

// retire takes an address's listeners away without resetting anything queued on
// them: the program refuses new connections; the loops keep accepting until the
// grace period is over and the accept queues are empty; then each listener takes
// what is left and closes. Without the program (no BPF) nothing stops new
// connections, so the listeners close as soon as their queues are empty, and one
// completing in between may be reset.
func (s *loopSet) retire(addr netip.AddrPort) {
	lns := s.addrs[addr]
	delete(s.addrs, addr)
	var st *steer.Steering
	if s.steer != nil {
		st = s.steer.perAddr[addr]
		delete(s.steer.perAddr, addr)
	}
	grace := time.Duration(0)
	if st != nil {
		if err := st.Refuse(true); err != nil {
			s.log.Error("refusing new connections on " + addr.String() + ": " + err.Error())
		} else {
			grace = retireGrace
		}
	}
	s.retiring.Add(1)
	go func() {
		defer s.retiring.Done()
		start := time.Now()
		for time.Since(start) < retireMaxWait && (time.Since(start) < grace || queued(lns) > 0) {
			time.Sleep(20 * time.Millisecond)
		}
		for i, ln := range lns {
			if err := s.loops[i].RemoveListener(ln); err != nil && !errors.Is(err, eventloop.ErrLoopClosed) {
				s.log.Error("closing a listener of " + addr.String() + ": " + err.Error())
			}
		}
		if st != nil {
			st.Close()
		}
		s.log.Log(nil, errorlog.LevelNotice, "stopped listening", "listen", addr.String())
	}()
}

// queued is how many connections wait in the listeners' accept queues (TCP_INFO's
// unacked field holds a listener's accept queue length).
func queued(lns []*eventloop.Listener) int {
	n := 0
	for _, ln := range lns {
		if info, err := unix.GetsockoptTCPInfo(ln.Fd(), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n += int(info.Unacked)
		}
	}
	return n
}

// Drain stops accepting, lets requests in flight finish and closes idle
// connections; after timeout (0: none) what is left is closed.
func (s *Server) Drain(timeout time.Duration) {
	s.loopSet.drain(timeout)
	s.rolling.Wait()
}

func (s *loopSet) drain(timeout time.Duration) {
	deadline := time.Now().Add(100 * 365 * 24 * time.Hour)
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for _, l := range s.loops {
		if err := l.Drain(deadline); err != nil && !errors.Is(err, eventloop.ErrLoopClosed) {
			s.log.Error("drain: " + err.Error())
		}
	}
	s.wait()
	s.close()
}

// Stop closes everything now, retiring loops included.
func (s *Server) Stop() {
	s.mu.Lock()
	for old := range s.old {
		for _, l := range old.loops {
			l.Stop()
		}
	}
	s.mu.Unlock()
	s.loopSet.stop()
	s.rolling.Wait()
}

func (s *loopSet) stop() {
	for _, l := range s.loops {
		l.Stop()
	}
	s.wait()
	s.close()
}

// close releases what outlives the loops: the steering programs and the pools.
func (s *loopSet) close() {
	logTLSStats(s.log, s.tlsStats)
	s.tlsStats = nil
	if s.steer != nil {
		s.steer.logStats()
		s.steer.close()
		s.steer = nil
	}
	// The loops have exited: their free lists go back, then the arenas are unmapped.
	for _, l := range s.locals {
		l.Close()
	}
	s.locals = nil
	for _, p := range s.pools {
		if err := p.Close(); err != nil {
			s.log.Error("closing a buffer pool: " + err.Error())
		}
	}
	s.pools = nil
}

// setRouter gives every loop's TLS layer r, on the loop.
func (s *loopSet) setRouter(r *tlsRouter) {
	for i, l := range s.loops {
		layer, gate := s.layers[i], s.gates[i]
		if err := l.Run(func() { layer.SetRouter(r); gate.r = r }); err != nil && !errors.Is(err, eventloop.ErrLoopClosed) {
			s.log.Error("TLS configuration of a loop: " + err.Error())
		}
	}
}

// Loops returns the server's current loops.
func (s *Server) Loops() []*eventloop.Loop { return s.loops }

// Plan returns the NUMA domains the server runs with.
func (s *Server) Plan() *domains.Plan { return s.plan }

// LogStats writes the per-domain steering counters to the error log.
func (s *Server) LogStats() {
	if s.steer != nil {
		s.steer.logStats()
	}
}

func (s *loopSet) wait() {
	for _, l := range s.loops {
		<-l.Done()
	}
	s.retiring.Wait()
}
