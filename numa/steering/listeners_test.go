package steering

import (
	"errors"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

func cookie(t *testing.T, fd int) uint64 {
	t.Helper()
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// slotCookies reads domain 0's sockarray slots (a userspace lookup yields the
// socket's cookie; 0 for an empty slot) and its count.
func slotCookies(t *testing.T, s *Steering) ([]uint64, uint32) {
	t.Helper()
	out := make([]uint64, s.cfg.MaxPerDomain)
	for k := range out {
		err := s.objs.Socks.Lookup(uint32(k), &out[k])
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Fatal(err)
		}
	}
	var n uint32
	if err := s.objs.DomainCount.Lookup(uint32(0), &n); err != nil {
		t.Fatal(err)
	}
	return out, n
}

// TestRemoveListenerRepacks: removing a listener moves the domain's last one
// into its slot; the removed listener, still open, gets no more connections;
// a listener closed without RemoveListener is skipped by the program and
// repacked later.
func TestRemoveListenerRepacks(t *testing.T) {
	needCPUs(t)
	s := load(t, simulatedConfig())
	l0 := listen(t, 0)
	l1 := listen(t, l0.port)
	l2 := listen(t, l0.port)
	if err := s.Attach(l0.fd); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*listener{l0, l1, l2} {
		if err := s.AddListener(0, l.fd); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddListener(0, l1.fd); err == nil {
		t.Error("the same listener went into a second slot")
	}

	if err := s.RemoveListener(0, l0.fd); err != nil {
		t.Fatal(err)
	}
	if got := s.Listeners(0); !slices.Equal(got, []int{l2.fd, l1.fd}) {
		t.Fatalf("listeners after removing slot 0: %v, want [%d %d]", got, l2.fd, l1.fd)
	}
	slots, n := slotCookies(t, s)
	if want := []uint64{cookie(t, l2.fd), cookie(t, l1.fd), 0, 0}; !slices.Equal(slots, want) || n != 2 {
		t.Fatalf("sockarray %v count %d, want %v count 2", slots, n, want)
	}
	dial(t, 0, l0.port, 100)
	got := acceptN(t, 100, l0, l1, l2)
	t.Logf("after removing l0 (still open): l0 %d, l1 %d, l2 %d", len(got[0]), len(got[1]), len(got[2]))
	if len(got[0]) != 0 || len(got[1]) == 0 || len(got[2]) == 0 {
		t.Errorf("removed listener got %d, remaining got %d and %d", len(got[0]), len(got[1]), len(got[2]))
	}

	// l1 closes before RemoveListener: its slot empties in the kernel, the
	// count still says 2, and the program probes past the hole.
	l1fd := l1.fd
	l1.close()
	dial(t, 0, l0.port, 100)
	got = acceptN(t, 100, l0, l2)
	if len(got[1]) != 100 {
		t.Errorf("with l1 closed, l2 got %d/100", len(got[1]))
	}
	if st := stat(t, s, 0); st.Fallback != 0 || st.Selected != 200 {
		t.Errorf("stats %+v, want 200 selected, no fallback", st)
	}
	if err := s.RemoveListener(0, l1fd); err != nil {
		t.Fatal(err)
	}
	slots, n = slotCookies(t, s)
	if want := []uint64{cookie(t, l2.fd), 0, 0, 0}; !slices.Equal(slots, want) || n != 1 {
		t.Fatalf("sockarray %v count %d, want %v count 1", slots, n, want)
	}
	if err := s.RemoveListener(0, l1fd); !errors.Is(err, ErrNotListed) {
		t.Errorf("second removal: %v, want ErrNotListed", err)
	}
	// A removed listener can come back.
	if err := s.AddListener(0, l0.fd); err != nil {
		t.Fatal(err)
	}
	if got := s.Listeners(0); !slices.Equal(got, []int{l2.fd, l0.fd}) {
		t.Fatalf("listeners after re-adding l0: %v", got)
	}
}

// TestConfigErrors: bad configs fail before touching the kernel.
func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no domain":             {},
		"too many domains":      {Domains: MaxDomains + 1},
		"too many per domain":   {Domains: 1, MaxPerDomain: MaxPerDomain + 1},
		"node count mismatch":   {Domains: 2, DomainNode: []int{0}},
		"node out of range":     {Domains: 1, DomainNode: []int{MaxNodes}},
		"cpu in missing domain": {Domains: 1, CPUDomain: map[int]int{0: 1}},
		"numa id not identity":  {Domains: 2, DomainNode: []int{0, 0}, UseNumaNodeID: true},
	} {
		if _, err := Load(cfg); err == nil || errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: Load: %v, want a config error", name, err)
		}
	}
}
