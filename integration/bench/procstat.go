package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTick is USER_HZ, the unit of utime/stime in /proc: 100 on every Linux
// architecture Go supports.
const clockTick = 100

// procTimes holds a process's own CPU time in clock ticks.
type procTimes struct {
	utime, stime   uint64
	cutime, cstime uint64 // of children it has waited for
}

// readProcStat returns ppid and CPU times of one process from /proc/PID/stat.
func readProcStat(pid int) (ppid int, t procTimes, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, t, err
	}
	return parseProcStat(b)
}

// parseProcStat parses the fields after the command name, which may itself hold
// spaces and parentheses: the last ')' ends it.
func parseProcStat(b []byte) (ppid int, t procTimes, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, t, fmt.Errorf("stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); ppid is field 4, utime 14, stime 15, cutime 16, cstime 17.
	if len(f) < 15 {
		return 0, t, fmt.Errorf("stat: %d fields", len(f))
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, t, fmt.Errorf("stat ppid: %w", err)
	}
	if t.utime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return 0, t, fmt.Errorf("stat utime: %w", err)
	}
	if t.stime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return 0, t, fmt.Errorf("stat stime: %w", err)
	}
	// Time of reaped children (an nginx master's old workers after a reload).
	if t.cutime, err = strconv.ParseUint(f[13], 10, 64); err != nil {
		return 0, t, fmt.Errorf("stat cutime: %w", err)
	}
	if t.cstime, err = strconv.ParseUint(f[14], 10, 64); err != nil {
		return 0, t, fmt.Errorf("stat cstime: %w", err)
	}
	return ppid, t, nil
}

// processTree returns pid and all its descendants, found by scanning /proc.
func processTree(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pid}
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pp, _, err := readProcStat(p)
		if err != nil {
			continue
		}
		children[pp] = append(children[pp], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// treeSample is the summed CPU time and RSS of a process tree at one moment.
type treeSample struct {
	ticks    uint64 // utime+stime+cutime+cstime of every live process in the tree
	user     uint64 // of which utime+cutime: the proxy's own code, not the kernel's
	rssBytes int64
	procs    int
}

func sampleTree(pid int) treeSample {
	var s treeSample
	for _, p := range processTree(pid) {
		_, t, err := readProcStat(p)
		if err != nil {
			continue
		}
		// A process that exits moves its time into its parent's cutime/cstime,
		// so the sum stays continuous across worker restarts.
		s.ticks += t.utime + t.stime + t.cutime + t.cstime
		s.user += t.utime + t.cutime
		s.rssBytes += readRSS(p)
		s.procs++
	}
	return s
}

// readRSS returns VmRSS of a process in bytes (0 if it is gone).
func readRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return parseVmRSS(b)
}

func parseVmRSS(b []byte) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// cpuStat is one "cpuN" line of /proc/stat, in clock ticks.
type cpuStat struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64
}

func (c cpuStat) total() uint64 {
	return c.user + c.nice + c.system + c.idle + c.iowait + c.irq + c.softirq + c.steal
}

// readCPUStat returns the counters of one CPU from /proc/stat.
func readCPUStat(cpu int) (cpuStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}, err
	}
	return parseCPUStat(b, cpu)
}

func parseCPUStat(b []byte, cpu int) (cpuStat, error) {
	prefix := fmt.Sprintf("cpu%d ", cpu)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)[1:]
		if len(f) < 8 {
			return cpuStat{}, fmt.Errorf("/proc/stat %s: %d fields", prefix, len(f))
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return cpuStat{}, fmt.Errorf("/proc/stat %s: %w", prefix, err)
			}
			v[i] = n
		}
		return cpuStat{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}, nil
	}
	return cpuStat{}, fmt.Errorf("/proc/stat: no line for cpu%d", cpu)
}

// cpuLoad describes what happened on the proxy's CPU during a run.
type cpuLoad struct {
	ProxyShare   float64 `json:"proxy_share"`   // proxy utime+stime / CPU time elapsed
	ForeignShare float64 `json:"foreign_share"` // user+nice+system+steal not spent by the proxy
	SoftirqShare float64 `json:"softirq_share"` // irq+softirq (mostly the loopback traffic itself)
	IdleShare    float64 `json:"idle_share"`
}

// foreignLoad compares the CPU's counters with the proxy's own CPU time (all in
// ticks) over the same interval.
func foreignLoad(before, after cpuStat, proxyTicks uint64) cpuLoad {
	d := func(a, b uint64) float64 {
		if a < b {
			return 0
		}
		return float64(a - b)
	}
	total := d(after.total(), before.total())
	if total == 0 {
		return cpuLoad{}
	}
	busy := d(after.user, before.user) + d(after.nice, before.nice) + d(after.system, before.system) + d(after.steal, before.steal)
	foreign := busy - float64(proxyTicks)
	if foreign < 0 {
		foreign = 0
	}
	return cpuLoad{
		ProxyShare:   float64(proxyTicks) / total,
		ForeignShare: foreign / total,
		SoftirqShare: (d(after.irq, before.irq) + d(after.softirq, before.softirq)) / total,
		IdleShare:    (d(after.idle, before.idle) + d(after.iowait, before.iowait)) / total,
	}
}
