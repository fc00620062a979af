package steering

import (
	"testing"
)

const perCPU = 400

// twoDomains makes one listener per domain on one port, attaches s's program
// and registers them; ls[d] is domain d's listener.
func twoDomains(t *testing.T, s *Steering) []*listener {
	t.Helper()
	a := listen(t, 0)
	b := listen(t, a.port)
	if s != nil {
		if err := s.Attach(a.fd); err != nil {
			t.Fatal(err)
		}
		if err := s.AddListener(0, a.fd); err != nil {
			t.Fatal(err)
		}
		if err := s.AddListener(1, b.fd); err != nil {
			t.Fatal(err)
		}
	}
	return []*listener{a, b}
}

func TestSteeringKeepsDomain(t *testing.T) {
	needCPUs(t)
	s := load(t, simulatedConfig())
	ls := twoDomains(t, s)
	for cpu := range 2 {
		dial(t, cpu, ls[0].port, perCPU)
		got := acceptN(t, perCPU, ls...)
		other := 1 - cpu
		if len(got[cpu]) != perCPU || len(got[other]) != 0 {
			t.Errorf("clients on CPU %d: %d/%d on domain %d's listener, %d on domain %d's",
				cpu, len(got[cpu]), perCPU, cpu, len(got[other]), other)
		} else {
			t.Logf("clients on CPU %d: %d/%d on domain %d", cpu, len(got[cpu]), perCPU, cpu)
		}
		for _, c := range got[cpu] {
			if c.cpu != cpu {
				t.Fatalf("connection from CPU %d has SO_INCOMING_CPU %d", cpu, c.cpu)
			}
		}
		if st := stat(t, s, cpu); st.Selected != perCPU || st.Fallback != 0 {
			t.Errorf("domain %d stats %+v, want %d selected", cpu, st, perCPU)
		}
	}
}

// TestWithoutProgramConnectionsCross is the control: the same clients with
// no program (never attached, then attached and detached) land on either
// listener, so TestSteeringKeepsDomain can fail.
func TestWithoutProgramConnectionsCross(t *testing.T) {
	needCPUs(t)
	check := func(t *testing.T, ls []*listener) {
		dial(t, 0, ls[0].port, perCPU)
		got := acceptN(t, perCPU, ls...)
		crossed := len(got[1])
		t.Logf("clients on CPU 0 without program: %d/%d crossed to domain 1", crossed, perCPU)
		// Hashing over two listeners: ~200 expected; under 10% is far
		// outside chance.
		if crossed < perCPU/10 || crossed > perCPU-perCPU/10 {
			t.Errorf("%d/%d crossed, want about half", crossed, perCPU)
		}
	}
	t.Run("never attached", func(t *testing.T) { check(t, twoDomains(t, nil)) })
	t.Run("detached", func(t *testing.T) {
		s := load(t, simulatedConfig())
		ls := twoDomains(t, s)
		if err := Detach(ls[1].fd); err != nil {
			t.Fatal(err)
		}
		check(t, ls)
		if st := stat(t, s, 0); st.Selected != 0 {
			t.Errorf("detached program still ran: %+v", st)
		}
	})
}

// TestFallbackServesDomainWithoutListener: domain 1 has no listener, so its
// clients go to the kernel's hash over the group (FreeBSD's fallback) and are
// still served; a CPU outside every domain is served the same way.
func TestFallbackServesDomainWithoutListener(t *testing.T) {
	needCPUs(t)
	t.Run("empty domain", func(t *testing.T) {
		s := load(t, simulatedConfig())
		a := listen(t, 0)
		if err := s.Attach(a.fd); err != nil {
			t.Fatal(err)
		}
		if err := s.AddListener(0, a.fd); err != nil {
			t.Fatal(err)
		}
		dial(t, 1, a.port, 100)
		got := acceptN(t, 100, a)
		t.Logf("clients on CPU 1, domain 1 empty: %d/100 served by domain 0's listener", len(got[0]))
		if st := stat(t, s, 1); st.Fallback != 100 || st.Selected != 0 {
			t.Errorf("domain 1 stats %+v, want 100 fallback", st)
		}
	})
	t.Run("cpu without domain", func(t *testing.T) {
		cfg := simulatedConfig()
		cfg.CPUDomain = map[int]int{0: 0}
		s := load(t, cfg)
		ls := twoDomains(t, s)
		dial(t, 1, ls[0].port, 100)
		got := acceptN(t, 100, ls...)
		t.Logf("clients on CPU 1 without domain: %d on domain 0, %d on domain 1", len(got[0]), len(got[1]))
		if st := stat(t, s, -1); st.Fallback != 100 {
			t.Errorf("no-domain stats %+v, want 100 fallback", st)
		}
	})
}
