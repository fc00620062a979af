package metrics

import (
	"bufio"
	"bytes"
	"os"
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
	if nodes, err := readNUMAMaps("/proc/self/numa_maps"); err == nil {
		for node, b := range nodes {
			gauge(ch, descProcessNodeBytes, float64(b), itoa(node))
		}
	}
}

// readNUMAMaps sums the pages of every mapping of a numa_maps file per node
// ("N<node>=<pages>", each mapping's pages being kernelpagesize_kB large).
func readNUMAMaps(path string) (map[int]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	nodes := map[int]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		pageSize := int64(4096)
		var counts []struct{ node, pages int64 }
		for _, f := range strings.Fields(sc.Text()) {
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
		}
	}
	return nodes, sc.Err()
}
