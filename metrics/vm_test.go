package metrics

// The locality figures on a real two-node machine: they run only inside the QEMU
// guest of integration/vm (NUMAPROXY_IN_VM=1; node 0 = CPUs 0-1, node 1 = CPUs
// 2-3): go run ./integration/vm/cmd/numa-vm -run InVM ./metrics

import (
	"io"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/numaproxy/numaproxy/numa"
	steer "github.com/numaproxy/numaproxy/numa/steering"
)

// collected gathers c through a registry, as a scrape does.
func collected(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// total adds the values of the series of name whose labels include want.
func total(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	sum := 0.0
	for _, m := range fams[name].GetMetric() {
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == want[i] && l.GetValue() == want[i+1]
			}
			ok = ok && found
		}
		if ok {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// TestLocalityInVM: clients on node 1's CPUs with the steering program attached are
// served on their arrival domain (near 0% crossed); with the program detached the
// kernel's hash sends about half of them to node 0's loops, and the figure says so.
func TestLocalityInVM(t *testing.T) {
	if os.Getenv("NUMAPROXY_IN_VM") != "1" {
		t.Skip("needs the two-node QEMU guest (NUMAPROXY_IN_VM=1)")
	}
	s, addr := startServerMain(t, "numa on;\nworker_processes auto;\n", `server { listen ADDR; location = /m { metrics; } location / { return 200 "ok"; } }`)
	const n = 100
	ask := func() {
		for _, cpu := range []int{2, 3} {
			err := numa.OnCPU(cpu, func() error {
				for range n {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						return err
					}
					io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
					_, err = io.ReadAll(c)
					c.Close()
					if err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	figures := func() (crossed, sampled float64, fams map[string]*dto.MetricFamily) {
		fams = collected(t, newCollector(s))
		return total(fams, "numaproxy_numa_connections_cross_domain_total"), total(fams, "numaproxy_numa_connections_sampled_total"), fams
	}

	ask()
	crossed, sampled, fams := figures()
	t.Logf("steered: %v of %v connections crossed domains", crossed, sampled)
	if sampled != 2*n || crossed > 2*n/50 {
		t.Errorf("steered: %v of %v connections crossed, want at most 2%% of %d", crossed, sampled, 2*n)
	}
	if got := total(fams, "numaproxy_steering_attached"); got != 1 {
		t.Errorf("steering_attached %v", got)
	}
	if got := total(fams, "numaproxy_pool_bound", "domain", "1", "node", "1"); got != 1 {
		t.Errorf("domain 1's pool not bound to node 1: %v", got)
	}
	for _, node := range []string{"0", "1"} {
		if got := total(fams, "numaproxy_process_memory_node_bytes", "node", node); got <= 0 {
			t.Errorf("no process memory on node %s", node)
		}
	}

	fds := s.ListenerFDs()[netip.MustParseAddrPort(addr)]
	if err := steer.Detach(fds[0]); err != nil {
		t.Fatal(err)
	}
	ask()
	crossed2, sampled2, _ := figures()
	share := (crossed2 - crossed) / (sampled2 - sampled)
	t.Logf("detached: %v of %v connections crossed domains (%.0f%%)", crossed2-crossed, sampled2-sampled, 100*share)
	if sampled2-sampled != 2*n || share < 0.25 || share > 0.75 {
		t.Errorf("detached: %.2f of %v connections crossed, want about half", share, sampled2-sampled)
	}
}
