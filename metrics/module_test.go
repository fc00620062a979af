package metrics

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/conftest"
	"github.com/numaproxy/numaproxy/internal/testport"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/server"
	"github.com/numaproxy/numaproxy/tls"
	"github.com/numaproxy/numaproxy/upstream"
)

var registry = conf.MustRegistry(domains.Module, upstream.Module, httpcore.Module, rewrite.Module, proxy.Module, tls.Module, Module)

func loadConf(tb testing.TB, src string) (*conf.Config, error) {
	tb.Helper()
	return conftest.Load(tb, registry, src)
}

// startServer runs a server of two loops on the http block body src, whose
// "ADDR" is replaced by the address it listens on.
func startServer(tb testing.TB, src string) (*server.Server, string) {
	tb.Helper()
	return startServerMain(tb, "worker_processes 2;\n", src)
}

// startServerMain is startServer with main-context directives of its own.
func startServerMain(tb testing.TB, main, src string) (*server.Server, string) {
	tb.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testport.Free(tb))
	cfg, err := loadConf(tb, main+"events {}\nhttp {\n"+strings.ReplaceAll(src, "ADDR", addr)+"\n}\n")
	if err != nil {
		tb.Fatal(err)
	}
	snap, err := httpcore.NewSnapshot(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := server.Start(cfg, snap, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s, addr
}

func newCollector(s *server.Server) *collector {
	m := s.Monitor()
	return &collector{m: m, loops: m.Loops}
}

func TestDirectives(t *testing.T) {
	cfg, err := loadConf(t, `events {} http { server { status_zone a;
	location = /m { metrics; }
	location = /s { stub_status on; status_zone b; }
	location /n { location /n/x { } }
} }`)
	if err != nil {
		t.Fatal(err)
	}
	srv := cfg.HTTP.Servers[0]
	if z := srv.Conf(Module).(*LocConf).Zone; z == nil || z.name != "a" {
		t.Errorf("server zone %+v", z)
	}
	if z := srv.Locations[1].Conf(Module).(*LocConf).Zone; z == nil || z.name != "b" {
		t.Errorf("location zone %+v", z)
	}
	if z := srv.Locations[2].Locations[0].Conf(Module).(*LocConf).Zone; z != nil {
		t.Errorf("status_zone inherited: %+v", z)
	}
	for src, want := range map[string]string{
		"events {} http { server {\nmetrics;\n} }":                                     `"metrics" directive is not allowed here`,
		"events {} http { server {\nstub_status;\n} }":                                 `"stub_status" directive is not allowed here`,
		"events {} http { server { location / {\nmetrics on;\n} } }":                   `invalid number of arguments in "metrics" directive`,
		"events {} http { server { location / { metrics;\nstub_status;\n} } }":         `"stub_status" directive is duplicate`,
		"events {} http { server { status_zone a;\nstatus_zone b;\n} }":                `"status_zone" directive is duplicate`,
		"events {} http { server { location / { return 200;\nstatus_zone \"\";\n} } }": `invalid value ""`,
	} {
		if _, err := loadConf(t, src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
}

// TestCollectorSumsLoops sends requests to both loops of a server and checks the
// collector's sums per domain and zone, and its series per loop (testutil).
func TestCollectorSumsLoops(t *testing.T) {
	s, addr := startServer(t, `server { listen ADDR; status_zone front;
  location = /m { metrics; }
  location /ok { status_zone ok; return 200 "fine"; }
  location / { return 404; }
}`)
	// One connection per request: the kernel spreads them over the two listeners.
	get := func(path string, want int) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := io.ReadAll(c)
		if err != nil || !bytes.HasPrefix(resp, []byte("HTTP/1.1 "+strconv.Itoa(want))) {
			t.Fatalf("GET %s: %q %v", path, resp, err)
		}
	}
	for i := 0; i < 20; i++ {
		get("/ok", 200)
	}
	for i := 0; i < 3; i++ {
		get("/missing", 404)
	}
	c := newCollector(s)
	want := `
# HELP numaproxy_http_requests_total Requests that ended, by the class of the status sent (none: the connection ended before a response).
# TYPE numaproxy_http_requests_total counter
numaproxy_http_requests_total{class="1xx",domain="0"} 0
numaproxy_http_requests_total{class="2xx",domain="0"} 20
numaproxy_http_requests_total{class="3xx",domain="0"} 0
numaproxy_http_requests_total{class="4xx",domain="0"} 3
numaproxy_http_requests_total{class="5xx",domain="0"} 0
numaproxy_http_requests_total{class="none",domain="0"} 0
# HELP numaproxy_http_zone_requests_total Requests of a status_zone, by status class.
# TYPE numaproxy_http_zone_requests_total counter
numaproxy_http_zone_requests_total{class="1xx",domain="0",zone="front"} 0
numaproxy_http_zone_requests_total{class="2xx",domain="0",zone="front"} 20
numaproxy_http_zone_requests_total{class="3xx",domain="0",zone="front"} 0
numaproxy_http_zone_requests_total{class="4xx",domain="0",zone="front"} 3
numaproxy_http_zone_requests_total{class="5xx",domain="0",zone="front"} 0
numaproxy_http_zone_requests_total{class="none",domain="0",zone="front"} 0
numaproxy_http_zone_requests_total{class="1xx",domain="0",zone="ok"} 0
numaproxy_http_zone_requests_total{class="2xx",domain="0",zone="ok"} 20
numaproxy_http_zone_requests_total{class="3xx",domain="0",zone="ok"} 0
numaproxy_http_zone_requests_total{class="4xx",domain="0",zone="ok"} 0
numaproxy_http_zone_requests_total{class="5xx",domain="0",zone="ok"} 0
numaproxy_http_zone_requests_total{class="none",domain="0",zone="ok"} 0
# HELP numaproxy_reloads_total Configuration reloads since the start, by result.
# TYPE numaproxy_reloads_total counter
numaproxy_reloads_total{result="failed"} 0
numaproxy_reloads_total{result="ok"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"numaproxy_http_requests_total", "numaproxy_http_zone_requests_total", "numaproxy_reloads_total"); err != nil {
		t.Error(err)
	}
	// Per loop: two series of each.
	if n := testutil.CollectAndCount(c, "numaproxy_connections_accepted_total"); n != 2 {
		t.Errorf("%d accepted series, want one per loop", n)
	}
	if n := testutil.CollectAndCount(c, "numaproxy_connections"); n != 6 {
		t.Errorf("%d connection gauges, want 3 states x 2 loops", n)
	}
	// The histogram's count is every request, and each sampled connection is one.
	out, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "numaproxy_http_request_duration_seconds", "numaproxy_numa_connections_sampled_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`numaproxy_http_request_duration_seconds_count{domain="0"} 23`, `numaproxy_numa_connections_sampled_total{domain="0"} 23`} {
		if !strings.Contains(string(out), line+"\n") {
			t.Errorf("no %q in\n%s", line, out)
		}
	}
	// Names, help and units pass client_golang's linter.
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestGatherSkipsStoppedLoops: a loop that exited is left out, the scrape does not
// wait for it.
func TestGatherSkipsStoppedLoops(t *testing.T) {
	s, _ := startServer(t, `server { listen ADDR; location = /m { metrics; } }`)
	m := s.Monitor()
	m.Loops[1].Loop.Stop()
	<-m.Loops[1].Loop.Done()
	start := time.Now()
	figs := gather(m.Loops)
	if len(figs) != 1 || figs[0].Index != 0 {
		t.Errorf("gathered %d loops, want loop 0 only", len(figs))
	}
	if d := time.Since(start); d > gatherTimeout/2 {
		t.Errorf("gather waited %v for a stopped loop", d)
	}
}

// TestServeMetricsAndStatus serves both pages through a real server.
func TestServeMetricsAndStatus(t *testing.T) {
	s, addr := startServer(t, `server { listen ADDR; location = /m { metrics; } location = /s { stub_status; } }`)
	Attach(s)
	defer source.Store(nil)
	resp, err := http.Get("http://" + addr + "/m")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("\nnumaproxy_connections_accepted_total{domain=\"0\",loop=\"1\"} ")) {
		t.Errorf("metrics: %d\n%s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/s", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 405 {
		t.Errorf("POST to the status page: %v %v, want 405", resp, err)
	}
}

func TestReadNUMAMaps(t *testing.T) {
	f := filepath.Join(t.TempDir(), "numa_maps")
	os.WriteFile(f, []byte(`00400000 default file=/usr/bin/x mapped=10 N0=6 N1=4 kernelpagesize_kB=4
7f0000000000 bind:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=2048
7fff00000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
`), 0o644)
	got, inArena, err := readNUMAMaps(f, [][2]uintptr{{0x7f0000000000, 0x7f0040000000}, {0x500000, 0x600000}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 9*4096 || got[1] != 4*4096+512*2<<20 || len(got) != 2 {
		t.Errorf("per node %v", got)
	}
	if inArena[0][1] != 512*2<<20 || len(inArena[0]) != 1 || len(inArena[1]) != 0 {
		t.Errorf("per arena %v", inArena)
	}
}

func TestReadNumastat(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"node0", "node1", "possible"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "node1", "numastat"), []byte("numa_hit 120\nnuma_miss 3\nother_node 7\n"), 0o644)
	got, err := readNumastat(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []numastat{{"numa_hit", 120}, {"numa_miss", 3}, {"other_node", 7}}
	if len(got) != 1 || len(got[1]) != 3 || got[1][0] != want[0] || got[1][1] != want[1] || got[1][2] != want[2] {
		t.Errorf("numastat %v", got)
	}
}
