package numa

import (
	"fmt"
)

// startAffinity is the scheduler affinity the process started with, read
// during package initialisation, which runs on the main thread before any
// event loop pins a thread (a loop's locked goroutine may be running on the
// main thread, so its mask later says nothing about the process). This is
// also what runtime.NumCPU reports.
var startAffinity, startAffinityErr = ThreadAffinity(0)

// AllowedCPUs returns the CPUs this process may run on: the scheduler
// affinity it started with intersected with the cgroup cpuset. This is the
// count `worker_processes auto` means. A cgroup whose cpuset cannot be read
// does not restrict the result.
func AllowedCPUs() (CPUSet, error) {
	if startAffinityErr != nil {
		return CPUSet{}, startAffinityErr
	}
	cg, ok, err := CgroupCPUs("/")
	if err != nil || !ok {
		// No readable cpuset: the affinity mask alone decides.
		return startAffinity, nil
	}
	allowed := startAffinity.And(cg)
	if allowed.IsEmpty() {
		return CPUSet{}, fmt.Errorf("allowed cpus: affinity %s and cgroup cpuset %s do not intersect", startAffinity, cg)
	}
	return allowed, nil
}
