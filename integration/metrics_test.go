package integration

import (
	"bytes"
	stdtls "crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// stubStatusRE is nginx's stub_status text, byte for byte but for the numbers.
var stubStatusRE = regexp.MustCompile(`^Active connections: (\d+) \nserver accepts handled requests\n (\d+) (\d+) (\d+) \nReading: (\d+) Writing: (\d+) Waiting: (\d+) \n$`)

// stubStatus is a parsed status page: active, accepts, handled, requests, reading,
// writing, waiting.
type stubStatus [7]int

func getStubStatus(t *testing.T, addr string) (stubStatus, http.Header) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := stubStatusRE.FindStringSubmatch(string(body))
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("%s: status page %d %q is not nginx's format", addr, resp.StatusCode, body)
	}
	var s stubStatus
	for i := range s {
		s[i], _ = strconv.Atoi(m[i+1])
	}
	return s, resp.Header
}

// TestStubStatusMatchesNginx holds client connections in each state on numaproxy
// and on nginx, with the same http block, and compares the status pages: the same
// format, the same gauges, the same growth of accepts, handled and requests; and
// the $connections_* variables.
func TestStubStatusMatchesNginx(t *testing.T) {
	body := func(addr string) string {
		return `server { listen ` + addr + `;
  location = /status { stub_status; }
  location = /vars { return 200 "$connections_active $connections_reading $connections_writing $connections_waiting"; }
  location / { return 200 "ok"; }
}`
	}
	npAddr, ngAddr := addrFor(t), addrFor(t)
	startHTTP(t, body(npAddr), npAddr)
	startNginx(t, body(ngAddr), ngAddr)

	for _, tc := range []struct{ name, addr string }{{"numaproxy", npAddr}, {"nginx", ngAddr}} {
		before, hdr := getStubStatus(t, tc.addr)
		if ct := hdr.Get("Content-Type"); ct != "text/plain" {
			t.Errorf("%s: Content-Type %q, want text/plain", tc.name, ct)
		}
		// Two idle connections, one reading a head, one idle after a keep-alive
		// request, and three requests on connections that closed.
		var held []net.Conn
		for i := 0; i < 2; i++ {
			held = append(held, dial(t, tc.addr))
		}
		partial := dial(t, tc.addr)
		partial.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n"))
		held = append(held, partial)
		ka := newClient(t, tc.addr)
		ka.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		ka.read("GET")
		held = append(held, ka.c)
		for i := 0; i < 3; i++ {
			if _, err := roundTripRaw(t, tc.addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		var after stubStatus
		waitFor(t, tc.name+"'s status page to show the reading connection", 5*time.Second, func() bool {
			after, _ = getStubStatus(t, tc.addr)
			return after[4] == 1 && after[6] == 3
		})
		// The status request itself is the one writing (on the connection the first
		// page opened); the three closed ones are gone.
		want := stubStatus{5, 0, 0, 0, 1, 1, 3}
		got := after
		for i := 1; i <= 3; i++ {
			got[i] -= before[i]
		}
		// accepts and handled: 7 connections (4 held, 3 closed; the page's own is
		// kept alive from the first); requests: the held head, the keep-alive one,
		// three, and the polls of the page since the first.
		want[1], want[2] = got[1], got[2]
		if got[1] < 7 || got[2] != got[1] {
			t.Errorf("%s: accepts %d, handled %d since the first page, want at least 7, equal", tc.name, got[1], got[2])
		}
		want[3] = got[3]
		if got[3] < 6 {
			t.Errorf("%s: requests grew by %d, want at least 6", tc.name, got[3])
		}
		if got != want {
			t.Errorf("%s: status %v (counters since the first page), want %v", tc.name, got, want)
		}
		resp, err := http.Get("http://" + tc.addr + "/vars")
		if err != nil {
			t.Fatal(err)
		}
		vars, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(vars) != "5 1 1 3" {
			t.Errorf("%s: $connections_active/reading/writing/waiting = %q, want \"5 1 1 3\"", tc.name, vars)
		}
		for _, c := range held {
			c.Close()
		}
		http.DefaultClient.CloseIdleConnections()
	}
}

// scrape fetches the metrics with Accept (none: the default) and parses them.
func scrape(t *testing.T, addr, accept string) (map[string]*dto.MetricFamily, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %s", resp.StatusCode, body)
	}
	ct := resp.Header.Get("Content-Type")
	if accept != "" {
		return nil, ct, body
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("scrape: %v\n%s", err, body)
	}
	return fams, ct, body
}

// sum adds the values of the family's series whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	total := 0.0
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			ok = ok && labels[want[i]] == want[i+1]
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

// metricsConfig is a server on addr with metrics, a zone, and an upstream with
// keep-alive connections.
func metricsConfig(addr, backend string) string {
	return `upstream app { server ` + backend + `; keepalive 4; }
server { listen ` + addr + `;
  status_zone front;
  location = /metrics { metrics; }
  location /app/ { status_zone app; proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
  location / { return 404; }
}`
}

// TestMetricsCountWhatWasSent drives requests through two loops and checks that the
// scrape counts them: requests by class, zones, upstream tries and keep-alive
// reuse, durations, connections; OpenMetrics when asked for.
func TestMetricsCountWhatWasSent(t *testing.T) {
	be := newBackend(t, nil)
	addr := addrFor(t)
	startMain(t, "worker_processes 2;\n", metricsConfig(addr, be.Addr), addr)

	const ok, missing = 40, 7
	c := keepAliveClient(nil)
	for i := 0; i < ok; i++ {
		if resp, _ := get(t, c, "http://"+addr+"/app/x"); resp.StatusCode != 200 {
			t.Fatalf("GET /app/x: %d", resp.StatusCode)
		}
	}
	for i := 0; i < missing; i++ {
		if _, err := roundTripRaw(t, addr, "GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	fams, ct, _ := scrape(t, addr, "")
	if !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want the text format 0.0.4", ct)
	}
	check := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("2xx requests", sum(fams, "numaproxy_http_requests_total", "class", "2xx"), ok)
	check("4xx requests", sum(fams, "numaproxy_http_requests_total", "class", "4xx"), missing)
	check("request durations", sum(fams, "numaproxy_http_request_duration_seconds"), ok+missing)
	check("zone front", sum(fams, "numaproxy_http_zone_requests_total", "zone", "front"), ok+missing)
	check("zone app", sum(fams, "numaproxy_http_zone_requests_total", "zone", "app"), ok)
	check("upstream tries", sum(fams, "numaproxy_upstream_requests_total", "upstream", "app", "peer", be.Addr), ok)
	check("upstream 2xx", sum(fams, "numaproxy_upstream_responses_total", "upstream", "app", "class", "2xx"), ok)
	check("upstream response times", sum(fams, "numaproxy_upstream_response_time_seconds", "upstream", "app"), ok)
	check("upstream failures", sum(fams, "numaproxy_upstream_failures_total"), 0)
	// The keep-alive pool: every try but each loop's first reuses a connection.
	newConns := float64(be.conns.Load())
	check("upstream keep-alive reuse", sum(fams, "numaproxy_upstream_keepalive_reused_total"), ok-newConns)
	if got := sum(fams, "numaproxy_http_sent_bytes_total"); got < ok*2 {
		t.Errorf("sent bytes %v, want more than %d", got, ok*2)
	}
	// Every connection is sampled at its first request's head: all but the
	// harness's probe, which sent nothing.
	check("connections sampled for their incoming CPU", sum(fams, "numaproxy_numa_connections_sampled_total"),
		sum(fams, "numaproxy_http_connections_total")-1)
	if n := len(fams["numaproxy_connections_accepted_total"].GetMetric()); n != 2 {
		t.Errorf("accepted connections reported for %d loops, want 2", n)
	}
	check("writing connections (the scrape)", sum(fams, "numaproxy_connections", "state", "writing"), 1)
	check("reloads", sum(fams, "numaproxy_reloads_total", "result", "ok"), 0)

	// The scrape before counts once it ended.
	fams, _, _ = scrape(t, addr, "")
	check("2xx requests with the first scrape", sum(fams, "numaproxy_http_requests_total", "class", "2xx"), ok+1)

	_, ct, body := scrape(t, addr, "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	if !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") || !bytes.HasSuffix(body, []byte("# EOF\n")) {
		t.Errorf("OpenMetrics asked for: Content-Type %q, end %q", ct, body[max(0, len(body)-20):])
	}
}

// TestMetricsOffCountsNothing: without metrics, stub_status or status_zone the
// module adds no log handler and other modules keep no figures (checked through a
// reload that switches metrics on: the counts start from it).
func TestMetricsOffCountsNothing(t *testing.T) {
	be := newBackend(t, nil)
	addr := addrFor(t)
	in := startHTTP(t, `upstream app { server `+be.Addr+`; }
server { listen `+addr+`; location / { proxy_pass http://app; } }`, addr)
	for i := 0; i < 5; i++ {
		if _, err := roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(in.path("conf/numaproxy.conf"), []byte("error_log logs/error.log info;\nworker_processes 1;\nevents {}\nhttp {\n"+
		metricsConfig(addr, be.Addr)+"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.signal("reload")
	in.waitLog("configuration reloaded")
	var fams map[string]*dto.MetricFamily
	waitFor(t, "the metrics location", 5*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	fams, _, _ = scrape(t, addr, "")
	if got := sum(fams, "numaproxy_upstream_requests_total"); got > 0 {
		t.Errorf("upstream tries counted before metrics were configured: %v", got)
	}
	// The wait's own scrapes and nothing before the reload.
	if got := sum(fams, "numaproxy_http_requests_total", "class", "2xx"); got < 1 || got > 5 {
		t.Errorf("2xx requests %v: the ones before the reload were counted", got)
	}
	if got := sum(fams, "numaproxy_reloads_total", "result", "ok"); got != 1 {
		t.Errorf("reloads %v, want 1", got)
	}
}

// TestMetricsWithPrometheus scrapes numaproxy with Debian's Prometheus server and
// asks its HTTP API for the requests the test sent, per domain; promtool accepts
// the endpoint's output.
func TestMetricsWithPrometheus(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus is not installed; .ci/run installs it")
		}
		t.Skip("prometheus is not installed")
	}
	be := newBackend(t, nil)
	addr := addrFor(t)
	startMain(t, "worker_processes 2;\n", metricsConfig(addr, be.Addr), addr)
	const sent = 25
	c := keepAliveClient(nil)
	for i := 0; i < sent; i++ {
		get(t, c, "http://"+addr+"/app/p")
	}

	_, _, body := scrape(t, addr, "")
	check := exec.Command("promtool", "check", "metrics")
	check.Stdin = bytes.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	dir := t.TempDir()
	promAddr := addrFor(t)
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: numaproxy\n    static_configs:\n      - targets: ['%s']\n", addr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr)
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus's log:\n%s", out)
		}
	})
	// The scrapes count too: ask for the tries the upstream saw, and the 2xx
	// requests of the app zone, which the scrapes are not in.
	query := func(q string) (map[string]float64, error) {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string
			Data   struct {
				Result []struct {
					Metric map[string]string
					Value  [2]any
				}
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for _, s := range r.Data.Result {
			v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
			out[s.Metric["domain"]] = v
		}
		return out, nil
	}
	var got map[string]float64
	waitFor(t, "Prometheus to have scraped the requests", 60*time.Second, func() bool {
		got, err = query(`sum by (domain) (numaproxy_http_zone_requests_total{zone="app",class="2xx"})`)
		return err == nil && got["0"] == sent
	})
	if len(got) != 1 {
		t.Errorf("requests per domain %v, want domain 0 only", got)
	}
	up, err := query(`sum by (domain) (numaproxy_upstream_requests_total{upstream="app"})`)
	if err != nil || up["0"] != sent {
		t.Errorf("upstream tries per domain %v (%v), want %d", up, err, sent)
	}

	// The dashboard's queries are valid PromQL over these metrics.
	data, err := os.ReadFile("../contrib/grafana/numaproxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := strings.NewReplacer("$job", "numaproxy", "$__rate_interval", "1m").Replace(tg.Expr)
			resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"success"`) {
				t.Errorf("dashboard panel %q: query %s: %d %s", p.Title, q, resp.StatusCode, body)
			}
		}
	}
}

// TestConnectionVariablesAlone: the $connections_* variables count without a status
// page or metrics in the configuration.
func TestConnectionVariablesAlone(t *testing.T) {
	addr := addrFor(t)
	startHTTP(t, `server { listen `+addr+`;
  location / { return 200 "$connections_active $connections_reading $connections_writing $connections_waiting"; } }`, addr)
	idle := dial(t, addr)
	defer idle.Close()
	var got string
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasSuffix(got, "\r\n\r\n2 0 1 1") {
		if time.Now().After(deadline) {
			t.Fatalf("active, reading, writing, waiting: %q, want \"2 0 1 1\" (one idle connection, this request)", got)
		}
		var err error
		if got, err = roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMetricsUpstreamFailures: a server that refuses connections shows a connect
// failure and a retry; the request it failed is answered by the next one.
func TestMetricsUpstreamFailures(t *testing.T) {
	be := newBackend(t, nil)
	dead := addrFor(t) // nothing listens there
	addr := addrFor(t)
	startHTTP(t, `upstream app { server `+dead+`; server `+be.Addr+`; }
server { listen `+addr+`;
  location = /metrics { metrics; }
  location / { proxy_pass http://app; } }`, addr)
	const sent = 6
	for i := 0; i < sent; i++ {
		resp, err := roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if err != nil || !strings.HasPrefix(resp, "HTTP/1.1 200") {
			t.Fatalf("request %d: %q %v", i, resp, err)
		}
	}
	fams, _, _ := scrape(t, addr, "")
	// max_fails 1: after its failure the dead server rests for fail_timeout.
	for _, c := range []struct {
		name, peer string
		want       float64
	}{
		{"numaproxy_upstream_connect_failures_total", dead, 1},
		{"numaproxy_upstream_failures_total", dead, 1},
		{"numaproxy_upstream_retries_total", dead, 1},
		{"numaproxy_upstream_requests_total", dead, 1},
		{"numaproxy_upstream_requests_total", be.Addr, sent},
		{"numaproxy_upstream_failures_total", be.Addr, 0},
		{"numaproxy_upstream_responses_total", be.Addr, sent},
	} {
		if got := sum(fams, c.name, "upstream", "app", "peer", c.peer); got != c.want {
			t.Errorf("%s{peer=%s} = %v, want %v", c.name, c.peer, got, c.want)
		}
	}
}

// TestMetricsLocality reads the NUMA locality figures with two simulated domains
// (one CPU each) and clients pinned to a CPU: with a loop in each domain the
// steering program keeps every connection on its arrival domain (no crossing);
// with domain 1 left without a loop, its clients fall back to domain 0 and every one
// of them is counted as crossed, and as a steering fallback of domain 1.
func TestMetricsLocality(t *testing.T) {
	cpu0, cpu1 := twoCPUs(t)
	const n = 40
	for _, tc := range []struct {
		name, loops string
		crossed     [2]float64 // per serving domain, at most (the harness's probe and the scrape are not pinned and may cross)
		served      [2]float64 // connections sampled per serving domain, at least
	}{
		{"a loop per domain", "worker_processes auto;", [2]float64{2, 2}, [2]float64{n, n}},
		{"no loop in domain 1", fmt.Sprintf("worker_processes 1;\nworker_cpu_affinity %b;", 1<<cpu0), [2]float64{n + 2, 0}, [2]float64{2 * n, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := addrFor(t)
			dir := writeTree(t, map[string]string{"conf/numaproxy.conf": fmt.Sprintf(`error_log logs/error.log notice;
numa_domains %d %d;
%s
events { }
http { server { listen %s; location = /metrics { metrics; } location / { return 200 "$numa_node"; } } }
`, cpu0, cpu1, tc.loops, addr)})
			in := start(t, dir)
			in.waitLog("numa on")
			waitFor(t, "the server answering", 10*time.Second, func() bool { _, err := rawGetClose(addr); return err == nil })
			askFromCPU(t, cpu0, addr, n)
			askFromCPU(t, cpu1, addr, n)
			fams, _, _ := scrape(t, addr, "")
			for d := range 2 {
				ds := strconv.Itoa(d)
				crossed := sum(fams, "numaproxy_numa_connections_cross_domain_total", "domain", ds)
				served := sum(fams, "numaproxy_numa_connections_sampled_total", "domain", ds)
				t.Logf("domain %d: %v connections sampled, %v crossed", d, served, crossed)
				if crossed > tc.crossed[d] || served < tc.served[d] || (tc.crossed[d] > 2 && crossed < n) {
					t.Errorf("domain %d: %v of %v sampled connections crossed domains; want at most %v of at least %v",
						d, crossed, served, tc.crossed[d], tc.served[d])
				}
			}
			if tc.served[1] == 0 {
				if fb := sum(fams, "numaproxy_steering_packets_total", "domain", "1", "result", "fallback"); fb < n {
					t.Errorf("domain 1: %v steering fallbacks, want at least %d", fb, n)
				}
			} else if sel := sum(fams, "numaproxy_steering_packets_total", "domain", "1", "result", "selected"); sel < n {
				t.Errorf("domain 1: %v packets selected in their domain, want at least %d", sel, n)
			}
			if got := sum(fams, "numaproxy_numa_enabled"); got != 1 {
				t.Errorf("numa_enabled %v", got)
			}
			// Every client is 127.0.0.1: one conntrack entry, on node 0 (both domains' node).
			if got := sum(fams, "numaproxy_steering_conntrack_clients", "node", "0"); got != 1 {
				t.Errorf("conntrack clients on node 0: %v, want 1", got)
			}
		})
	}
}

// TestMetricsUpgradedConnections: a tunnel after a 101 is counted as upgraded (and
// writing) while it lasts.
func TestMetricsUpgradedConnections(t *testing.T) {
	up := newEchoUpgrade(t)
	addr := addrFor(t)
	startHTTP(t, `server { listen `+addr+`;
  location = /metrics { metrics; }
  location /ws { proxy_pass http://`+up.Addr+`; proxy_http_version 1.1;
    proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade"; } }`, addr)
	cl := newClient(t, addr)
	cl.send("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	if h := cl.head(); !strings.HasPrefix(h, "HTTP/1.1 101 ") {
		t.Fatalf("head %q", h)
	}
	fams, _, _ := scrape(t, addr, "")
	if got := sum(fams, "numaproxy_connections_upgraded"); got != 1 {
		t.Errorf("upgraded connections %v during the tunnel, want 1", got)
	}
	if got := sum(fams, "numaproxy_connections", "state", "writing"); got != 2 {
		t.Errorf("writing connections %v, want 2 (the tunnel, the scrape)", got)
	}
	cl.c.Close()
	waitFor(t, "the tunnel to close", 5*time.Second, func() bool {
		fams, _, _ = scrape(t, addr, "")
		return sum(fams, "numaproxy_connections_upgraded") == 0
	})
}

// TestMetricsTLSHandshakes: completed handshakes are counted by record layer
// (kTLS where the kernel takes the connection, else userspace), failed ones apart.
func TestMetricsTLSHandshakes(t *testing.T) {
	f := newTLSFiles(t)
	ssl, plain := addrFor(t), addrFor(t)
	startHTTP(t, fmt.Sprintf(`ssl_protocols TLSv1.2 TLSv1.3;
server { listen %s ssl; listen %s; ssl_certificate %s; ssl_certificate_key %s;
  location = /metrics { metrics; }
  location / { return 200 "ok"; } }`, ssl, plain, f.aEC, f.aECKey), ssl, plain)
	const good = 3
	for i := 0; i < good; i++ {
		c := httpsClient(f.pool, ssl, &stdtls.Config{ServerName: "a.test"})
		if resp, _ := get(t, c, "https://a.test/"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		c.CloseIdleConnections()
	}
	// A client whose handshake record is garbage (the harness's probe, which
	// connected and closed, failed already; plain HTTP gets nginx's 497 page and is
	// no handshake).
	fams, _, _ := scrape(t, plain, "")
	before := sum(fams, "numaproxy_tls_handshake_failures_total")
	if c, err := net.Dial("tcp", ssl); err == nil {
		c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
		io.ReadAll(c)
		c.Close()
	}
	waitFor(t, "the failed handshake to be counted", 5*time.Second, func() bool {
		fams, _, _ = scrape(t, plain, "")
		return sum(fams, "numaproxy_tls_handshake_failures_total") == before+1
	})
	ktls, user := sum(fams, "numaproxy_tls_handshakes_total", "path", "ktls"), sum(fams, "numaproxy_tls_handshakes_total", "path", "userspace")
	t.Logf("handshakes: %v kTLS, %v userspace", ktls, user)
	if ktls+user != good {
		t.Errorf("%v kTLS + %v userspace handshakes, want %d", ktls, user, good)
	}
}
