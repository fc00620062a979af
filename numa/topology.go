package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultSysfsRoot is where the kernel's sysfs is mounted.
const DefaultSysfsRoot = "/sys"

// Node is one NUMA memory domain and the CPUs local to it.
type Node struct {
	ID   int
	CPUs CPUSet
	// Distance[i] is the ACPI SLIT distance to the i-th online node (10 is local);
	// nil when sysfs does not say.
	Distance []int
	// MemTotal is the node's memory in bytes; 0 when sysfs does not say (or the node
	// has CPUs only).
	MemTotal int64
}

// Topology lists the online NUMA nodes in ascending ID order.
type Topology struct {
	Nodes []Node
}

// ReadTopology reads the online nodes and each node's CPU list from a sysfs
// tree rooted at root (DefaultSysfsRoot on a live system; a t.TempDir() tree in
// tests). A kernel built without NUMA has no node directory: the result is
// then one node 0 holding every online CPU.
func ReadTopology(root string) (*Topology, error) {
	nodeDir := filepath.Join(root, "devices/system/node")
	online, err := readCPUListFile(filepath.Join(nodeDir, "online"))
	if errors.Is(err, fs.ErrNotExist) {
		cpus, err := readCPUListFile(filepath.Join(root, "devices/system/cpu/online"))
		if err != nil {
			return nil, fmt.Errorf("topology: %w", err)
		}
		return &Topology{Nodes: []Node{{ID: 0, CPUs: cpus}}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	t := &Topology{}
	// Node IDs use the same list syntax as CPU lists.
	for _, id := range online.CPUs() {
		cpus, err := readCPUListFile(filepath.Join(nodeDir, "node"+strconv.Itoa(id), "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("topology node %d: %w", id, err)
		}
		n := Node{ID: id, CPUs: cpus}
		n.Distance = readDistances(filepath.Join(nodeDir, "node"+strconv.Itoa(id), "distance"))
		n.MemTotal = readMemTotal(filepath.Join(nodeDir, "node"+strconv.Itoa(id), "meminfo"))
		t.Nodes = append(t.Nodes, n)
	}
	if len(t.Nodes) == 0 {
		return nil, fmt.Errorf("topology: no online node in %s", nodeDir)
	}
	return t, nil
}

// NodeOf returns the node whose CPU list holds cpu, or -1 if none does.
func (t *Topology) NodeOf(cpu int) int {
	for _, n := range t.Nodes {
		if n.CPUs.Has(cpu) {
			return n.ID
		}
	}
	return -1
}

// CPUs returns every CPU of every node.
func (t *Topology) CPUs() CPUSet {
	var s CPUSet
	for _, n := range t.Nodes {
		s = s.Or(n.CPUs)
	}
	return s
}

func readCPUListFile(path string) (CPUSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return CPUSet{}, err
	}
	s, err := ParseCPUList(strings.TrimSpace(string(data)))
	if err != nil {
		return CPUSet{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// readDistances reads a node's "distance" file: one number per online node.
func readDistances(path string) []int {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		d, err := strconv.Atoi(f)
		if err != nil {
			return nil
		}
		out = append(out, d)
	}
	return out
}

// readMemTotal reads "Node N MemTotal: X kB" from a node's meminfo.
func readMemTotal(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[3], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
