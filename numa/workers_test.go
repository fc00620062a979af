package numa

import (
	"slices"
	"testing"
)

func TestParseCPUAffinity(t *testing.T) {
	all := NewCPUSet(0, 1, 2, 3)
	cases := []struct {
		args    []string
		workers int
		allowed CPUSet
		want    []string
	}{
		{[]string{"auto"}, 4, all, []string{"0", "1", "2", "3"}},
		{[]string{"auto"}, 3, NewCPUSet(1, 3), []string{"1", "3", "1"}},
		{[]string{"auto", "01010101"}, 3, all, []string{"0", "2", "0"}},
		{[]string{"0001", "0010", "0100", "1000"}, 4, all, []string{"0", "1", "2", "3"}},
		{[]string{"0101", "1010"}, 2, all, []string{"0,2", "1,3"}},
		{[]string{"0001", "0010"}, 4, all, []string{"0", "1", "1", "1"}},
		{[]string{"1111"}, 2, NewCPUSet(0, 1), []string{"0-1", "0-1"}},
	}
	for _, c := range cases {
		sets, err := ParseCPUAffinity(c.args, c.workers, c.allowed)
		if err != nil {
			t.Fatalf("ParseCPUAffinity(%q, %d): %v", c.args, c.workers, err)
		}
		got := make([]string, len(sets))
		for i, s := range sets {
			got[i] = s.String()
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ParseCPUAffinity(%q, %d, %s) = %q, want %q", c.args, c.workers, c.allowed, got, c.want)
		}
	}
}

func TestParseCPUAffinityErrors(t *testing.T) {
	all := NewCPUSet(0, 1)
	for _, c := range []struct {
		args    []string
		workers int
	}{
		{nil, 1},
		{[]string{"auto"}, 0},
		{[]string{"0012"}, 1},
		{[]string{"0000"}, 1},
		{[]string{"0100"}, 1},             // cpu 2 not allowed
		{[]string{"auto", "1100"}, 2},     // mask leaves no allowed cpu
		{[]string{"auto", "01", "10"}, 2}, // too many args
		{[]string{""}, 1},
	} {
		if _, err := ParseCPUAffinity(c.args, c.workers, all); err == nil {
			t.Errorf("ParseCPUAffinity(%q, %d) succeeded", c.args, c.workers)
		}
	}
}

func TestWorkerCountAndHelpers(t *testing.T) {
	allowed := NewCPUSet(0, 1)
	if n, err := WorkerCount("auto", allowed); err != nil || n != 2 {
		t.Errorf("auto = %d, %v", n, err)
	}
	if n, err := WorkerCount("3", allowed); err != nil || n != 3 {
		t.Errorf("3 = %d, %v", n, err)
	}
	for _, bad := range []string{"0", "-1", "x", ""} {
		if _, err := WorkerCount(bad, allowed); err == nil {
			t.Errorf("WorkerCount(%q) succeeded", bad)
		}
	}
	if got := FirstCPUs([]CPUSet{NewCPUSet(3, 1), {}}); !slices.Equal(got, []int{1, -1}) {
		t.Errorf("FirstCPUs = %v", got)
	}
}
