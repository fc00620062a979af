package main

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// The syscalls shapes count the system calls the proxy makes per request with
// `perf trace -s` attached to every thread of its process tree while wrk runs
// (after an unmeasured warm-up that opens the upstream connections). Counts are
// deterministic where CPU time on a shared machine is not; the tracer slows the
// proxy, which changes how many events one epoll wait returns, equally for each
// proxy. The idle time around the wrk run (about a second of attaching and
// detaching) is counted too: that is the runtime's own noise, a few hundred
// calls a second, spread over the requests.

// syscallDetail is the calls per request of one run, by system call.
type syscallDetail struct {
	Calls  map[string]float64 `json:"calls_per_req"`
	Errors map[string]float64 `json:"errors_per_req,omitempty"`
	Total  float64            `json:"total_per_req"`
}

func syscallShape(path string, headers ...string) func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
	return syscallShapeOn(false, path, headers...)
}

// syscallShapeOn is syscallShape over plain HTTP or, with tls, over https on
// the run's ECDSA address.
func syscallShapeOn(tls bool, path string, headers ...string) func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
	return func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
		perf, err := exec.LookPath("perf")
		if err != nil {
			return fmt.Errorf("perf is needed for the syscalls shapes: %w", err)
		}
		url := "http://" + addr.String() + path
		if tls {
			url = "https://" + h.cur.TLSEC + path
		}
		if _, _, err := runWrk(url, 16, time.Second, headers...); err != nil {
			return err
		}
		var pids []string
		for _, pid := range processTree(p.pid) {
			pids = append(pids, strconv.Itoa(pid))
		}
		out := filepath.Join(filepath.Dir(p.log), "perf-trace.txt")
		cmd := exec.Command("taskset", "-c", "1", perf, "trace", "-s", "-o", out, "-p", strings.Join(pids, ","))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("perf trace: %w", err)
		}
		time.Sleep(time.Second) // attached
		r, _, err := runWrk(url, 16, max(h.opt.duration, 3*time.Second), headers...)
		cmd.Process.Signal(os.Interrupt)
		werr := cmd.Wait()
		if err != nil {
			return err
		}
		f, ferr := os.Open(out)
		if ferr != nil {
			return fmt.Errorf("perf trace (%v): %w", werr, ferr)
		}
		defer f.Close()
		calls, errs := parsePerfTraceSummary(f)
		if len(calls) == 0 {
			return fmt.Errorf("perf trace counted nothing (%v)", werr)
		}
		res.Requests, res.Seconds, res.ReqPerSec = r.Requests, r.Seconds, r.ReqPerSec
		res.Errors += r.Errors
		res.ErrorKind = r.ErrorKinds
		if r.Requests == 0 {
			return fmt.Errorf("no requests")
		}
		d := syscallDetail{Calls: map[string]float64{}, Errors: map[string]float64{}}
		n := float64(r.Requests)
		for k, v := range calls {
			d.Calls[k] = float64(v) / n
			d.Total += float64(v) / n
			if errs[k] > 0 {
				d.Errors[k] = float64(errs[k]) / n
			}
		}
		res.Detail = d
		return nil
	}
}

// parsePerfTraceSummary sums the per-thread tables of `perf trace -s` by system
// call: calls and failed calls.
func parsePerfTraceSummary(r io.Reader) (calls, errs map[string]int64) {
	calls, errs = map[string]int64{}, map[string]int64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// "   epoll_pwait   1234   0   12.3 ..." ; skip headers and thread lines.
		if len(f) < 4 {
			continue
		}
		c, err1 := strconv.ParseInt(f[1], 10, 64)
		e, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || strings.ContainsAny(f[0], "()-") {
			continue
		}
		calls[f[0]] += c
		errs[f[0]] += e
	}
	return calls, errs
}

// printSyscallTable writes one column per proxy: calls per request by system
// call (median over repetitions), failed calls in parentheses.
func printSyscallTable(w io.Writer, rows []summary) {
	names := map[string]bool{}
	for _, s := range rows {
		for k := range s.Syscalls {
			names[k] = true
		}
	}
	var order []string
	for k := range names {
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := 0.0, 0.0
		for _, s := range rows {
			a += s.Syscalls[order[i]]
			b += s.Syscalls[order[j]]
		}
		if a != b {
			return a > b
		}
		return order[i] < order[j]
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "calls per request (failed)\t")
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t", s.Proxy)
	}
	fmt.Fprintln(tw)
	cell := func(c, e float64) string {
		if c == 0 {
			return "–"
		}
		if e >= 0.0005 {
			return fmt.Sprintf("%.3f (%.3f)", c, e)
		}
		return fmt.Sprintf("%.3f", c)
	}
	for _, k := range order {
		fmt.Fprintf(tw, "%s\t", k)
		for _, s := range rows {
			fmt.Fprintf(tw, "%s\t", cell(s.Syscalls[k], s.SyscallErrs[k]))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "total\t")
	for _, s := range rows {
		fmt.Fprintf(tw, "%.3f\t", s.SyscallTotal)
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "requests traced (req/s under the tracer)\t")
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t", fmtSpread(s.ReqPerSec, 0))
	}
	fmt.Fprintln(tw)
	tw.Flush()
}

// syscallMedians fills the summary's per-call medians from its runs.
func (s *summary) syscallMedians(rs []runResult) {
	calls, errs := map[string][]float64{}, map[string][]float64{}
	var total []float64
	var ds []syscallDetail
	for _, r := range rs {
		if d, ok := r.Detail.(syscallDetail); ok {
			ds = append(ds, d)
			total = append(total, d.Total)
		}
	}
	for _, d := range ds {
		for k := range d.Calls {
			if _, ok := calls[k]; ok {
				continue
			}
			for _, e := range ds { // a call absent from a run counts 0 in it
				calls[k] = append(calls[k], e.Calls[k])
				errs[k] = append(errs[k], e.Errors[k])
			}
		}
	}
	if len(ds) == 0 {
		return
	}
	s.Syscalls, s.SyscallErrs = map[string]float64{}, map[string]float64{}
	for k, v := range calls {
		s.Syscalls[k] = median(v)
		s.SyscallErrs[k] = median(errs[k])
	}
	s.SyscallTotal = median(total)
}
