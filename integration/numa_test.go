package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServedOnArrivalDomain runs the binary with two simulated domains (one CPU
// each): every fresh connection from a client pinned to a CPU is answered by a loop
// of that CPU's domain, the CPU that processed its packets is that CPU, and the
// steering counters logged on USR1 show the connections selected in their domain.
func TestServedOnArrivalDomain(t *testing.T) {
	cpu0, cpu1 := twoCPUs(t)
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": fmt.Sprintf(`error_log logs/error.log notice;
numa_domains %d %d;
worker_processes auto;
events { }
http { server { listen %s; location / { return 200 "$numa_node $worker_cpu $incoming_cpu"; } } }
`, cpu0, cpu1, addr)})
	in := start(t, dir)
	in.waitLog("numa on (domain 0: CPUs " + strconv.Itoa(cpu0))
	waitFor(t, "the server answering", 10*time.Second, func() bool { _, err := rawGetClose(addr); return err == nil })
	const n = 200
	for domain, cpu := range []int{cpu0, cpu1} {
		want := fmt.Sprintf("%d %d %d", domain, cpu, cpu)
		right := 0
		for _, body := range askFromCPU(t, cpu, addr, n) {
			if body == want {
				right++
			}
		}
		t.Logf("clients on CPU %d: %d/%d answered %q (domain, loop CPU, arrival CPU)", cpu, right, n, want)
		if right != n {
			t.Errorf("clients on CPU %d: %d of %d answered %q", cpu, right, n, want)
		}
	}
	in.signal("reopen")
	in.waitLog("logs reopened")
	for domain := range 2 {
		line := fmt.Sprintf("numa steering, listen=%s, domain=%d, selected=", addr, domain)
		in.waitLog(line)
		data := readFile(t, in.path("logs/error.log"))
		rest := data[strings.LastIndex(data, line)+len(line):]
		selected, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if selected < n {
			t.Errorf("domain %d: %d connections selected, want at least %d", domain, selected, n)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
