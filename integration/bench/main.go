// Command bench runs numaproxy side by side with nginx, HAProxy and Go's
// httputil.ReverseProxy under identical conditions and prints a table of
// requests per second, proxy CPU per request, latency at a fixed rate, memory
// per idle connection and NUMA locality, with ratios to nginx.
//
//	go run ./integration/bench -quick   # one short repetition of each shape
//	go run ./integration/bench          # the full run (minutes)
//
// Every proxy runs pinned to CPU 0; the load generators and the shared upstream
// run on CPU 1. See README.md in this folder.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

func main() {
	role := flag.String("role", "", "internal: run as a helper process (upstream, goproxy, relay)")
	listen := flag.String("listen", "", "internal: helper listen address")
	upstreamAddr := flag.String("upstream", "", "internal: goproxy and relay upstream address")
	quick := flag.Bool("quick", false, "one short repetition of each shape (under a minute)")
	reps := flag.Int("reps", 0, "repetitions of each shape (default 5, 1 with -quick)")
	duration := flag.Duration("d", 0, "measured time of each run, whole seconds (default 8s, 1s with -quick)")
	warmup := flag.Duration("warmup", -1, "unmeasured load before each run (default 1s, none with -quick)")
	idleConns := flag.Int("idle-conns", 10000, "idle keep-alive connections in the idle shape")
	idleBase := flag.Int("idle-base", 0, "idle shape: connections opened and held before the RSS baseline, so that the figure is the marginal cost of idle-conns more (one-off costs in the baseline)")
	locConns := flag.Int("locality-conns", 0, "fresh connections per locality run (default 4000, 1000 with -quick)")
	rate := flag.Float64("rate", 0, "open-loop rate in req/s (default: -rate-frac of nginx's keep-alive req/s)")
	rateFrac := flag.Float64("rate-frac", 0.5, "open-loop rate as a fraction of nginx's median keep-alive req/s")
	foreignMax := flag.Float64("foreign-max", 0.05, "share of CPU 0 that other processes may use before a run is repeated")
	retries := flag.Int("retries", -1, "repeats of a run with foreign load on CPU 0 (default 3, 1 with -quick)")
	proxies := flag.String("proxies", "numaproxy,nginx,haproxy,go-httputil", "proxies to compare, in interleaving order")
	shapes := flag.String("shapes", "keepalive,keepalive-64,log,logbuf,close,large,static-small,static-large,openloop,idle,reload,gzip1,gzip5,limitreq,reqlogic,cache-small,cache-large,locality,tls-hs-ecdsa,tls-hs-rsa,tls-resume,tls-keepalive,tls-large", "shapes to run")
	out := flag.String("out", "", "JSON results file (default integration/bench/results/<date>[-quick].json)")
	noInstall := flag.Bool("no-install", false, "do not apt-get missing tools")
	flag.Parse()

	if *role != "" {
		runRole(*role, *listen, *upstreamAddr)
		return
	}
	opt := options{quick: *quick, reps: *reps, duration: *duration, warmup: *warmup, idleConns: *idleConns, idleBase: *idleBase, locConns: *locConns,
		rate: *rate, rateFrac: *rateFrac, foreignMax: *foreignMax, retries: *retries,
		proxies: splitList(*proxies), shapes: splitList(*shapes)}
	if opt.reps == 0 {
		opt.reps = 5
		if opt.quick {
			opt.reps = 1
		}
	}
	if opt.duration == 0 {
		opt.duration = 8 * time.Second
		if opt.quick {
			opt.duration = time.Second
		}
	}
	if opt.warmup < 0 {
		opt.warmup = time.Second
		if opt.quick {
			opt.warmup = 0
		}
	}
	if opt.retries < 0 {
		opt.retries = 3
		if opt.quick {
			opt.retries = 1
		}
	}
	if opt.locConns == 0 {
		opt.locConns = 4000
		if opt.quick {
			opt.locConns = 1000
		}
	}
	if err := run(opt, *out, !*noInstall); err != nil {
		fmt.Fprintln(os.Stderr, "npbench:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// report is the JSON file of one run.
type report struct {
	Date       string            `json:"date"`
	Command    string            `json:"command"`
	CPUModel   string            `json:"cpu_model"`
	CPUs       int               `json:"cpus"`
	Kernel     string            `json:"kernel"`
	Revision   string            `json:"numaproxy_revision"`
	Versions   map[string]string `json:"versions"`
	Options    map[string]any    `json:"options"`
	OpenRate   float64           `json:"open_loop_rate,omitempty"`
	Skipped    map[string]string `json:"skipped,omitempty"`
	Summary    []summary         `json:"summary"`
	Runs       []runResult       `json:"runs"`
	Discarded  []runResult       `json:"discarded_for_foreign_load,omitempty"`
	DurationS  float64           `json:"duration_s"`
	Conditions string            `json:"conditions"`
}

func run(opt options, outPath string, install bool) error {
	begin := time.Now()
	for _, p := range opt.proxies {
		if _, ok := proxyDefs[p]; !ok {
			return fmt.Errorf("unknown proxy %q", p)
		}
	}
	titles := map[string]string{}
	for _, s := range shapeDefs {
		titles[s.Name] = s.Title
	}
	for _, s := range opt.shapes {
		if titles[s] == "" {
			return fmt.Errorf("unknown shape %q", s)
		}
	}
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("needs 2 CPUs (proxy on CPU 0, load on CPU 1); this machine has %d", runtime.NumCPU())
	}
	if err := pinSelf(1); err != nil {
		return err
	}
	if err := raiseNoFile(); err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if install {
		if err := ensureTools(); err != nil {
			logf("%v (peers that are missing are skipped)", err)
		}
	}
	tmp, err := os.MkdirTemp("", "npbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	e := &env{root: root, tmp: tmp, missing: map[string]string{}, versions: map[string]string{}}
	if e.self, err = os.Executable(); err != nil {
		return err
	}
	e.static = filepath.Join(tmp, "www")
	if e.certs, err = writeCerts(filepath.Join(tmp, "certs")); err != nil {
		return err
	}
	if err := writeStaticFiles(e.static); err != nil {
		return err
	}
	e.numaproxy = filepath.Join(tmp, "numaproxy")
	logf("building numaproxy")
	if e.revision, err = buildNumaproxy(root, e.numaproxy); err != nil {
		e.missing["numaproxy"] = err.Error()
		logf("%v", err)
	}
	if e.nginx, err = lookTool("nginx"); err != nil {
		e.missing["nginx"] = err.Error()
	}
	if e.haproxy, err = lookTool("haproxy"); err != nil {
		e.missing["haproxy"] = err.Error()
	}
	if _, err := lookTool("wrk"); err != nil {
		return fmt.Errorf("wrk is needed: %w", err)
	}
	e.versions["go"] = runtime.Version()
	if e.nginx != "" {
		e.versions["nginx"] = toolVersion(e.nginx, "-v")
	}
	if e.haproxy != "" {
		e.versions["haproxy"] = toolVersion(e.haproxy, "-v")
	}
	e.versions["wrk"] = toolVersion("wrk", "--version")
	if e.numaproxy != "" && e.missing["numaproxy"] == "" {
		e.versions["numaproxy"] = toolVersion(e.numaproxy, "-v")
	}

	h := &harness{env: e, opt: opt, skipped: map[string]string{}}
	defer func() {
		if h.upProc != nil {
			h.upProc.stop()
		}
	}()
	var active []string
	for _, p := range opt.proxies {
		if why := e.missing[p]; why != "" {
			h.skipped[p] = why
			continue
		}
		active = append(active, p)
	}
	model, cpus := machine()
	logf("%s, %d CPUs; proxies %s; %d reps of %v", model, cpus, strings.Join(active, " "), opt.reps, opt.duration)
	for _, name := range opt.shapes {
		var s shapeDef
		for _, d := range shapeDefs {
			if d.Name == name {
				s = d
			}
		}
		logf("shape %s: %s", s.Name, s.Title)
		if s.own != nil {
			s.own(h)
			continue
		}
		if s.Name == "openloop" {
			h.openLoopRate()
			titles[s.Name] = fmt.Sprintf("%s, %s req/s", s.Title, commas(h.rate, 0))
		}
		var procs []string
		for _, p := range active {
			if only := proxyDefs[p].only; only != nil && !slices.Contains(only, s.Name) {
				h.skipped[s.Name+" "+p] = "runs only " + strings.Join(only, ", ")
				continue
			}
			procs = append(procs, p)
		}
		if s.nginxOnly || s.files || s.accessLog != "" {
			all := procs
			procs = nil
			for _, p := range all {
				if p != "numaproxy" && p != "nginx" {
					why := "no limit_req"
					switch {
					case s.Name == "reqlogic":
						why = "no map, set, if and rewrite"
					case strings.HasPrefix(s.Name, "cache-"):
						why = "no proxy_cache"
					case s.files:
						why = "serves no files"
					case s.accessLog != "":
						why = "no nginx access log"
					}
					h.skipped[s.Name+" "+p] = why
					continue
				}
				procs = append(procs, p)
			}
		}
		if s.reload {
			all := procs
			procs = nil
			for _, p := range all {
				if proxyDefs[p].reload == nil {
					h.skipped[s.Name+" "+p] = "cannot reload"
					continue
				}
				procs = append(procs, p)
			}
		}
		if s.tls {
			var with []string
			for _, p := range procs {
				if p == "go-httputil" {
					h.skipped[s.Name+" "+p] = "the Go baseline serves plain HTTP only"
					continue
				}
				with = append(with, p)
			}
			procs = with
		}
		if s.gzip {
			var with []string
			for _, p := range procs {
				if !proxyDefs[p].gzip {
					h.skipped[s.Name+" "+p] = "does not compress"
					continue
				}
				with = append(with, p)
			}
			procs = with
		}
		for rep := 1; rep <= opt.reps; rep++ {
			for _, p := range procs {
				r := h.runProxy(s, p, rep)
				h.results = append(h.results, r)
				logf("  %s", r.line())
			}
		}
	}

	sums := summarize(h.results, h.discarded)
	command := "go run ./integration/bench " + strings.Join(os.Args[1:], " ")
	fmt.Printf("# numaproxy side-by-side benchmark, %s\n", begin.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("# %s, %d CPUs, Linux %s; numaproxy %s; %s; %s\n", model, cpus, kernelRelease(), e.revision, e.versions["nginx"], firstWords(e.versions["haproxy"], 3))
	fmt.Printf("# command: %s\n", strings.TrimSpace(command))
	fmt.Printf("# each proxy pinned to CPU 0, wrk/open-loop generator/upstream on CPU 1; %d rep(s) of %v, interleaved; median (min–max); ×nginx = ratio of medians\n", opt.reps, opt.duration)
	printTables(os.Stdout, sums, titles, h.skipped, opt.shapes)

	rep := report{
		Date: begin.UTC().Format(time.RFC3339), Command: strings.TrimSpace(command), CPUModel: model, CPUs: cpus, Kernel: kernelRelease(),
		Revision: e.revision, Versions: e.versions, OpenRate: h.rate, Skipped: h.skipped, Summary: sums, Runs: h.results,
		Discarded: h.discarded, DurationS: time.Since(begin).Seconds(),
		Conditions: "proxy pinned to CPU 0; load generators and upstream pinned to CPU 1; one upstream (fasthttp, GOMAXPROCS=1)",
		Options: map[string]any{"quick": opt.quick, "reps": opt.reps, "duration_s": opt.duration.Seconds(), "warmup_s": opt.warmup.Seconds(),
			"idle_conns": opt.idleConns, "idle_base": opt.idleBase, "locality_conns": opt.locConns, "rate_frac": opt.rateFrac, "foreign_max": opt.foreignMax, "retries": opt.retries},
	}
	if outPath == "" {
		name := begin.UTC().Format("2006-01-02T150405Z")
		if opt.quick {
			name += "-quick"
		}
		outPath = filepath.Join(root, "integration", "bench", "results", name+".json")
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(outPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("\n# results: %s (%.0f s)\n", outPath, time.Since(begin).Seconds())
	return nil
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}
