// Command probe checks, inside a guest booted by package vm, that the kernel sees
// the NUMA topology QEMU was asked for and places memory where it is told to. It
// prints one line per check, "PASS <check>: <measured>" or "FAIL <check>: ...",
// and exits 1 if any check failed.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

const sysNode = "/sys/devices/system/node"

var failed, passed int

func report(name string, err error, measured string, args ...any) {
	m := fmt.Sprintf(measured, args...)
	if err != nil {
		failed++
		fmt.Printf("FAIL %s: %s: %v\n", name, m, err)
		return
	}
	passed++
	fmt.Printf("PASS %s: %s\n", name, m)
}

func main() {
	nodes := flag.Int("nodes", 2, "NUMA nodes expected")
	cpusPerNode := flag.Int("cpus-per-node", 2, "CPUs per node expected")
	pages := flag.Int("pages", 256, "pages to bind and verify per node")
	flag.Parse()

	checkOnline(*nodes)
	for n := 0; n < *nodes; n++ {
		checkCPUs(n, *cpusPerNode)
	}
	checkDistance(*nodes)
	for n := 0; n < *nodes; n++ {
		checkMemory(n)
	}
	for cpu := 0; cpu < *nodes**cpusPerNode; cpu++ {
		checkGetcpu(cpu, cpu / *cpusPerNode)
	}
	for n := 0; n < *nodes; n++ {
		checkMbind(n, *pages)
	}
	if failed > 0 {
		fmt.Printf("probe: %d of %d checks failed\n", failed, failed+passed)
		os.Exit(1)
	}
	fmt.Printf("probe: all %d checks passed\n", passed)
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func cpuRange(first, count int) string {
	if count == 1 {
		return strconv.Itoa(first)
	}
	return fmt.Sprintf("%d-%d", first, first+count-1)
}

func checkOnline(nodes int) {
	got, err := readTrim(sysNode + "/online")
	if err == nil && got != cpuRange(0, nodes) {
		err = fmt.Errorf("want %s", cpuRange(0, nodes))
	}
	report("nodes-online", err, "%s", got)
}

func checkCPUs(node, perNode int) {
	name := fmt.Sprintf("node%d-cpus", node)
	want := cpuRange(node*perNode, perNode)
	got, err := readTrim(fmt.Sprintf("%s/node%d/cpulist", sysNode, node))
	if err == nil && got != want {
		err = fmt.Errorf("want %s", want)
	}
	report(name, err, "%s", got)
}

// checkDistance reads the SLIT distances: 10 to itself, more to every other node.
func checkDistance(nodes int) {
	var rows []string
	var err error
	for n := 0; n < nodes && err == nil; n++ {
		var s string
		s, err = readTrim(fmt.Sprintf("%s/node%d/distance", sysNode, n))
		rows = append(rows, fmt.Sprintf("node%d=[%s]", n, s))
		f := strings.Fields(s)
		if err == nil && len(f) != nodes {
			err = fmt.Errorf("node%d: %d distances, want %d", n, len(f), nodes)
		}
		for m := 0; err == nil && m < len(f); m++ {
			d, _ := strconv.Atoi(f[m])
			if m == n && d != 10 || m != n && d <= 10 {
				err = fmt.Errorf("node%d to node%d: distance %d", n, m, d)
			}
		}
	}
	report("distance", err, "%s", strings.Join(rows, " "))
}

// checkMemory reads nodeN/meminfo: every node must have memory of its own.
func checkMemory(node int) {
	name := fmt.Sprintf("node%d-mem", node)
	s, err := readTrim(fmt.Sprintf("%s/node%d/meminfo", sysNode, node))
	kb := map[string]int{}
	for _, l := range strings.Split(s, "\n") {
		// "Node 0 MemTotal:       500876 kB"
		f := strings.Fields(l)
		if len(f) >= 4 {
			kb[strings.TrimSuffix(f[2], ":")], _ = strconv.Atoi(f[3])
		}
	}
	if err == nil && (kb["MemTotal"] == 0 || kb["MemFree"] == 0) {
		err = fmt.Errorf("node has no memory")
	}
	report(name, err, "MemTotal %d MiB, MemFree %d MiB", kb["MemTotal"]/1024, kb["MemFree"]/1024)
}

// checkGetcpu pins a locked OS thread to cpu and asks the kernel where it runs.
func checkGetcpu(cpu, wantNode int) {
	name := fmt.Sprintf("getcpu-cpu%d", cpu)
	done := make(chan struct{})
	var gotCPU, gotNode uint32
	var err error
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the pinned thread exits with the goroutine
		var set unix.CPUSet
		set.Set(cpu)
		if err = unix.SchedSetaffinity(0, &set); err != nil {
			err = fmt.Errorf("sched_setaffinity: %w", err)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&gotCPU)), uintptr(unsafe.Pointer(&gotNode)), 0); e != 0 {
			err = fmt.Errorf("getcpu: %w", e)
		}
	}()
	<-done
	if err == nil && (int(gotCPU) != cpu || int(gotNode) != wantNode) {
		err = fmt.Errorf("want cpu %d node %d", cpu, wantNode)
	}
	report(name, err, "pinned to CPU %d, getcpu says cpu %d node %d", cpu, gotCPU, gotNode)
}

const (
	mpolBind     = 2 // MPOL_BIND
	mpolMFStrict = 1 // MPOL_MF_STRICT
	maxNodeBits  = 64
)

// checkMbind binds an anonymous mapping to node, touches every page and asks
// move_pages (with no target nodes: query only) where each page is.
func checkMbind(node, pages int) {
	name := fmt.Sprintf("mbind-node%d", node)
	psize := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, pages*psize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		report(name, err, "mmap %d pages", pages)
		return
	}
	defer unix.Munmap(mem)
	addr := uintptr(unsafe.Pointer(&mem[0]))
	mask := [1]uint64{1 << node}
	if _, _, e := unix.Syscall6(unix.SYS_MBIND, addr, uintptr(len(mem)), mpolBind,
		uintptr(unsafe.Pointer(&mask[0])), maxNodeBits+1, mpolMFStrict); e != 0 {
		report(name, fmt.Errorf("mbind: %w", e), "bind %d pages to node %d", pages, node)
		return
	}
	for i := 0; i < len(mem); i += psize {
		mem[i] = 1
	}
	ptrs := make([]uintptr, pages)
	for i := range ptrs {
		ptrs[i] = addr + uintptr(i*psize)
	}
	status := make([]int32, pages)
	if _, _, e := unix.Syscall6(unix.SYS_MOVE_PAGES, 0, uintptr(pages), uintptr(unsafe.Pointer(&ptrs[0])),
		0, uintptr(unsafe.Pointer(&status[0])), 0); e != 0 {
		report(name, fmt.Errorf("move_pages: %w", e), "query %d pages", pages)
		return
	}
	onNode := 0
	other := map[int32]int{}
	for _, s := range status {
		if int(s) == node {
			onNode++
		} else {
			other[s]++
		}
	}
	if onNode != pages {
		err = fmt.Errorf("elsewhere (node or -errno: pages): %v", other)
	}
	report(name, err, "%d/%d pages on node %d (move_pages)", onNode, pages, node)
}
