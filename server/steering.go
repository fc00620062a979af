package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/numa/mempolicy"
	steer "github.com/numaproxy/numaproxy/numa/steering"
)

// listenerFD is one loop's listener of an address.
type listenerFD struct {
	fd, domain, cpu int
}

// steering keeps one BPF program per listen address (each address is its own
// SO_REUSEPORT group), or, where BPF cannot run, SO_INCOMING_CPU on each listener.
type steering struct {
	plan     *domains.Plan
	perAddr  map[netip.AddrPort]*steer.Steering
	degraded bool // BPF unavailable: warned once
	log      *slog.Logger
	loops    int
}

func newSteering(plan *domains.Plan, loops int, log *slog.Logger) *steering {
	return &steering{plan: plan, perAddr: map[netip.AddrPort]*steer.Steering{}, log: log, loops: loops}
}

// config is the program's view of the plan.
func (st *steering) config() steer.Config {
	c := steer.Config{Domains: len(st.plan.Domains), MaxPerDomain: min(st.loops, steer.MaxPerDomain), CPUDomain: map[int]int{}}
	if !st.plan.Enabled {
		// One domain: the conntrack maps only serve the migrate path; keep them small.
		c.ConntrackEntries = 8192
	}
	for _, d := range st.plan.Domains {
		node := d.Node
		if node < 0 {
			node = 0
		}
		c.DomainNode = append(c.DomainNode, node)
		for _, cpu := range d.CPUs.CPUs() {
			c.CPUDomain[cpu] = d.ID
		}
	}
	return c
}

// add steers a new address's listeners to their domains.
func (st *steering) add(addr netip.AddrPort, fds []listenerFD) {
	if !st.degraded {
		s, err := steer.Load(st.config())
		if err == nil {
			for _, l := range fds {
				if err = s.AddListener(l.domain, l.fd); err != nil {
					break
				}
			}
			if err == nil {
				err = s.Attach(fds[0].fd)
			}
			if err == nil {
				st.perAddr[addr] = s
				return
			}
			s.Close()
		}
		switch {
		case !errors.Is(err, steer.ErrUnsupported):
			st.log.Error(fmt.Sprintf("BPF steering of %s failed: %v; falling back to SO_INCOMING_CPU", addr, err))
		case st.plan.Enabled:
			st.log.Warn(fmt.Sprintf("BPF steering is not available (%v): listeners use SO_INCOMING_CPU; connections may be served on another domain", err))
			st.degraded = true
		default:
			st.log.Warn(fmt.Sprintf("BPF is not available (%v): a listen address removed by a reload may reset connections queued on it", err))
			st.degraded = true
		}
	}
	if !st.plan.Enabled {
		return // one domain: no CPU to steer by
	}
	for _, l := range fds {
		if err := steer.SetIncomingCPU(l.fd, l.cpu); err != nil {
			st.log.Error(fmt.Sprintf("SO_INCOMING_CPU on a listener of %s: %v", addr, err))
		}
	}
}

// logStats writes each address's per-domain counters.
func (st *steering) logStats() {
	for addr, s := range st.perAddr {
		stats, err := s.Stats()
		if err != nil {
			st.log.Error("reading steering stats: " + err.Error())
			continue
		}
		for _, d := range stats {
			if d.Selected+d.Fallback+d.Migrated+d.MigrateFallback == 0 {
				continue
			}
			st.log.Log(nil, errorlog.LevelNotice, "numa steering", "listen", addr.String(), "domain", d.Domain,
				"selected", d.Selected, "fallback", d.Fallback, "migrated", d.Migrated, "migrate_fallback", d.MigrateFallback)
		}
	}
}

func (st *steering) close() {
	for _, s := range st.perAddr {
		s.Close()
	}
}

// memoryPolicyHook makes a loop's own allocations prefer its domain's node: it runs
// on the loop's locked, pinned thread before it polls.
func memoryPolicyHook(node int, log *slog.Logger) func(*eventloop.Loop) error {
	return func(l *eventloop.Loop) error {
		if node < 0 {
			return nil
		}
		if err := mempolicy.SetThreadPolicy(mempolicy.Preferred, mempolicy.NewNodeMask(node)); err != nil {
			log.Warn("set_mempolicy on a loop thread failed; its memory goes where it is first touched",
				"cpu", l.CPU(), "node", node, "error", err.Error())
		}
		return nil
	}
}
