package server

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const dropCapsEnv = "NUMAPROXY_SERVER_DROP_CAPS"

// TestServesWithoutBPF runs this test binary again without CAP_BPF and
// CAP_SYS_ADMIN (so BPF cannot be loaded, as for an unprivileged user or an old
// kernel): the server logs one clear warning, sets SO_INCOMING_CPU on each listener
// and serves, still keeping clients on their arrival domain where the kernel honours
// SO_INCOMING_CPU.
func TestServesWithoutBPF(t *testing.T) {
	switch os.Getenv(dropCapsEnv) {
	case "":
		cmd := exec.Command(os.Args[0], "-test.run=^TestServesWithoutBPF$", "-test.v", "-test.count=1", "-test.timeout=60s")
		cmd.Env = append(os.Environ(), dropCapsEnv+"=drop")
		out, err := cmd.CombinedOutput()
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			t.Log("child: " + line)
		}
		if err != nil {
			t.Fatalf("child without capabilities: %v", err)
		}
		if !strings.Contains(string(out), "--- PASS: TestServesWithoutBPF") {
			t.Fatal("child did not run the test")
		}
	case "drop":
		// The bounding set is per thread and inherited through exec.
		runtime.LockOSThread()
		for _, c := range []uintptr{unix.CAP_BPF, unix.CAP_SYS_ADMIN} {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
				t.Fatalf("PR_CAPBSET_DROP %d: %v", c, err)
			}
		}
		// Replace the variable: with two copies getenv would still see "drop".
		var env []string
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, dropCapsEnv+"=") {
				env = append(env, e)
			}
		}
		t.Fatal(syscall.Exec(os.Args[0], os.Args, append(env, dropCapsEnv+"=dropped")))
	case "dropped":
		cpu0, cpu1, numaLine := domainCPUs(t)
		s, addr, logs := startServer(t, numaLine+`
worker_processes auto;
events { }
http { server { listen PORT; location / { return 200 "$numa_node"; } } }`)
		if n := strings.Count(logs.String(), "BPF steering is not available"); n != 1 {
			t.Fatalf("want one warning about BPF, got %d in:\n%s", n, logs)
		}
		for _, l := range s.Loops() {
			for _, ln := range l.Listeners() {
				got, err := unix.GetsockoptInt(ln.Fd(), unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
				if err != nil || got != l.CPU() {
					t.Fatalf("listener of the loop on CPU %d: SO_INCOMING_CPU %d, %v", l.CPU(), got, err)
				}
			}
		}
		for want, cpu := range []int{cpu0, cpu1} {
			right := 0
			for _, body := range askFrom(t, cpu, addr, 100) {
				if body == strconv.Itoa(want) {
					right++
				}
			}
			t.Logf("without BPF, clients on CPU %d: %d/100 served by domain %d", cpu, right, want)
			if right == 0 {
				t.Errorf("no client on CPU %d served by its domain", cpu)
			}
		}
	}
}
