package numa

import (
	"fmt"
	"runtime"

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

// OnCPU runs fn on a new OS thread pinned to cpu and waits for it: what fn does
// (a connect, say) happens on that CPU. The thread is never handed back to the Go
// scheduler, so no other goroutine inherits its pinning.
func OnCPU(cpu int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
		if err := PinThread(cpu); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	return <-done
}
