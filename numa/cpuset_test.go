package numa

import (
	"slices"
	"testing"
)

func TestParseCPUListRoundTrip(t *testing.T) {
	cases := []struct {
		in, out string
		cpus    []int
	}{
		{"", "", nil},
		{"0", "0", []int{0}},
		{"0-3,8,10-11", "0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}},
		{" 3,1,2\n", "1-3", []int{1, 2, 3}},
		{"0-7:2", "0,2,4,6", []int{0, 2, 4, 6}},
		{"1023", "1023", []int{1023}},
		{"5,5,5", "5", []int{5}},
	}
	for _, c := range cases {
		s, err := ParseCPUList(c.in)
		if err != nil {
			t.Fatalf("ParseCPUList(%q): %v", c.in, err)
		}
		if got := s.String(); got != c.out {
			t.Errorf("ParseCPUList(%q).String() = %q, want %q", c.in, got, c.out)
		}
		if got := s.CPUs(); !slices.Equal(got, c.cpus) && len(got)+len(c.cpus) > 0 {
			t.Errorf("ParseCPUList(%q).CPUs() = %v, want %v", c.in, got, c.cpus)
		}
		if s.Count() != len(c.cpus) {
			t.Errorf("ParseCPUList(%q).Count() = %d, want %d", c.in, s.Count(), len(c.cpus))
		}
		back, err := ParseCPUList(s.String())
		if err != nil || back != s {
			t.Errorf("round trip of %q: %v, %v", c.in, back, err)
		}
	}
}

func TestParseCPUListErrors(t *testing.T) {
	for _, in := range []string{"a", "1-", "-1", "3-1", "1024", "0,,1", "0-3:0", "2:2", "1.5"} {
		if s, err := ParseCPUList(in); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", in, s)
		}
	}
}

func TestCPUSetOps(t *testing.T) {
	a, b := NewCPUSet(0, 1, 2, 64), NewCPUSet(2, 3, 64)
	if got := a.And(b).String(); got != "2,64" {
		t.Errorf("And = %q", got)
	}
	if got := a.Or(b).String(); got != "0-3,64" {
		t.Errorf("Or = %q", got)
	}
	if !a.Has(64) || a.Has(63) || (CPUSet{}).Count() != 0 || !(CPUSet{}).IsEmpty() {
		t.Error("Has/Count/IsEmpty disagree")
	}
	a.Clear(64)
	if a.Has(64) {
		t.Error("Clear kept the cpu")
	}
}
