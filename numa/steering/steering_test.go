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
