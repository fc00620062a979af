package numa

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// PinThread binds the calling OS thread to exactly one CPU. The caller must
// hold the thread with runtime.LockOSThread, or the Go scheduler may move the
// goroutine to another, unpinned thread.
func PinThread(cpu int) error {
	if cpu < 0 || cpu >= MaxCPUs {
		return fmt.Errorf("pin thread: cpu %d out of range", cpu)
	}
	set := unix.CPUSet(NewCPUSet(cpu))
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity cpu %d: %w", cpu, err)
	}
	return nil
}

// SetThreadAffinity binds thread tid (0 = the calling thread) to the CPUs in s.
func SetThreadAffinity(tid int, s CPUSet) error {
	set := unix.CPUSet(s)
	if err := unix.SchedSetaffinity(tid, &set); err != nil {
		return fmt.Errorf("sched_setaffinity tid %d: %w", tid, err)
	}
	return nil
}

// ThreadAffinity reads back the CPUs thread tid may run on (0 = the calling thread).
func ThreadAffinity(tid int) (CPUSet, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return CPUSet{}, fmt.Errorf("sched_getaffinity tid %d: %w", tid, err)
	}
	return CPUSet(set), nil
}
