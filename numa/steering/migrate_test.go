package steering

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const queued = 64

// netstat reads one TcpExt counter from /proc/net/netstat.
func netstat(t *testing.T, name string) uint64 {
	t.Helper()
	f, err := os.Open("/proc/net/netstat")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		keys := strings.Fields(sc.Text())
		if !sc.Scan() {
			break
		}
		vals := strings.Fields(sc.Text())
		if keys[0] != "TcpExt:" {
			continue
		}
		for i, k := range keys {
			if k == name && i < len(vals) {
				v, _ := strconv.ParseUint(vals[i], 10, 64)
				return v
			}
		}
	}
	t.Fatalf("no TcpExt %s in /proc/net/netstat", name)
	return 0
}

// roundTrip writes "ok" on every accepted connection and reads it on every
// client: a connection reset anywhere fails it. Clients and accepted
// connections pair up by port.
func roundTrip(t *testing.T, clients []int, accepted []conn) {
	t.Helper()
	for _, c := range accepted {
		if _, err := unix.Write(c.fd, []byte("ok")); err != nil {
			t.Fatalf("server write to %v: %v", c.client, err)
		}
	}
	for _, fd := range clients {
		if err := readOK(fd); err != nil {
			t.Fatal(err)
		}
	}
}

func readOK(fd int) error {
	tv := unix.NsecToTimeval(deadline.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	buf := make([]byte, 2)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "ok" {
		return unix.EIO
	}
	return nil
}

// TestMigrateKeepsDomain: a domain-0 listener closes with connections in its
// accept queue, on CPU 1. The program recovers their domain from conntrack
// (not from the closing CPU) and moves all of them to domain 0's other
// listener; none is reset.
func TestMigrateKeepsDomain(t *testing.T) {
	needCPUs(t)
	// The kernel migrates through a select-or-migrate program even with
	// tcp_migrate_req=0 (reuseport_stop_listen_sock checks either); the
	// sysctl only enables hash migration for groups without such a program.
	for _, v := range []string{"1", "0"} {
		t.Run("tcp_migrate_req="+v, func(t *testing.T) {
			s, clients, got := migrate(t, v, false)
			if len(got[0]) != queued || len(got[1]) != 0 {
				t.Fatalf("after close: %d/%d on domain 0's other listener, %d on domain 1's", len(got[0]), queued, len(got[1]))
			}
			t.Logf("closing listener with %d queued (close on CPU 1): %d migrated to domain 0's other listener, 0 to domain 1, 0 reset",
				queued, len(got[0]))
			roundTrip(t, clients, got[0])
			if st := stat(t, s, 0); st.Migrated != queued || st.MigrateFallback != 0 {
				t.Errorf("domain 0 stats %+v, want %d migrated", st, queued)
			}
		})
	}
	// The control: with the flows forgotten the program cannot tell the
	// domain and the kernel hashes over the remaining listeners of both
	// domains, so the check above can fail.
	t.Run("conntrack forgotten", func(t *testing.T) {
		s, clients, got := migrate(t, "1", true)
		t.Logf("flows forgotten: %d on domain 0's other listener, %d on domain 1's", len(got[0]), len(got[1]))
		if len(got[1]) == 0 {
			t.Errorf("no connection crossed to domain 1 without conntrack")
		}
		roundTrip(t, clients, append(got[0], got[1]...))
		if st := stat(t, s, -1); st.MigrateFallback != queued {
			t.Errorf("no-domain stats %+v, want %d migrate fallbacks", st, queued)
		}
	})
}

// migrate queues connections from CPU 0 on one domain-0 listener, removes
// and closes it on CPU 1, and accepts what was migrated: got[0] from domain
// 0's other listener, got[1] from domain 1's.
func migrate(t *testing.T, sysctlValue string, forget bool) (*Steering, []int, [][]conn) {
	t.Helper()
	sysctl(t, "net/ipv4/tcp_migrate_req", sysctlValue)
	s := load(t, simulatedConfig())
	closing := listen(t, 0)
	other := listen(t, closing.port)
	dom1 := listen(t, closing.port)
	if err := s.Attach(closing.fd); err != nil {
		t.Fatal(err)
	}
	if err := s.AddListener(0, closing.fd); err != nil {
		t.Fatal(err)
	}
	if err := s.AddListener(1, dom1.fd); err != nil {
		t.Fatal(err)
	}
	clients := dial(t, 0, closing.port, queued)
	// Only now the second domain-0 listener: every queued connection sits
	// in closing's accept queue.
	if err := s.AddListener(0, other.fd); err != nil {
		t.Fatal(err)
	}
	if forget {
		forgetFlows(t, s)
	}
	success := netstat(t, "TCPMigrateReqSuccess")
	if err := s.RemoveListener(0, closing.fd); err != nil {
		t.Fatal(err)
	}
	onCPU(t, 1, func() error { closing.close(); return nil })
	got := acceptN(t, queued, other, dom1)
	if d := netstat(t, "TCPMigrateReqSuccess") - success; d < queued {
		t.Errorf("TCPMigrateReqSuccess grew by %d, want %d", d, queued)
	}
	return s, clients, got
}

// forgetFlows empties every node's flow map.
func forgetFlows(t *testing.T, s *Steering) {
	t.Helper()
	for _, m := range s.flows {
		var k steeringFlowKey
		var keys []steeringFlowKey
		var v steeringFlowVal
		it := m.Iterate()
		for it.Next(&k, &v) {
			keys = append(keys, k)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if err := m.Delete(&k); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCloseWithoutMigrationResets is the control: with no program and
// tcp_migrate_req=0 the same close resets every queued connection.
func TestCloseWithoutMigrationResets(t *testing.T) {
	needCPUs(t)
	sysctl(t, "net/ipv4/tcp_migrate_req", "0")
	closing := listen(t, 0)
	clients := dial(t, 0, closing.port, queued)
	other := listen(t, closing.port)
	closing.close()
	reset := 0
	for _, fd := range clients {
		if err := readOK(fd); err == unix.ECONNRESET {
			reset++
		}
	}
	t.Logf("closing listener with %d queued, no program, tcp_migrate_req=0: %d reset", queued, reset)
	if reset != queued {
		t.Errorf("%d/%d reset, want all", reset, queued)
	}
	// Nothing reached the remaining listener.
	if nfd, _, err := unix.Accept(other.fd); err == nil {
		unix.Close(nfd)
		t.Error("a queued connection reached the other listener")
	}
}
