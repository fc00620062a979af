// Package numa holds what numaproxy knows about the machine's CPUs and memory
// domains: CPU list parsing and formatting, the CPUs this process may run on
// (scheduler affinity intersected with the cgroup cpuset), thread pinning, the
// NUMA topology read from sysfs, and nginx's worker_processes and
// worker_cpu_affinity semantics.
//
// It exists so that every later piece that must stay on one domain (event
// loops, buffer pools, BPF steering) asks one place which CPUs and nodes exist
// and where the current thread is allowed to run. Topology and cgroup readers
// take a filesystem root so tests can build a fake sysfs tree.
package numa
