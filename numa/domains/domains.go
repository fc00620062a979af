// Package domains decides the NUMA domains numaproxy runs with: which CPUs form each
// domain and which memory node its buffers live on. It declares the numa and
// numa_domains directives; the server groups its loops, listeners and pools by the
// Plan it returns.
package domains

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/numa"
)

// Module declares the directives.
var Module = &conf.Module{
	Name: "numa",
	Directives: []conf.Directive{
		{Name: "numa", Contexts: conf.MainCtx, Args: conf.Args1, Set: setMode,
			Syntax: "numa auto | on | off;", Default: "auto",
			Doc: "Per-domain loops, BPF-steered listeners and node-bound buffers. auto: on when there is more than one domain."},
		{Name: "numa_domains", Contexts: conf.MainCtx, Args: conf.Args1More, Set: setDomains,
			Syntax: "numa_domains auto | cpulist ...;", Default: "auto",
			Doc: "The domains: auto takes the NUMA nodes from sysfs; otherwise one CPU list per domain (\"0-7,16-23 8-15,24-31\"), which also splits a one-node machine."},
		{Name: "worker_cpu_affinity", Contexts: conf.MainCtx, Args: conf.Args1More, Set: setCPUAffinity,
			Syntax: "worker_cpu_affinity cpumask ... | auto [cpumask];",
			Doc:    "Binds loops to CPUs: one binary mask per loop (rightmost digit is CPU 0), or auto (one CPU each, optionally within a mask)."},
	},
	NewMain: func() any { return &Config{Mode: "auto"} },
}

// Config is what the directives say.
type Config struct {
	Mode    string        // auto, on, off
	Domains []numa.CPUSet // explicit numa_domains; nil for auto
	// CPUAffinity is worker_cpu_affinity as written ("auto", "auto MASK" or one
	// binary mask per loop), checked at load; numa.ParseCPUAffinity turns it into CPU
	// sets once the process knows which CPUs it may use. nil: not set.
	CPUAffinity []string
}

// ConfigOf returns cfg's NUMA settings.
func ConfigOf(cfg *conf.Config) *Config { return cfg.MainConf(Module).(*Config) }

func setMode(c *conf.Cursor, s *conf.Stmt) error {
	switch v := s.Args[0].Value; v {
	case "auto", "on", "off":
		c.MainConf().(*Config).Mode = v
		return nil
	}
	return s.InvalidValue(s.Args[0], `it must be "auto", "on" or "off"`)
}

func setDomains(c *conf.Cursor, s *conf.Stmt) error {
	cfg := c.MainConf().(*Config)
	if len(s.Args) == 1 && s.Args[0].Value == "auto" {
		cfg.Domains = nil
		return nil
	}
	var seen numa.CPUSet
	for _, a := range s.Args {
		set, err := numa.ParseCPUList(a.Value)
		if err != nil || set.IsEmpty() {
			return s.InvalidValue(a, "not a CPU list")
		}
		if !set.And(seen).IsEmpty() {
			return s.InvalidValue(a, "CPUs "+set.And(seen).String()+" are in two domains")
		}
		seen = seen.Or(set)
		cfg.Domains = append(cfg.Domains, set)
	}
	if len(cfg.Domains) > MaxDomains {
		return s.Errorf("at most %d domains", MaxDomains)
	}
	return nil
}

func setCPUAffinity(c *conf.Cursor, s *conf.Stmt) error {
	var args []string
	for _, a := range s.Args {
		args = append(args, a.Value)
	}
	if args[0] == "auto" && len(args) > 2 {
		return s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	// Check the masks now against every possible CPU; which CPUs are allowed is known
	// only when the loops start.
	var all numa.CPUSet
	for cpu := 0; cpu < numa.MaxCPUs; cpu++ {
		all.Set(cpu)
	}
	if _, err := numa.ParseCPUAffinity(args, 1, all); err != nil {
		bad := s.Args[len(s.Args)-1]
		for _, a := range s.Args {
			if strings.Contains(err.Error(), strconv.Quote(a.Value)) {
				bad = a
			}
		}
		return s.InvalidValue(bad, strings.TrimPrefix(err.Error(), "worker_cpu_affinity: "))
	}
	c.MainConf().(*Config).CPUAffinity = args
	return nil
}

// MaxDomains bounds the domains (the BPF program's tables are sized for it).
const MaxDomains = 16

// Domain is one NUMA domain as numaproxy runs it.
type Domain struct {
	ID   int
	CPUs numa.CPUSet // the CPUs of the domain this process may use
	Node int         // the memory node its buffers and maps go to; -1: no binding
}

// Plan is the domains of a running process.
type Plan struct {
	Enabled bool // per-domain steering and node-bound pools
	Domains []Domain
}

// Resolve makes the plan from the directives, the machine's topology and the CPUs
// the process may use.
func Resolve(c *Config, topo *numa.Topology, allowed numa.CPUSet) (*Plan, error) {
	if c.Mode == "off" {
		return &Plan{Domains: []Domain{{ID: 0, CPUs: allowed, Node: -1}}}, nil
	}
	p := &Plan{}
	if c.Domains != nil {
		for i, set := range c.Domains {
			mine := set.And(allowed)
			if mine.IsEmpty() {
				return nil, fmt.Errorf("numa_domains: domain %d (%s) has no CPU this process may use (%s)", i, set, allowed)
			}
			p.Domains = append(p.Domains, Domain{ID: i, CPUs: mine, Node: majorityNode(topo, mine)})
		}
	} else {
		for _, n := range topo.Nodes {
			if mine := n.CPUs.And(allowed); !mine.IsEmpty() {
				p.Domains = append(p.Domains, Domain{ID: len(p.Domains), CPUs: mine, Node: n.ID})
			}
		}
		if len(p.Domains) == 0 {
			p.Domains = []Domain{{ID: 0, CPUs: allowed, Node: -1}}
		}
	}
	p.Enabled = c.Mode == "on" || len(p.Domains) > 1
	if !p.Enabled {
		p.Domains = []Domain{{ID: 0, CPUs: allowed, Node: -1}}
	}
	return p, nil
}

// majorityNode is the node holding most of the CPUs (the lowest such node on a tie).
func majorityNode(topo *numa.Topology, cpus numa.CPUSet) int {
	best, bestCount := 0, -1
	for _, n := range topo.Nodes {
		if c := n.CPUs.And(cpus).Count(); c > bestCount {
			best, bestCount = n.ID, c
		}
	}
	return best
}

// DomainOf returns the domain of cpu, or -1.
func (p *Plan) DomainOf(cpu int) int {
	for _, d := range p.Domains {
		if d.CPUs.Has(cpu) {
			return d.ID
		}
	}
	return -1
}

// CPUs returns every CPU of the plan.
func (p *Plan) CPUs() numa.CPUSet {
	var s numa.CPUSet
	for _, d := range p.Domains {
		s = s.Or(d.CPUs)
	}
	return s
}

func (p *Plan) String() string {
	var parts []string
	for _, d := range p.Domains {
		parts = append(parts, fmt.Sprintf("domain %d: CPUs %s, node %d", d.ID, d.CPUs, d.Node))
	}
	state := "off"
	if p.Enabled {
		state = "on"
	}
	return "numa " + state + " (" + strings.Join(parts, "; ") + ")"
}
