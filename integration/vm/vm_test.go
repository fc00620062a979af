package vm

import (
	"context"
	"fmt"
	"os"
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
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "x"), []byte("extra file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// One boot: the probe, then busybox checking the harness's plumbing (module
	// loading, environment, extra files, working directory, exit code relay).
	res, err := Run(ctx, Config{
		Binary: probe, Args: []string{"-nodes", "2", "-cpus-per-node", "2"},
		Programs: []Program{{
			Binary: "/bin/busybox", Env: []string{"B=two words"}, Dir: "/work",
			Args: []string{"sh", "-c", `echo "tls $(cat /sys/module/tls/initstate)"; echo "env $NUMAPROXY_IN_VM $B"; cat /data/x; echo "cwd $(pwd)"; exit 3`},
		}},
		Nodes: 2, CPUsPerNode: 2, MemPerNodeMB: 512, Timeout: 3 * time.Minute,
		Env:        []string{"NUMAPROXY_IN_VM=1"},
		ExtraFiles: map[string]string{"/data": data},
		Modules:    []string{"tls"},
	})
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, res.Output)
	}
	t.Logf("accelerator %s (%s); guest /init at %v, boot+probe+poweroff %v, probe ran %v",
		res.Accel, AccelReason(), res.BootTime.Round(10*time.Millisecond),
		res.Duration.Round(10*time.Millisecond), res.Programs[0].Duration.Round(10*time.Millisecond))
	if len(res.Programs) != 2 {
		t.Fatalf("%d program results, want 2", len(res.Programs))
	}
	if got, want := string(res.Programs[1].Output), "tls live\nenv 1 two words\nextra file\ncwd /work\n"; got != want || res.Programs[1].ExitCode != 3 {
		t.Errorf("plumbing program: exit code %d, output %q; want 3, %q", res.Programs[1].ExitCode, got, want)
	}
	out := string(res.Programs[0].Output)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		t.Log(l)
	}
	if res.Programs[0].ExitCode != 0 {
		t.Errorf("probe exit code %d", res.Programs[0].ExitCode)
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
