package server

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/numa/pool"
	steer "github.com/numaproxy/numaproxy/numa/steering"
	"github.com/numaproxy/numaproxy/tls"
)

// Monitor is the running data path as monitoring reads it: a new one is published by
// every start and reload and never changed after, so any goroutine may read it
// without a lock. What it points to is safe to query from any goroutine, also once
// closed: a loop that exited refuses tasks (eventloop.ErrLoopClosed), a closed
// steering program refuses Stats, a pool's counters stay readable.
type Monitor struct {
	Plan     *domains.Plan
	Loops    []MonitorLoop
	Pools    []*pool.Domain // per domain
	Steering []MonitorSteering
	// Started is when the server started; Loaded when the running configuration was.
	Started, Loaded time.Time
	// Reloads and ReloadFailures count the reloads since the start (NoteReloadFailure
	// adds the ones refused before they reached the server).
	Reloads, ReloadFailures *atomic.Uint64
}

// MonitorLoop is one loop of the current set.
type MonitorLoop struct {
	Index, CPU, Domain int
	Loop               *eventloop.Loop
	Worker             *httpcore.Worker
	TLS                *tls.Stats // the loop's own handshake counters
}

// MonitorSteering is the steering program of one listen address.
type MonitorSteering struct {
	Addr     netip.AddrPort
	Steering *steer.Steering
}

// Monitor is the current Monitor.
func (s *Server) Monitor() *Monitor { return s.monitor.Load() }

// NoteReloadFailure counts a reload whose configuration was refused before it
// reached the server (a syntax or semantic error).
func (s *Server) NoteReloadFailure() { s.reloadFailures.Add(1) }

// publish makes a new Monitor of the current loops.
func (s *Server) publish(loaded time.Time) {
	ls := s.loopSet
	m := &Monitor{Plan: ls.plan, Pools: ls.pools, Started: s.started, Loaded: loaded,
		Reloads: &s.reloads, ReloadFailures: &s.reloadFailures}
	for i, l := range ls.loops {
		m.Loops = append(m.Loops, MonitorLoop{Index: i, CPU: l.CPU(), Domain: ls.domain[i], Loop: l,
			Worker: ls.workers[i], TLS: ls.tlsStats[i]})
	}
	if ls.steer != nil {
		for addr, st := range ls.steer.perAddr {
			m.Steering = append(m.Steering, MonitorSteering{Addr: addr, Steering: st})
		}
	}
	s.monitor.Store(m)
}
