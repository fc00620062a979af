package numa

import "testing"

func TestReadTopologyFakeTwoNodes(t *testing.T) {
	root := writeTree(t, map[string]string{
		"devices/system/node/online":         "0-1\n",
		"devices/system/node/node0/cpulist":  "0-1,4\n",
		"devices/system/node/node1/cpulist":  "2-3,5\n",
		"devices/system/node/node2/cpulist":  "6\n", // offline: not listed in online
		"devices/system/node/node0/distance": "10 21\n",
		"devices/system/node/node1/distance": "21 10\n",
		"devices/system/node/node1/meminfo":  "Node 1 MemTotal:        1048576 kB\nNode 1 MemFree:          524288 kB\n",
	})
	top, err := ReadTopology(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Nodes) != 2 || top.Nodes[0].CPUs.String() != "0-1,4" || top.Nodes[1].CPUs.String() != "2-3,5" {
		t.Fatalf("topology = %+v", top.Nodes)
	}
	for cpu, want := range map[int]int{0: 0, 4: 0, 2: 1, 5: 1, 6: -1} {
		if got := top.NodeOf(cpu); got != want {
			t.Errorf("NodeOf(%d) = %d, want %d", cpu, got, want)
		}
	}
	if got := top.CPUs().String(); got != "0-5" {
		t.Errorf("CPUs = %s", got)
	}
	if d := top.Nodes[1].Distance; len(d) != 2 || d[0] != 21 || d[1] != 10 {
		t.Errorf("node 1 distances = %v", d)
	}
	if top.Nodes[1].MemTotal != 1<<30 || top.Nodes[0].MemTotal != 0 {
		t.Errorf("memory = %d, %d", top.Nodes[0].MemTotal, top.Nodes[1].MemTotal)
	}
}

func TestReadTopologyFakeNoNUMA(t *testing.T) {
	root := writeTree(t, map[string]string{"devices/system/cpu/online": "0-3\n"})
	top, err := ReadTopology(root)
	if err != nil || len(top.Nodes) != 1 || top.Nodes[0].ID != 0 || top.Nodes[0].CPUs.String() != "0-3" {
		t.Fatalf("topology = %+v, %v", top, err)
	}
}

func TestReadTopologyFakeBroken(t *testing.T) {
	root := writeTree(t, map[string]string{"devices/system/node/online": "0-1\n", "devices/system/node/node0/cpulist": "0\n"})
	if _, err := ReadTopology(root); err == nil {
		t.Fatal("missing node1/cpulist accepted")
	}
}

func TestReadTopologyLive(t *testing.T) {
	top, err := ReadTopology(DefaultSysfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if allowed.And(top.CPUs()) != allowed {
		t.Errorf("allowed %s not within topology %s", allowed, top.CPUs())
	}
	t.Logf("live topology: %+v", top.Nodes)
}
