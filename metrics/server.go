package metrics

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/numaproxy/numaproxy/proxy"
)

// upFigures sum one upstream server's figures over a domain's loops.
type upFigures struct{ proxy.PeerStats }

func (u *upFigures) add(o *proxy.PeerStats) {
	u.Tries += o.Tries
	u.Reused += o.Reused
	u.ConnectFailures += o.ConnectFailures
	u.Failures += o.Failures
	u.Retries += o.Retries
	for i := range u.Responses {
		u.Responses[i] += o.Responses[i]
	}
	u.ResponseTime.Add(&o.ResponseTime)
}

// collectServer reports what the server holds beside the loops: reloads, the plan,
// the pools, the steering programs, and the process's memory per node. It reads
// counters other goroutines write with atomics, BPF maps (a syscall each) and a
// /proc file: all here, on the scrape's goroutine, never on a loop.
func (c *collector) collectServer(ch chan<- prometheus.Metric) {
	m := c.m
	if m == nil {
		return
	}
	counter(ch, descReloads, m.Reloads.Load(), "ok")
	counter(ch, descReloads, m.ReloadFailures.Load(), "failed")
	gauge(ch, descLoaded, float64(m.Loaded.UnixNano())/1e9)
	numa := 0.0
	if m.Plan.Enabled {
		numa = 1
	}
	gauge(ch, descNUMA, numa)
	loops := map[int]int{}
	for _, l := range m.Loops {
		loops[l.Domain]++
	}
	for _, d := range m.Plan.Domains {
		gauge(ch, descDomainInfo, 1, itoa(d.ID), itoa(d.Node), itoa(loops[d.ID]))
	}
	for _, p := range m.Pools {
		s := p.Stats()
		d, n := itoa(s.Domain), itoa(s.Node)
		var inUse int64
		for _, cl := range s.Classes {
			inUse += cl.InUse * int64(cl.Size)
		}
		gauge(ch, descPoolMapped, float64(s.MappedBytes), d, n)
		gauge(ch, descPoolInUse, float64(inUse), d, n)
		counter(ch, descPoolReleased, uint64(s.ReleasedBytes), d, n)
		bound := 0.0
		if s.Bound {
			bound = 1
		}
		gauge(ch, descPoolBound, bound, d, n)
		counter(ch, descPoolHeap, uint64(s.HeapGets), d, n)
	}
	for _, st := range m.Steering {
		listen := st.Addr.String()
		ds, err := st.Steering.Stats()
		if err != nil {
			continue // closed by a reload since the view was made
		}
		gauge(ch, descSteerAttached, 1, listen)
		for _, d := range ds {
			dom := itoa(d.Domain)
			counter(ch, descSteerPackets, d.Selected, listen, dom, "selected")
			counter(ch, descSteerPackets, d.Fallback, listen, dom, "fallback")
			counter(ch, descSteerPackets, d.Migrated, listen, dom, "migrated")
			counter(ch, descSteerPackets, d.MigrateFallback, listen, dom, "migrate_fallback")
		}
		for _, node := range st.Steering.ConntrackNodes() {
			if n, err := st.Steering.ClientCount(node); err == nil {
				gauge(ch, descConntrack, float64(n), listen, itoa(node))
			}
		}
	}
	arenas := make([][2]uintptr, len(m.Pools))
	for i, p := range m.Pools {
		arenas[i][0], arenas[i][1] = p.Arena()
	}
	if nodes, inArena, err := readNUMAMaps("/proc/self/numa_maps", arenas); err == nil {
		for node, b := range nodes {
			gauge(ch, descProcessNodeBytes, float64(b), itoa(node))
		}
		for i, p := range m.Pools {
			d, n := itoa(p.ID()), itoa(p.Node())
			for node, b := range inArena[i] {
				gauge(ch, descPoolResident, float64(b), d, n, itoa(node))
			}
		}
	}
	if stats, err := readNumastat("/sys/devices/system/node"); err == nil {
		for node, st := range stats {
			for _, s := range st {
				counter(ch, descNodeAllocs, s.pages, itoa(node), s.name)
			}
		}
	}
}

// readNUMAMaps sums the pages of every mapping of a numa_maps file per node
// ("N<node>=<pages>", each mapping's pages being kernelpagesize_kB large), over
// all mappings and over the mappings starting in each of arenas ([start, end)).
func readNUMAMaps(path string, arenas [][2]uintptr) (nodes map[int]int64, inArena []map[int]int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	nodes = map[int]int64{}
	inArena = make([]map[int]int64, len(arenas))
	for i := range inArena {
		inArena[i] = map[int]int64{}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		pageSize := int64(4096)
		var counts []struct{ node, pages int64 }
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		// An arena is one mapping, split into several by mprotect: each part
		// starts inside it.
		arena := -1
		if start, err := strconv.ParseUint(fields[0], 16, 64); err == nil {
			for i, a := range arenas {
				if uintptr(start) >= a[0] && uintptr(start) < a[1] {
					arena = i
				}
			}
		}
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, "kernelpagesize_kB="); ok {
				if kb, err := strconv.ParseInt(v, 10, 64); err == nil {
					pageSize = kb << 10
				}
				continue
			}
			if len(f) < 3 || f[0] != 'N' {
				continue
			}
			k, v, ok := strings.Cut(f[1:], "=")
			if !ok {
				continue
			}
			node, err1 := strconv.ParseInt(k, 10, 32)
			pages, err2 := strconv.ParseInt(v, 10, 64)
			if err1 == nil && err2 == nil {
				counts = append(counts, struct{ node, pages int64 }{node, pages})
			}
		}
		for _, c := range counts {
			nodes[int(c.node)] += c.pages * pageSize
			if arena >= 0 {
				inArena[arena][int(c.node)] += c.pages * pageSize
			}
		}
	}
	return nodes, inArena, sc.Err()
}

// numastat is one line of a node's numastat file: a counter of pages allocated.
type numastat struct {
	name  string
	pages uint64
}

// readNumastat reads the kernel's page allocation counters of every node under
// dir (/sys/devices/system/node/node<N>/numastat: numa_hit, numa_miss, ...).
func readNumastat(dir string) (map[int][]numastat, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[int][]numastat{}
	for _, e := range ents {
		id, ok := strings.CutPrefix(e.Name(), "node")
		node, err := strconv.Atoi(id)
		if !ok || err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "numastat"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			name, v, ok := strings.Cut(line, " ")
			pages, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if ok && err == nil {
				out[node] = append(out[node], numastat{name, pages})
			}
		}
	}
	return out, nil
}
