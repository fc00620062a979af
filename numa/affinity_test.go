package numa

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinThreadReadBack(t *testing.T) {
	allowed, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range allowed.CPUs() {
		done := make(chan error)
		go func() {
			// The goroutine exits locked: the runtime then ends the thread,
			// so no pinned thread goes back to the pool.
			runtime.LockOSThread()
			if err := PinThread(cpu); err != nil {
				done <- err
				return
			}
			got, err := ThreadAffinity(unix.Gettid())
			if err == nil && got != NewCPUSet(cpu) {
				t.Errorf("thread pinned to %d reads back %s", cpu, got)
			}
			var set unix.CPUSet
			_ = unix.SchedGetaffinity(0, &set)
			if set.Count() != 1 || !set.IsSet(cpu) {
				t.Errorf("kernel says %v for cpu %d", set, cpu)
			}
			done <- err
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestPinThreadRejectsBadCPU(t *testing.T) {
	if err := PinThread(-1); err == nil {
		t.Error("PinThread(-1) succeeded")
	}
	if err := PinThread(MaxCPUs); err == nil {
		t.Error("PinThread(MaxCPUs) succeeded")
	}
}

func TestAllowedCPUsMatchesKernel(t *testing.T) {
	allowed, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	aff := startAffinity
	if aff.Count() != runtime.NumCPU() {
		t.Errorf("start affinity %s, runtime.NumCPU %d", aff, runtime.NumCPU())
	}
	if allowed.And(aff) != allowed || allowed.IsEmpty() {
		t.Errorf("allowed %s is not a non-empty subset of affinity %s", allowed, aff)
	}
	if cg, ok, err := CgroupCPUs("/"); err != nil {
		t.Fatal(err)
	} else if ok && allowed != aff.And(cg) {
		t.Errorf("allowed %s != affinity %s ∩ cgroup %s", allowed, aff, cg)
	}
}

func TestOnCPURunsPinned(t *testing.T) {
	allowed, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range allowed.CPUs() {
		var got CPUSet
		if err := OnCPU(cpu, func() error {
			got, err = ThreadAffinity(0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got.Count() != 1 || !got.Has(cpu) {
			t.Fatalf("fn ran with affinity %s, want only CPU %d", got, cpu)
		}
	}
	if err := OnCPU(MaxCPUs, func() error { return nil }); err == nil {
		t.Fatal("a CPU out of range accepted")
	}
}
