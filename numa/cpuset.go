package numa

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxCPUs is the number of CPUs a CPUSet can describe (the kernel's CPU_SETSIZE
// as used by sched_setaffinity through x/sys/unix).
const MaxCPUs = len(unix.CPUSet{}) * 64

// CPUSet is a set of CPU numbers. The zero value is the empty set; sets are
// comparable with ==.
type CPUSet unix.CPUSet

// NewCPUSet returns the set holding cpus; numbers outside [0, MaxCPUs) are ignored.
func NewCPUSet(cpus ...int) CPUSet {
	var s CPUSet
	for _, c := range cpus {
		s.Set(c)
	}
	return s
}

// Set adds cpu to the set; numbers outside [0, MaxCPUs) are ignored.
func (s *CPUSet) Set(cpu int) { (*unix.CPUSet)(s).Set(cpu) }

// Clear removes cpu from the set.
func (s *CPUSet) Clear(cpu int) { (*unix.CPUSet)(s).Clear(cpu) }

// Has reports whether cpu is in the set.
func (s CPUSet) Has(cpu int) bool { return (*unix.CPUSet)(&s).IsSet(cpu) }

// Count returns the number of CPUs in the set.
func (s CPUSet) Count() int { return (*unix.CPUSet)(&s).Count() }

// IsEmpty reports whether the set holds no CPU.
func (s CPUSet) IsEmpty() bool { return s == CPUSet{} }

// And returns the CPUs present in both s and o.
func (s CPUSet) And(o CPUSet) CPUSet {
	for i := range s {
		s[i] &= o[i]
	}
	return s
}

// Or returns the CPUs present in s or o.
func (s CPUSet) Or(o CPUSet) CPUSet {
	for i := range s {
		s[i] |= o[i]
	}
	return s
}

// CPUs returns the CPU numbers in ascending order.
func (s CPUSet) CPUs() []int {
	out := make([]int, 0, s.Count())
	for i, w := range s {
		for w != 0 {
			b := bits.TrailingZeros64(uint64(w))
			out = append(out, i*64+b)
			w &^= 1 << b
		}
	}
	return out
}

// String formats the set as a kernel CPU list ("0-3,8,10-11"); the empty set is "".
func (s CPUSet) String() string {
	var sb strings.Builder
	cpus := s.CPUs()
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return sb.String()
}

// ParseCPUList parses a kernel CPU list such as "0-3,8,10-11" (the format of
// sysfs cpulist files and cgroup cpuset files). Surrounding white space and an
// empty list are accepted; the kernel's stride form "0-7:2" is accepted too.
func ParseCPUList(list string) (CPUSet, error) {
	var s CPUSet
	list = strings.TrimSpace(list)
	if list == "" {
		return s, nil
	}
	for part := range strings.SplitSeq(list, ",") {
		rng, stride, hasStride := strings.Cut(part, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		first, err := parseCPU(lo)
		if err != nil {
			return CPUSet{}, fmt.Errorf("cpu list %q: %w", list, err)
		}
		last := first
		if isRange {
			if last, err = parseCPU(hi); err != nil {
				return CPUSet{}, fmt.Errorf("cpu list %q: %w", list, err)
			}
			if last < first {
				return CPUSet{}, fmt.Errorf("cpu list %q: range %s runs backwards", list, rng)
			}
		}
		step := 1
		if hasStride {
			if step, err = strconv.Atoi(stride); err != nil || step <= 0 || !isRange {
				return CPUSet{}, fmt.Errorf("cpu list %q: bad stride in %q", list, part)
			}
		}
		for c := first; c <= last; c += step {
			s.Set(c)
		}
	}
	return s, nil
}

func parseCPU(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad cpu number %q", s)
	}
	if n >= MaxCPUs {
		return 0, fmt.Errorf("cpu %d beyond the %d supported", n, MaxCPUs)
	}
	return n, nil
}
