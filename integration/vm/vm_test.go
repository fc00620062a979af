package vm

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProbeTwoNodes boots Debian's kernel with two NUMA nodes of two CPUs each and
// runs the probe: topology from sysfs, getcpu on pinned threads, mbind verified page
// by page with move_pages.
func TestProbeTwoNodes(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("QEMU not available: %v", err)
	}
	if testing.Short() {
		t.Skip("boots a VM (seconds under TCG); skipped with -short")
	}
	probe := filepath.Join(t.TempDir(), "probe")
	if err := BuildBinary("./probe", probe); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{
		Binary: probe, Args: []string{"-nodes", "2", "-cpus-per-node", "2"},
		Nodes: 2, CPUsPerNode: 2, MemPerNodeMB: 512, Timeout: 3 * time.Minute,
	})
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, res.Output)
	}
	t.Logf("accelerator %s (%s); guest /init at %v, boot+probe+poweroff %v, probe ran %v",
		res.Accel, AccelReason(), res.BootTime.Round(10*time.Millisecond),
		res.Duration.Round(10*time.Millisecond), res.Programs[0].Duration.Round(10*time.Millisecond))
	out := string(res.Output)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		t.Log(l)
	}
	if res.ExitCode != 0 {
		t.Errorf("probe exit code %d", res.ExitCode)
	}
	want := []string{
		"PASS nodes-online: 0-1",
		"PASS node0-cpus: 0-1",
		"PASS node1-cpus: 2-3",
		"PASS distance: node0=[10 20] node1=[20 10]",
		"PASS node0-mem: ",
		"PASS node1-mem: ",
		"PASS mbind-node0: 256/256 pages on node 0",
		"PASS mbind-node1: 256/256 pages on node 1",
	}
	for cpu := 0; cpu < 4; cpu++ {
		want = append(want, fmt.Sprintf("PASS getcpu-cpu%d: pinned to CPU %d, getcpu says cpu %d node %d", cpu, cpu, cpu, cpu/2))
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
}
