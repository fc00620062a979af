package steering

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

const dropCapsEnv = "NUMAPROXY_STEERING_DROP_CAPS"

// TestDegradedWithoutCapabilities runs this test binary again without
// CAP_BPF and CAP_SYS_ADMIN (dropped from the capability bounding set before
// an exec, so the new image never has them, though still uid 0): Load must
// fail with ErrUnsupported, and SetIncomingCPU must still steer.
func TestDegradedWithoutCapabilities(t *testing.T) {
	switch os.Getenv(dropCapsEnv) {
	case "":
		needCPUs(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDegradedWithoutCapabilities$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), dropCapsEnv+"=drop")
		out, err := cmd.CombinedOutput()
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			t.Log("child: " + line)
		}
		if err != nil {
			t.Fatalf("child without capabilities: %v", err)
		}
		if !strings.Contains(string(out), "--- PASS: TestDegradedWithoutCapabilities") {
			t.Fatal("child did not run the test")
		}
	case "drop":
		// The bounding set is per thread and inherited through exec: drop
		// on a locked thread, then exec from it.
		runtime.LockOSThread()
		for _, c := range []uintptr{unix.CAP_BPF, unix.CAP_SYS_ADMIN} {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
				t.Fatalf("PR_CAPBSET_DROP %d: %v", c, err)
			}
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		// syscall.Exec keeps duplicate variables and Getenv reads the
		// first: replace the variable, never append a second one.
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, dropCapsEnv+"=") })
		env = append(env, dropCapsEnv+"=dropped")
		t.Fatal(syscall.Exec(os.Args[0], os.Args, env))
	case "dropped":
		eff := capEff(t)
		if eff&(1<<unix.CAP_BPF|1<<unix.CAP_SYS_ADMIN) != 0 {
			t.Fatalf("CapEff %#x still has CAP_BPF or CAP_SYS_ADMIN", eff)
		}
		t.Logf("uid %d, CapEff %#x: no CAP_BPF, no CAP_SYS_ADMIN", os.Getuid(), eff)
		s, err := Load(simulatedConfig())
		if err == nil {
			s.Close()
			t.Fatal("Load succeeded without CAP_BPF and CAP_SYS_ADMIN")
		}
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Load: %v, want ErrUnsupported", err)
		}
		t.Logf("Load: %v", err)
		degradedSteering(t)
	}
}

func capEff(t *testing.T) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return 0
}

// TestDegradedIncomingCPU: SetIncomingCPU alone, no BPF, steers each CPU's
// clients to the listener set to that CPU (Linux 6.1 and later).
func TestDegradedIncomingCPU(t *testing.T) {
	needCPUs(t)
	degradedSteering(t)
}

func degradedSteering(t *testing.T) {
	t.Helper()
	a := listen(t, 0)
	b := listen(t, a.port)
	for cpu, l := range []*listener{a, b} {
		if err := SetIncomingCPU(l.fd, cpu); err != nil {
			t.Fatal(err)
		}
		if got, err := unix.GetsockoptInt(l.fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU); err != nil || got != cpu {
			t.Fatalf("SO_INCOMING_CPU reads back %d, %v; want %d", got, err, cpu)
		}
	}
	ls := []*listener{a, b}
	for cpu := range 2 {
		dial(t, cpu, a.port, perCPU)
		got := acceptN(t, perCPU, ls...)
		t.Logf("SO_INCOMING_CPU only, clients on CPU %d: %d/%d on the listener set to CPU %d", cpu, len(got[cpu]), perCPU, cpu)
		if len(got[cpu]) != perCPU {
			t.Errorf("%d/%d on the listener set to CPU %d", len(got[cpu]), perCPU, cpu)
		}
	}
}

// TestSKDropAnswersRST records what SK_DROP from an sk_reuseport program does
// to a SYN on this kernel: the listener lookup fails (reuseport_select_sock
// returns ERR_PTR(-ECONNREFUSED) and __inet_lookup_listener turns it into "no
// socket"), so tcp_v4_rcv answers the SYN with a RST. The client gets
// ECONNREFUSED at once, with no SYN retransmission; nothing is queued or left
// half-open. SK_DROP is therefore a refusal, not a silent drop, and the
// program never returns it (so no SYN rate limiting in the program: it could
// only refuse, which tells a flooder the port is closed and costs a RST each).
func TestSKDropAnswersRST(t *testing.T) {
	needCPUs(t)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SkReuseport,
		AttachType:   ebpf.AttachSkReuseportSelectOrMigrate,
		License:      "Dual MIT/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0 /* SK_DROP */), asm.Return()},
	})
	if err != nil {
		t.Skipf("cannot load an sk_reuseport program: %v", err)
	}
	defer prog.Close()
	l := listen(t, 0)
	if err := unix.SetsockoptInt(l.fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_EBPF, prog.FD()); err != nil {
		t.Fatal(err)
	}
	rsts := snmp(t, "OutRsts")
	var (
		connErr error
		took    time.Duration
	)
	onCPU(t, 0, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// A silent drop would leave connect waiting for SYN retransmits
		// (1 s, 3 s, ...); cap the wait so the test fails fast then.
		tv := unix.NsecToTimeval((3 * time.Second).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
			return err
		}
		start := time.Now()
		connErr = unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: l.port})
		took = time.Since(start)
		return nil
	})
	sent := snmp(t, "OutRsts") - rsts
	t.Logf("SK_DROP: connect returned %v after %v; TCP OutRsts +%d", connErr, took, sent)
	if connErr != unix.ECONNREFUSED || took > 500*time.Millisecond || sent < 1 {
		t.Errorf("SK_DROP no longer answers with an immediate RST: %v after %v, %d RSTs; revisit steering.c's SK_DROP note", connErr, took, sent)
	}
	if nfd, _, err := unix.Accept(l.fd); err == nil {
		unix.Close(nfd)
		t.Error("a connection was queued")
	}
	if n := synRecv(t, l.port); n != 0 {
		t.Errorf("%d half-open (SYN_RECV) entries left on port %d", n, l.port)
	}
}

// snmp reads one Tcp counter of /proc/net/snmp.
func snmp(t *testing.T, name string) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		keys, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(keys) == 0 || keys[0] != "Tcp:" {
			continue
		}
		for j, k := range keys {
			if k == name && j < len(vals) {
				v, _ := strconv.ParseUint(vals[j], 10, 64)
				return v
			}
		}
	}
	t.Fatalf("no Tcp %s in /proc/net/snmp", name)
	return 0
}

// synRecv counts SYN_RECV sockets with local port in /proc/net/tcp.
func synRecv(t *testing.T, port int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	suffix := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], suffix) && f[3] == "03" {
			n++
		}
	}
	return n
}
