package server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/headers"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/testport"
	"github.com/numaproxy/numaproxy/numa"
	"github.com/numaproxy/numaproxy/numa/domains"
	steer "github.com/numaproxy/numaproxy/numa/steering"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/tls"
	"github.com/numaproxy/numaproxy/upstream"
)

var registry = conf.MustRegistry(domains.Module, upstream.Module, httpcore.Module, rewrite.Module, proxy.Module, headers.Module, tls.Module)

// inVM is set by the two-node QEMU harness (integration/vm): the real topology then
// has node 0 = CPUs 0-1 and node 1 = CPUs 2-3.
var inVM = os.Getenv("NUMAPROXY_IN_VM") == "1"

func freePort(t *testing.T) int { return testport.Free(t) }

// startServer starts a server in this process on src (with PORT replaced).
func startServer(t *testing.T, src string) (*Server, string, *bytes.Buffer) {
	t.Helper()
	port := freePort(t)
	src = strings.ReplaceAll(src, "PORT", strconv.Itoa(port))
	cfg, snap := loadSnapshot(t, src)
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := Start(cfg, snap, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, "127.0.0.1:" + strconv.Itoa(port), logs
}

// loadSnapshot loads src as a configuration file.
func loadSnapshot(t *testing.T, src string) (*conf.Config, *httpcore.Snapshot) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: registry, Prefix: dir, File: file})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, snap
}

// testLogger logs to the test.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// askFrom sends n fresh-connection requests from a thread pinned to cpu and returns
// the response bodies.
func askFrom(t *testing.T, cpu int, addr string, n int) []string {
	t.Helper()
	var bodies []string
	err := numa.OnCPU(cpu, func() error {
		for i := 0; i < n; i++ {
			body, err := get(addr)
			if err != nil {
				return err
			}
			bodies = append(bodies, body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bodies
}

// get does one GET on a new connection and returns the body.
func get(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	head, body, ok := bytes.Cut(resp, []byte("\r\n\r\n"))
	if !ok || !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
		return "", fmt.Errorf("bad response %q", resp)
	}
	return string(body), nil
}

// domainCPUs returns one CPU of each of two domains, and the config line that
// makes them: the real nodes in the VM, a split of this machine elsewhere.
func domainCPUs(t *testing.T) (cpu0, cpu1 int, numaLine string) {
	if inVM {
		return 1, 3, "numa auto;"
	}
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpus := allowed.CPUs()
	if len(cpus) < 2 {
		t.Skip("needs two CPUs to simulate two domains")
	}
	return cpus[0], cpus[1], fmt.Sprintf("numa_domains %d %d;", cpus[0], cpus[1])
}

// TestConnectionsServedOnArrivalDomain is the point of numaproxy: a connection
// whose SYN arrived on a CPU of domain d is served by a loop of domain d. Without
// the BPF program about half cross, which shows the test can fail.
func TestConnectionsServedOnArrivalDomain(t *testing.T) {
	cpu0, cpu1, numaLine := domainCPUs(t)
	s, addr, _ := startServer(t, numaLine+`
worker_processes auto;
events { }
http { server { listen PORT; location / { return 200 "$numa_node $worker_cpu $incoming_cpu"; } } }`)
	if !s.Plan().Enabled || s.steer == nil || len(s.steer.perAddr) != 1 {
		t.Fatalf("steering not running: plan %s", s.Plan())
	}
	const n = 200
	for want, cpu := range []int{cpu0, cpu1} {
		wrong := 0
		for _, body := range askFrom(t, cpu, addr, n) {
			if f := strings.Fields(body); len(f) != 3 || f[0] != strconv.Itoa(want) {
				wrong++
			}
		}
		t.Logf("clients on CPU %d: %d/%d served by domain %d", cpu, n-wrong, n, want)
		if wrong != 0 {
			t.Errorf("clients on CPU %d: %d of %d served outside domain %d", cpu, wrong, n, want)
		}
	}
	checkLoopsPinned(t, s)
	checkConntrackOnDomainNodes(t, s)
	// Detach the program: the kernel's hash spreads connections over both domains.
	for _, l := range s.Loops() {
		for _, ln := range l.Listeners() {
			if err := steer.Detach(ln.Fd()); err != nil {
				t.Fatal(err)
			}
			break
		}
		break
	}
	crossed := 0
	for _, body := range askFrom(t, cpu0, addr, n) {
		if !strings.HasPrefix(body, "0 ") {
			crossed++
		}
	}
	t.Logf("without the program: %d/%d from CPU %d crossed to another domain", crossed, n, cpu0)
	if crossed < n/5 || crossed > n*4/5 {
		t.Errorf("without the program %d of %d crossed; expected about half", crossed, n)
	}
}

// TestDomainWithoutListenerFallsBack: with a loop only in domain 0, clients arriving
// on domain 1 are still served (the kernel's hash), and the stats count it.
func TestDomainWithoutListenerFallsBack(t *testing.T) {
	cpu0, cpu1, numaLine := domainCPUs(t)
	mask := make([]byte, cpu0+1)
	for i := range mask {
		mask[i] = '0'
	}
	mask[0] = '1' // binary mask, rightmost digit CPU 0: the leftmost digit is cpu0
	s, addr, _ := startServer(t, numaLine+`
worker_processes 1;
worker_cpu_affinity `+string(mask)+`;
events { }
http { server { listen PORT; location / { return 200 "$numa_node"; } } }`)
	for _, body := range askFrom(t, cpu1, addr, 50) {
		if body != "0" {
			t.Fatalf("served by domain %q; only domain 0 has a loop", body)
		}
	}
	var fallback uint64
	for _, st := range s.steer.perAddr {
		stats, err := st.Stats()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range stats {
			fallback += d.Fallback
		}
	}
	t.Logf("fallback count: %d", fallback)
	if fallback < 50 {
		t.Fatalf("stats count %d fallbacks, want 50", fallback)
	}
}

// TestPoolsReturnEverything: after a burst of requests the node-bound pools have
// every buffer back: no leak per request or per connection.
func TestPoolsReturnEverything(t *testing.T) {
	_, _, numaLine := domainCPUs(t)
	s, addr, _ := startServer(t, numaLine+`
worker_processes auto;
events { }
http { server { listen PORT; location / { return 200 "ok"; } } }`)
	for i := 0; i < 100; i++ {
		if _, err := get(addr); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		inUse := int64(0)
		for _, p := range s.pools {
			for _, c := range p.Stats().Classes {
				inUse += c.InUse
			}
		}
		// Each loop keeps its read buffer; nothing else may be out.
		if inUse <= int64(len(s.loops)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d buffers still in use after the connections closed", inUse)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range s.pools {
		if !p.Bound() {
			t.Errorf("pool of domain %d not bound to node %d: %v", p.ID(), p.Node(), p.BindErr())
		}
	}
}

// checkLoopsPinned: every loop's thread runs on exactly its CPU, which lies in its
// domain (on the real two-node guest: loops on both nodes).
func checkLoopsPinned(t *testing.T, s *Server) {
	t.Helper()
	for i, l := range s.Loops() {
		set, err := numa.ThreadAffinity(l.Tid())
		if err != nil {
			t.Fatal(err)
		}
		d := s.plan.Domains[s.domain[i]]
		if set.Count() != 1 || !set.Has(l.CPU()) || !d.CPUs.Has(l.CPU()) {
			t.Errorf("loop %d: thread affinity %s, CPU %d, domain %d (%s)", i, set, l.CPU(), d.ID, d.CPUs)
		}
		t.Logf("loop %d: thread %d pinned to CPU %s, domain %d, memory node %d", i, l.Tid(), set, d.ID, d.Node)
	}
}

// checkConntrackOnDomainNodes: the SYNs of domain d were counted in the conntrack map
// created on domain d's node.
func checkConntrackOnDomainNodes(t *testing.T, s *Server) {
	t.Helper()
	for _, st := range s.steer.perAddr {
		t.Logf("conntrack maps on nodes %v", st.ConntrackNodes())
		for _, d := range s.plan.Domains {
			clients, err := st.Clients(d.Node)
			if err != nil {
				t.Fatal(err)
			}
			syns := uint64(0)
			for _, c := range clients {
				if d.ID < len(c.SYNs) {
					syns += uint64(c.SYNs[d.ID])
				}
			}
			t.Logf("domain %d: %d SYNs counted in the map on node %d", d.ID, syns, d.Node)
			if syns == 0 {
				t.Errorf("domain %d: no SYN counted in the conntrack map of node %d", d.ID, d.Node)
			}
		}
	}
}
