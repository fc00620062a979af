package numa

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// CgroupCPUs returns the CPUs the process's cgroup cpuset allows: the v2
// cpuset.cpus.effective of the process's cgroup, or the v1 cpuset controller's
// cpuset.effective_cpus (cpuset.cpus on old kernels). ok is false when no
// cpuset applies (no cpuset controller mounted or no file on the path).
//
// root is the filesystem root the /proc and /sys paths are read under ("/" on
// a live system); tests pass a directory holding a fake tree.
func CgroupCPUs(root string) (set CPUSet, ok bool, err error) {
	membership, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return CPUSet{}, false, fmt.Errorf("cgroup membership: %w", err)
	}
	mountinfo, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return CPUSet{}, false, fmt.Errorf("cgroup mounts: %w", err)
	}
	mounts := parseCgroupMounts(string(mountinfo))
	groups := parseCgroupMembership(string(membership))

	// Prefer v1's cpuset controller when it is mounted: on hybrid systems the
	// v2 hierarchy then has no cpuset controller.
	if m, ok := mounts["cpuset"]; ok {
		if g, ok := groups["cpuset"]; ok {
			return readCpusetFile(root, m, g, "cpuset.effective_cpus", "cpuset.cpus")
		}
	}
	if m, ok := mounts[""]; ok {
		if g, ok := groups[""]; ok {
			return readCpusetFile(root, m, g, "cpuset.cpus.effective")
		}
	}
	return CPUSet{}, false, nil
}

// cgroupMount is where a hierarchy's root (as seen by this mount namespace) is mounted.
type cgroupMount struct {
	mountPoint string // e.g. /sys/fs/cgroup/cpuset
	root       string // the hierarchy path mounted there, "/" unless in a container
}

// parseCgroupMounts maps "cpuset" to the v1 cpuset mount and "" to the v2 mount.
func parseCgroupMounts(mountinfo string) map[string]cgroupMount {
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(strings.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		pre, post, found := strings.Cut(sc.Text(), " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{mountPoint: unescapeMountPath(f[4]), root: unescapeMountPath(f[3])}
		switch g[0] {
		case "cgroup2":
			if _, dup := out[""]; !dup {
				out[""] = m
			}
		case "cgroup":
			for opt := range strings.SplitSeq(g[2], ",") {
				if opt == "cpuset" {
					out["cpuset"] = m
				}
			}
		}
	}
	return out
}

// parseCgroupMembership maps "cpuset" (v1) and "" (v2) to the process's cgroup path.
func parseCgroupMembership(data string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(data, "\n") {
		// hierarchy-id:controller-list:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "cpuset" {
				out["cpuset"] = parts[2]
			}
		}
	}
	return out
}

// readCpusetFile reads the first existing file among names in the process's
// cgroup directory, walking up towards the mount root when the directory has
// none (a v2 cgroup without the cpuset controller inherits its parent's CPUs).
func readCpusetFile(root string, m cgroupMount, group string, names ...string) (CPUSet, bool, error) {
	rel := group
	if m.root != "/" {
		rel = strings.TrimPrefix(group, m.root)
	}
	for dir := path.Clean("/" + rel); ; dir = path.Dir(dir) {
		for _, name := range names {
			p := filepath.Join(root, m.mountPoint, dir, name)
			data, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return CPUSet{}, false, fmt.Errorf("cgroup cpuset: %w", err)
			}
			s, err := ParseCPUList(string(data))
			if err != nil {
				return CPUSet{}, false, fmt.Errorf("cgroup cpuset %s: %w", p, err)
			}
			return s, true, nil
		}
		if dir == "/" {
			return CPUSet{}, false, nil
		}
	}
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
