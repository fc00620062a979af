package domains

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/numa"
)

func load(t *testing.T, src string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: conf.MustRegistry(Module), Prefix: dir, File: file})
	if err != nil {
		return nil, err
	}
	return ConfigOf(cfg), nil
}

func set(t *testing.T, list string) numa.CPUSet {
	s, err := numa.ParseCPUList(list)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func twoNodes(t *testing.T) *numa.Topology {
	return &numa.Topology{Nodes: []numa.Node{{ID: 0, CPUs: set(t, "0-1")}, {ID: 1, CPUs: set(t, "2-3")}}}
}

func oneNode(t *testing.T) *numa.Topology {
	return &numa.Topology{Nodes: []numa.Node{{ID: 0, CPUs: set(t, "0-1")}}}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name, conf string
		topo       func(*testing.T) *numa.Topology
		allowed    string
		want       string
	}{
		{"auto on two nodes", "", twoNodes, "0-3", "numa on (domain 0: CPUs 0-1, node 0; domain 1: CPUs 2-3, node 1)"},
		{"auto on one node", "", oneNode, "0-1", "numa off (domain 0: CPUs 0-1, node -1)"},
		{"split one node", "numa_domains 0 1;", oneNode, "0-1", "numa on (domain 0: CPUs 0, node 0; domain 1: CPUs 1, node 0)"},
		{"forced on one node", "numa on;", oneNode, "0-1", "numa on (domain 0: CPUs 0-1, node 0)"},
		{"off", "numa off;", twoNodes, "0-3", "numa off (domain 0: CPUs 0-3, node -1)"},
		{"cpuset limits a node away", "", twoNodes, "0-1", "numa off (domain 0: CPUs 0-1, node -1)"},
		{"explicit across nodes", "numa_domains 0,2 1,3;", twoNodes, "0-3", "numa on (domain 0: CPUs 0,2, node 0; domain 1: CPUs 1,3, node 0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.conf)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Resolve(c, tt.topo(t), set(t, tt.allowed))
			if err != nil {
				t.Fatal(err)
			}
			if p.String() != tt.want {
				t.Fatalf("plan\n got %s\nwant %s", p, tt.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	c, err := load(t, "numa_domains 0 5;")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(c, oneNode(t), set(t, "0-1")); err == nil || !strings.Contains(err.Error(), "domain 1 (5) has no CPU") {
		t.Fatalf("err = %v", err)
	}
	for src, want := range map[string]string{
		"numa maybe;":           `invalid value "maybe" in "numa" directive`,
		"numa_domains 0-3 2;":   `CPUs 2 are in two domains`,
		"numa_domains x;":       `invalid value "x" in "numa_domains" directive, not a CPU list`,
		"events {\nnuma on;\n}": `"numa" directive is not allowed here`,
	} {
		if _, err := load(t, src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %s", src, err, want)
		}
	}
}

func TestDomainOf(t *testing.T) {
	c, _ := load(t, "numa_domains 0 1;")
	p, err := Resolve(c, oneNode(t), set(t, "0-1"))
	if err != nil {
		t.Fatal(err)
	}
	if p.DomainOf(0) != 0 || p.DomainOf(1) != 1 || p.DomainOf(7) != -1 || p.CPUs().String() != "0-1" {
		t.Fatalf("DomainOf/CPUs wrong: %s", p)
	}
}

func TestCPUAffinity(t *testing.T) {
	cfg, err := load(t, "worker_cpu_affinity 0001 0010 0100 1000;\n")
	if err != nil || strings.Join(cfg.CPUAffinity, " ") != "0001 0010 0100 1000" {
		t.Fatalf("affinity = %v, %v", cfg, err)
	}
	cfg, err = load(t, "worker_cpu_affinity auto 1010;\n")
	if err != nil || strings.Join(cfg.CPUAffinity, " ") != "auto 1010" {
		t.Fatalf("affinity = %v, %v", cfg, err)
	}
	if _, err := load(t, "worker_cpu_affinity 0102;\n"); err == nil || !strings.Contains(err.Error(), `invalid value "0102" in "worker_cpu_affinity" directive`) {
		t.Errorf("0102: %v", err)
	}
	for _, bad := range []string{"auto 1010 1", "0000", "auto 0120"} {
		if _, err := load(t, "worker_cpu_affinity "+bad+";\n"); err == nil {
			t.Errorf("worker_cpu_affinity %s accepted", bad)
		}
	}
}
