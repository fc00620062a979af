package numa

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// AllowedCPUs returns the CPUs this process may run on: the main thread's
// scheduler affinity intersected with the cgroup cpuset. This is the count
// `worker_processes auto` means. A cgroup whose cpuset cannot be read does not
// restrict the result.
func AllowedCPUs() (CPUSet, error) {
	// The main thread's mask (tid = pid), not the caller's: a pinned loop
	// thread asking must not see only its own CPU.
	aff, err := ThreadAffinity(unix.Getpid())
	if err != nil {
		return CPUSet{}, err
	}
	cg, ok, err := CgroupCPUs("/")
	if err != nil || !ok {
		// No readable cpuset: the affinity mask alone decides.
		return aff, nil
	}
	allowed := aff.And(cg)
	if allowed.IsEmpty() {
		return CPUSet{}, fmt.Errorf("allowed cpus: affinity %s and cgroup cpuset %s do not intersect", aff, cg)
	}
	return allowed, nil
}
