package numa

import (
	"os"
	"path/filepath"
	"testing"
)

// writeTree writes files (path → content) under a new temp dir: a fake /proc
// and cgroup filesystem, the only fake these tests use.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupCPUsFakeV2(t *testing.T) {
	root := writeTree(t, map[string]string{
		"proc/self/cgroup":                                               "0::/system.slice/proxy.service\n",
		"proc/self/mountinfo":                                            "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
		"sys/fs/cgroup/cpuset.cpus.effective":                            "0-7\n",
		"sys/fs/cgroup/system.slice/cpuset.cpus.effective":               "2-5\n",
		"sys/fs/cgroup/system.slice/proxy.service/cpuset.cpus.effective": "4-5,7\n",
	})
	s, ok, err := CgroupCPUs(root)
	if err != nil || !ok || s.String() != "4-5,7" {
		t.Fatalf("CgroupCPUs = %s, %v, %v; want 4-5,7", s, ok, err)
	}
	// A cgroup without the cpuset controller inherits its parent's CPUs.
	_ = os.Remove(filepath.Join(root, "sys/fs/cgroup/system.slice/proxy.service/cpuset.cpus.effective"))
	if s, ok, err = CgroupCPUs(root); err != nil || !ok || s.String() != "2-5" {
		t.Fatalf("CgroupCPUs without own file = %s, %v, %v; want 2-5", s, ok, err)
	}
}

func TestCgroupCPUsFakeV1InContainer(t *testing.T) {
	root := writeTree(t, map[string]string{
		"proc/self/cgroup": "3:cpuset,cpu:/docker/abc\n1:name=systemd:/\n0::/\n",
		// The container sees its own cgroup mounted at the hierarchy path /docker/abc.
		"proc/self/mountinfo": "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
			"34 31 0:31 /docker/abc /sys/fs/cgroup/cpu\\054cpuset rw - cgroup cgroup rw,cpu,cpuset\n",
		"sys/fs/cgroup/cpu,cpuset/cpuset.effective_cpus": "1,3\n",
	})
	s, ok, err := CgroupCPUs(root)
	if err != nil || !ok || s.String() != "1,3" {
		t.Fatalf("CgroupCPUs = %s, %v, %v; want 1,3", s, ok, err)
	}
}

func TestCgroupCPUsNoCpuset(t *testing.T) {
	root := writeTree(t, map[string]string{
		"proc/self/cgroup":    "4:memory:/x\n",
		"proc/self/mountinfo": "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
	})
	if s, ok, err := CgroupCPUs(root); err != nil || ok {
		t.Fatalf("CgroupCPUs = %s, %v, %v; want no cpuset", s, ok, err)
	}
}

func TestCgroupCPUsLive(t *testing.T) {
	s, ok, err := CgroupCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("live cgroup cpuset: %s (found %v)", s, ok)
}
