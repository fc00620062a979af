package numa

import (
	"fmt"
	"strconv"
)

// WorkerCount resolves nginx's `worker_processes` argument: "auto" is the
// number of allowed CPUs, otherwise a positive integer.
func WorkerCount(arg string, allowed CPUSet) (int, error) {
	if arg == "auto" {
		if n := allowed.Count(); n > 0 {
			return n, nil
		}
		return 0, fmt.Errorf("worker_processes auto: no allowed cpu")
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("worker_processes %q: want \"auto\" or a positive number", arg)
	}
	return n, nil
}

// ParseCPUAffinity resolves nginx's `worker_cpu_affinity` arguments into one
// CPU set per worker:
//
//   - "auto": worker i gets the i-th allowed CPU, wrapping around when there
//     are more workers than CPUs;
//   - "auto MASK": the same, over the allowed CPUs that are also in MASK;
//   - "MASK MASK ...": one binary mask per worker, rightmost digit CPU 0; as in
//     nginx, workers beyond the last mask reuse the last mask.
//
// A mask's CPUs are restricted to allowed; a mask left with no CPU is an error.
func ParseCPUAffinity(args []string, workers int, allowed CPUSet) ([]CPUSet, error) {
	if workers <= 0 {
		return nil, fmt.Errorf("worker_cpu_affinity: %d workers", workers)
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("worker_cpu_affinity: no argument")
	}
	if args[0] == "auto" {
		if len(args) > 2 {
			return nil, fmt.Errorf("worker_cpu_affinity: \"auto\" takes at most one mask")
		}
		pool := allowed
		if len(args) == 2 {
			m, err := parseAffinityMask(args[1])
			if err != nil {
				return nil, err
			}
			pool = pool.And(m)
		}
		cpus := pool.CPUs()
		if len(cpus) == 0 {
			return nil, fmt.Errorf("worker_cpu_affinity auto: no allowed cpu (allowed %q)", allowed.String())
		}
		out := make([]CPUSet, workers)
		for i := range out {
			out[i] = NewCPUSet(cpus[i%len(cpus)])
		}
		return out, nil
	}
	masks := make([]CPUSet, len(args))
	for i, a := range args {
		m, err := parseAffinityMask(a)
		if err != nil {
			return nil, err
		}
		if masks[i] = m.And(allowed); masks[i].IsEmpty() {
			return nil, fmt.Errorf("worker_cpu_affinity: mask %q has no allowed cpu (allowed %q)", a, allowed.String())
		}
	}
	out := make([]CPUSet, workers)
	for i := range out {
		out[i] = masks[min(i, len(masks)-1)]
	}
	return out, nil
}

func parseAffinityMask(mask string) (CPUSet, error) {
	var s CPUSet
	if mask == "" || len(mask) > MaxCPUs {
		return s, fmt.Errorf("worker_cpu_affinity: bad mask %q", mask)
	}
	for i := range len(mask) {
		switch mask[len(mask)-1-i] {
		case '1':
			s.Set(i)
		case '0':
		default:
			return CPUSet{}, fmt.Errorf("worker_cpu_affinity: bad mask %q: only 0 and 1 allowed", mask)
		}
	}
	if s.IsEmpty() {
		return s, fmt.Errorf("worker_cpu_affinity: mask %q selects no cpu", mask)
	}
	return s, nil
}

// FirstCPUs picks the lowest CPU of each set: an event loop pins to exactly
// one CPU, so a multi-CPU nginx mask maps to its first CPU.
func FirstCPUs(sets []CPUSet) []int {
	out := make([]int, len(sets))
	for i, s := range sets {
		out[i] = -1
		if c := s.CPUs(); len(c) > 0 {
			out[i] = c[0]
		}
	}
	return out
}
