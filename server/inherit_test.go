package server

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInheritedListeners is the server side of a binary upgrade: a second server
// adopts the first one's listening sockets (duplicated, as a child process gets
// them), steers them itself, and once the first drains every connection is served
// by the second, with no connection lost in between.
func TestInheritedListeners(t *testing.T) {
	cpu0, cpu1, numaLine := domainCPUs(t)
	src := numaLine + `
worker_processes auto;
events { }
http { server { listen PORT; location / { return 200 "$numa_node NAME"; } } }`
	old, addr, _ := startServer(t, strings.ReplaceAll(src, "NAME", "old"))
	port, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	inherited := old.ListenerFDs()
	for a, fds := range inherited {
		for i, fd := range fds {
			dup, err := unix.Dup(fd)
			if err != nil {
				t.Fatal(err)
			}
			inherited[a][i] = dup
		}
	}
	old.ReleaseSteering()
	newSrc := strings.ReplaceAll(strings.ReplaceAll(src, "NAME", "new"), "PORT", strconv.Itoa(port))
	cfg, snap := loadSnapshot(t, newSrc)
	nu, err := StartWith(cfg, snap, testLogger(t), Options{Inherited: inherited})
	if err != nil {
		t.Fatal(err)
	}
	defer nu.Stop()
	if nu.steer == nil || len(nu.steer.perAddr) != 1 {
		t.Fatal("the new server does not steer the inherited listeners")
	}
	// Both serve now; the old one stops accepting and finishes.
	old.Drain(0)
	for want, cpu := range []int{cpu0, cpu1} {
		for _, body := range askFrom(t, cpu, addr, 100) {
			if body != strconv.Itoa(want)+" new" {
				t.Fatalf("clients on CPU %d: answer %q, want the new server on domain %d", cpu, body, want)
			}
		}
	}
}
