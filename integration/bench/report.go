package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// spread is the median and range of one figure over repetitions.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	s := spread{Median: median(v), Min: math.Inf(1), Max: math.Inf(-1), N: len(v)}
	for _, x := range v {
		s.Min = math.Min(s.Min, x)
		s.Max = math.Max(s.Max, x)
	}
	return s
}

// summary is one row of the table: a proxy in a shape over all repetitions.
type summary struct {
	Shape     string  `json:"shape"`
	Proxy     string  `json:"proxy"`
	Runs      int     `json:"runs"`
	ReqPerSec spread  `json:"req_per_sec"`
	CPUus     spread  `json:"cpu_us_per_req"`
	UserCPUus spread  `json:"user_cpu_us_per_req"`
	RSSMiB    spread  `json:"rss_mib"`
	MBps      spread  `json:"mb_per_s"`
	P50       spread  `json:"p50_us"`
	P99       spread  `json:"p99_us"`
	P999      spread  `json:"p999_us"`
	KBPerConn spread  `json:"kb_per_idle_conn"`
	GzipBytes spread  `json:"gzip_bytes"`
	LagP99    spread  `json:"generator_lag_p99_us"`
	Local     spread  `json:"local_fraction"`
	Errors    int64   `json:"errors"`
	ErrorKind string  `json:"error_kind,omitempty"`
	Crashes   int     `json:"crashes"`
	Reruns    int     `json:"reruns"` // runs repeated for foreign load on CPU 0
	Foreign   float64 `json:"max_foreign_share"`
	Reloads   int     `json:"reloads,omitempty"`
	// The reqlogic shape: its baseline's CPU per request and the ratio to it of
	// each run's own (pairedDetail).
	BaseCPUus   spread `json:"baseline_cpu_us_per_req"`
	CPUVsBase   spread `json:"cpu_vs_baseline"`
	CPUOverBase spread `json:"cpu_us_over_baseline"`
	// Ratios of medians to nginx's in the same shape (0 when nginx has no row).
	ReqPerSecVsNginx float64 `json:"req_per_sec_vs_nginx,omitempty"`
	CPUVsNginx       float64 `json:"cpu_vs_nginx,omitempty"`
	P99VsNginx       float64 `json:"p99_vs_nginx,omitempty"`
	KBVsNginx        float64 `json:"kb_per_conn_vs_nginx,omitempty"`
	MBpsVsNginx      float64 `json:"mb_per_s_vs_nginx,omitempty"`
	GzipVsNginx      float64 `json:"gzip_bytes_vs_nginx,omitempty"`
	// CPU per request over nginx's run of the same repetition, run by run: on a
	// machine whose speed drifts between runs, the pairs keep what one
	// repetition shares (the spread of ratios of medians does not). BelowNginx
	// counts the repetitions where it was under 1.
	CPUVsNginxPaired spread `json:"cpu_vs_nginx_paired"`
	BelowNginx       int    `json:"reps_below_nginx"`
	// The syscalls shapes: calls per request by system call, medians.
	Syscalls     map[string]float64 `json:"syscalls_per_req,omitempty"`
	SyscallErrs  map[string]float64 `json:"syscall_errors_per_req,omitempty"`
	SyscallTotal float64            `json:"syscalls_total_per_req,omitempty"`
}

func summarize(results, discarded []runResult) []summary {
	type key struct{ shape, proxy string }
	var order []key
	groups := map[key][]runResult{}
	for _, r := range results {
		k := key{r.Shape, r.Proxy}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []summary
	for _, k := range order {
		rs := groups[k]
		s := summary{Shape: k.shape, Proxy: k.proxy, Runs: len(rs)}
		var rps, cpu, user, rss, mbps, p50, p99, p999, kb, local, lag, gz, baseCPU, vsBase, overBase []float64
		for _, r := range rs {
			s.Errors += r.Errors
			if s.ErrorKind == "" && r.ErrorKind != "" {
				s.ErrorKind = r.ErrorKind
			}
			if r.Crashed {
				s.Crashes++
			}
			s.Foreign = math.Max(s.Foreign, r.Load.ForeignShare)
			if r.Requests == 0 {
				continue // a run that failed outright has no figures
			}
			rps = append(rps, r.ReqPerSec)
			cpu = append(cpu, r.CPUus)
			user = append(user, r.UserCPUus)
			rss = append(rss, float64(r.RSSBytes)/(1<<20))
			if r.MBps > 0 {
				mbps = append(mbps, r.MBps)
			}
			if r.GzipBytes > 0 {
				gz = append(gz, r.GzipBytes)
			}
			if r.P50 > 0 {
				p50, p99, p999 = append(p50, r.P50), append(p99, r.P99), append(p999, r.P999)
			}
			if d, ok := r.Detail.(openLoopResult); ok {
				lag = append(lag, d.LagP99)
			}
			if d, ok := r.Detail.(reloadDetail); ok {
				s.Reloads += d.Reloads
			}
			if d, ok := r.Detail.(pairedDetail); ok && d.CPUVsBase > 0 {
				baseCPU, vsBase = append(baseCPU, d.BaseCPUus), append(vsBase, d.CPUVsBase)
				overBase = append(overBase, d.CPUOverBase)
			}
			if k.shape == "idle" {
				kb = append(kb, r.KBPerConn)
			}
			if k.shape == "locality" {
				local = append(local, r.LocalFraction)
			}
		}
		for _, d := range discarded {
			if d.Shape == k.shape && d.Proxy == k.proxy {
				s.Reruns++
			}
		}
		s.ReqPerSec, s.CPUus, s.RSSMiB, s.MBps = spreadOf(rps), spreadOf(cpu), spreadOf(rss), spreadOf(mbps)
		s.P50, s.P99, s.P999, s.KBPerConn, s.Local = spreadOf(p50), spreadOf(p99), spreadOf(p999), spreadOf(kb), spreadOf(local)
		s.LagP99, s.GzipBytes, s.UserCPUus = spreadOf(lag), spreadOf(gz), spreadOf(user)
		s.BaseCPUus, s.CPUVsBase, s.CPUOverBase = spreadOf(baseCPU), spreadOf(vsBase), spreadOf(overBase)
		s.syscallMedians(rs)
		out = append(out, s)
	}
	ratio := func(a, b spread) float64 {
		if a.N == 0 || b.N == 0 || b.Median == 0 {
			return 0
		}
		return a.Median / b.Median
	}
	for i := range out {
		for _, n := range out {
			if n.Shape == out[i].Shape && n.Proxy == "nginx" {
				out[i].ReqPerSecVsNginx = ratio(out[i].ReqPerSec, n.ReqPerSec)
				out[i].CPUVsNginx = ratio(out[i].CPUus, n.CPUus)
				out[i].P99VsNginx = ratio(out[i].P99, n.P99)
				out[i].KBVsNginx = ratio(out[i].KBPerConn, n.KBPerConn)
				out[i].MBpsVsNginx = ratio(out[i].MBps, n.MBps)
				out[i].GzipVsNginx = ratio(out[i].GzipBytes, n.GzipBytes)
			}
		}
		if out[i].Proxy != "nginx" {
			out[i].CPUVsNginxPaired, out[i].BelowNginx = pairedCPU(results, out[i].Shape, out[i].Proxy)
		}
	}
	return out
}

// pairedCPU is proxy's CPU per request over nginx's in the same repetition of
// shape, for each repetition both ran, and how many of those ratios are below 1.
func pairedCPU(results []runResult, shape, proxy string) (spread, int) {
	nginx := map[int]float64{}
	for _, r := range results {
		if r.Shape == shape && r.Proxy == "nginx" && r.Requests > 0 {
			nginx[r.Rep] = r.CPUus
		}
	}
	var ratios []float64
	below := 0
	for _, r := range results {
		if n := nginx[r.Rep]; r.Shape == shape && r.Proxy == proxy && r.Requests > 0 && n > 0 {
			ratios = append(ratios, r.CPUus/n)
			if r.CPUus < n {
				below++
			}
		}
	}
	return spreadOf(ratios), below
}

// fmtPaired prints the paired ratios' median and range, and in how many
// repetitions the proxy was below nginx.
func fmtPaired(s summary) string {
	if s.CPUVsNginxPaired.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s, %d/%d below", fmtSpread(s.CPUVsNginxPaired, 2), s.BelowNginx, s.CPUVsNginxPaired.N)
}

// fmtSpread prints "median (min–max)" with the given precision.
func fmtSpread(s spread, prec int) string {
	if s.N == 0 {
		return "–"
	}
	f := func(v float64) string { return commas(v, prec) }
	if s.N == 1 {
		return f(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
}

func fmtRatio(r float64) string {
	if r == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", r)
}

// commas formats v with prec decimals and thousands separators.
func commas(v float64, prec int) string {
	s := fmt.Sprintf("%.*f", prec, v)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if neg {
		out = "-" + out
	}
	if frac != "" {
		out += "." + frac
	}
	return out
}

// printTables writes one table per shape.
func printTables(w io.Writer, sums []summary, titles map[string]string, skipped map[string]string, shapeOrder []string) {
	byShape := map[string][]summary{}
	for _, s := range sums {
		byShape[s.Shape] = append(byShape[s.Shape], s)
	}
	for _, shape := range shapeOrder {
		rows := byShape[shape]
		if len(rows) == 0 {
			if msg, ok := skipped[shape]; ok {
				fmt.Fprintf(w, "\n## %s: %s\n", titles[shape], msg)
			}
			continue
		}
		fmt.Fprintf(w, "\n## %s\n", titles[shape])
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		errCol := func(s summary) string {
			e := fmt.Sprint(s.Errors)
			if s.Crashes > 0 {
				e += fmt.Sprintf(", %d crashed", s.Crashes)
			}
			return e
		}
		switch shape {
		case "syscalls-keepalive", "syscalls-close", "syscalls-tls-keepalive", "syscalls-static", "syscalls-log", "syscalls-logbuf", "syscalls-cache-large":
			printSyscallTable(tw, rows)
		case "openloop":
			fmt.Fprintln(tw, "proxy\treq/s\tCPU µs/req\tCPU ×nginx\tp50 µs\tp99 µs\tp99.9 µs\tp99 ×nginx\tsend lag p99 µs\tRSS MiB\terrors\treruns\t")
			for _, s := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", s.Proxy, fmtSpread(s.ReqPerSec, 0), fmtSpread(s.CPUus, 1), fmtRatio(s.CPUVsNginx),
					fmtSpread(s.P50, 0), fmtSpread(s.P99, 0), fmtSpread(s.P999, 0), fmtRatio(s.P99VsNginx), fmtSpread(s.LagP99, 0), fmtSpread(s.RSSMiB, 1), errCol(s), s.Reruns)
			}
		case "idle":
			fmt.Fprintln(tw, "proxy\tKB per idle conn\tKB ×nginx\tRSS MiB (10k open)\tCPU µs per conn+request\tCPU ×nginx\terrors\treruns\t")
			for _, s := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", s.Proxy, fmtSpread(s.KBPerConn, 2), fmtRatio(s.KBVsNginx), fmtSpread(s.RSSMiB, 1),
					fmtSpread(s.CPUus, 1), fmtRatio(s.CPUVsNginx), errCol(s), s.Reruns)
			}
		case "large", "tls-large":
			fmt.Fprintln(tw, "proxy\treq/s\tMB/s\tMB/s ×nginx\tCPU µs/req\tCPU ×nginx\tRSS MiB\terrors\treruns\t")
			for _, s := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", s.Proxy, fmtSpread(s.ReqPerSec, 0), fmtSpread(s.MBps, 0), fmtRatio(s.MBpsVsNginx),
					fmtSpread(s.CPUus, 1), fmtRatio(s.CPUVsNginx), fmtSpread(s.RSSMiB, 1), errCol(s), s.Reruns)
			}
		case "gzip1", "gzip5":
			fmt.Fprintln(tw, "proxy\treq/s\tCPU µs/req\tCPU ×nginx\tgzip bytes\tbytes ×nginx\tRSS MiB\terrors\treruns\t")
			for _, s := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", s.Proxy, fmtSpread(s.ReqPerSec, 0), fmtSpread(s.CPUus, 1), fmtRatio(s.CPUVsNginx),
					fmtSpread(s.GzipBytes, 0), fmtRatio(s.GzipVsNginx), fmtSpread(s.RSSMiB, 1), errCol(s), s.Reruns)
			}
		case "reload":
			fmt.Fprintln(tw, "proxy\treq/s\treq/s ×nginx\treloads\terrors\terrors/reload\tCPU µs/req\tCPU ×nginx\treruns\t")
			for _, s := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%.1f\t%s\t%s\t%d\t\n", s.Proxy, fmtSpread(s.ReqPerSec, 0), fmtRatio(s.ReqPerSecVsNginx), s.Reloads,
					errCol(s), s.errorsPerReload(), fmtSpread(s.CPUus, 1), fmtRatio(s.CPUVsNginx), s.Reruns)
			}
		case "locality":
			fmt.Fprintln(tw, "variant\tserved on arrival domain\tconn/s\tCPU µs/conn (2 CPUs)\tRSS MiB\terrors\t")
			for _, s := range rows {
				loc := "–"
				if s.Local.N == 1 {
					loc = fmt.Sprintf("%.1f%%", 100*s.Local.Median)
				} else if s.Local.N > 1 {
					loc = fmt.Sprintf("%.1f%% (%.1f–%.1f)", 100*s.Local.Median, 100*s.Local.Min, 100*s.Local.Max)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Proxy, loc, fmtSpread(s.ReqPerSec, 0), fmtSpread(s.CPUus, 1), fmtSpread(s.RSSMiB, 1), errCol(s))
			}
		case "reqlogic", "log", "logbuf":
			fmt.Fprintln(tw, "proxy\treq/s\treq/s ×nginx\tCPU µs/req\tCPU ×nginx\tCPU ×nginx, paired\tbaseline CPU µs/req\tCPU ×baseline\tCPU µs over baseline\tRSS MiB\terrors\treruns\t")
			for _, s := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", s.Proxy, fmtSpread(s.ReqPerSec, 0), fmtRatio(s.ReqPerSecVsNginx),
					fmtSpread(s.CPUus, 1), fmtRatio(s.CPUVsNginx), fmtPaired(s), fmtSpread(s.BaseCPUus, 1), fmtSpread(s.CPUVsBase, 3), fmtSpread(s.CPUOverBase, 2), fmtSpread(s.RSSMiB, 1), errCol(s), s.Reruns)
			}
		default:
			fmt.Fprintln(tw, "proxy\treq/s\treq/s ×nginx\tCPU µs/req\tCPU ×nginx\tCPU ×nginx, paired\tof which user µs/req\tRSS MiB\terrors\treruns\t")
			for _, s := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", s.Proxy, fmtSpread(s.ReqPerSec, 0), fmtRatio(s.ReqPerSecVsNginx),
					fmtSpread(s.CPUus, 1), fmtRatio(s.CPUVsNginx), fmtPaired(s), fmtSpread(s.UserCPUus, 1), fmtSpread(s.RSSMiB, 1), errCol(s), s.Reruns)
			}
		}
		tw.Flush()
		for _, s := range rows {
			if s.ErrorKind != "" {
				fmt.Fprintf(w, "  %s errors: %s\n", s.Proxy, oneLine(s.ErrorKind))
			}
		}
		if msg, ok := skipped[shape+" numa_domains"]; ok {
			fmt.Fprintf(w, "  numaproxy numa_domains 0 1: %s\n", msg)
		}
	}
	var other []string
	for k, v := range skipped {
		if !contains(shapeOrder, k) && !strings.HasSuffix(k, " numa_domains") {
			other = append(other, k+": "+v)
		}
	}
	sort.Strings(other)
	for _, o := range other {
		fmt.Fprintf(w, "skipped %s\n", o)
	}
}

func (s summary) errorsPerReload() float64 {
	if s.Reloads == 0 {
		return 0
	}
	return float64(s.Errors) / float64(s.Reloads)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// line is the progress line of one run.
func (r runResult) line() string {
	s := fmt.Sprintf("%-9s %-26s rep %d: %s req/s, %.1f µs CPU/req, RSS %.1f MiB, foreign %.0f%%",
		r.Shape, r.Proxy, r.Rep, commas(r.ReqPerSec, 0), r.CPUus, float64(r.RSSBytes)/(1<<20), 100*r.Load.ForeignShare)
	switch {
	case r.Shape == "openloop":
		s += fmt.Sprintf(", p50 %.0f p99 %.0f p99.9 %.0f µs", r.P50, r.P99, r.P999)
	case r.Shape == "idle":
		s += fmt.Sprintf(", %.2f KB/conn", r.KBPerConn)
	case r.Shape == "large":
		s += fmt.Sprintf(", %.0f MB/s", r.MBps)
	case r.GzipBytes > 0:
		s += fmt.Sprintf(", %.0f bytes compressed", r.GzipBytes)
	case r.Shape == "locality":
		s += fmt.Sprintf(", %.1f%% local", 100*r.LocalFraction)
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors (%s)", r.Errors, oneLine(r.ErrorKind))
	}
	if r.Crashed {
		s += ", CRASHED"
	}
	return s
}
