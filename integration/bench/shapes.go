package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// runResult is one measured run of one proxy in one shape.
type runResult struct {
	Shape     string  `json:"shape"`
	Proxy     string  `json:"proxy"`
	Rep       int     `json:"rep"`
	Attempt   int     `json:"attempt"`
	Requests  int64   `json:"requests"`
	Seconds   float64 `json:"seconds"`
	ReqPerSec float64 `json:"req_per_sec"`
	// Proxy CPU (utime+stime of its process tree) per request, µs.
	CPUus float64 `json:"cpu_us_per_req"`
	// Of which in user mode (utime): what the proxy's code costs; the rest is
	// the kernel's, mostly loopback TCP, paid alike by every proxy.
	UserCPUus float64 `json:"user_cpu_us_per_req"`
	RSSBytes  int64   `json:"rss_bytes"` // at the end of the run
	Load      cpuLoad `json:"cpu0_load"` // the proxy's CPU during the run
	// Shape-specific figures; zero where the shape does not measure them.
	MBps          float64 `json:"mb_per_s,omitempty"`
	P50           float64 `json:"p50_us,omitempty"`
	P99           float64 `json:"p99_us,omitempty"`
	P999          float64 `json:"p999_us,omitempty"`
	KBPerConn     float64 `json:"kb_per_idle_conn,omitempty"`
	GzipBytes     float64 `json:"gzip_bytes,omitempty"` // the compressed body of the gzip shapes
	LocalFraction float64 `json:"local_fraction,omitempty"`
	Errors        int64   `json:"errors"`
	ErrorKind     string  `json:"error_kind,omitempty"`
	Crashed       bool    `json:"crashed,omitempty"`
	Detail        any     `json:"detail,omitempty"`
}

type options struct {
	quick      bool
	reps       int
	duration   time.Duration
	warmup     time.Duration
	idleConns  int
	idleBase   int // idle connections held before the baseline
	locConns   int
	rate       float64
	rateFrac   float64
	foreignMax float64
	retries    int
	proxies    []string
	shapes     []string
}

// harness runs shapes over proxies and collects results.
type harness struct {
	env       *env
	opt       options
	upstream  netip.AddrPort
	upProc    *proc
	results   []runResult
	discarded []runResult // runs repeated because of foreign load on CPU 0
	skipped   map[string]string
	rate      float64  // open-loop rate used
	cur       confData // the configuration of the run under way
}

// shapeDef is one benchmark shape. A shape with perProxy runs once per proxy and
// repetition, interleaved; otherwise run does everything itself (its own
// variants) and reports rows under its own proxy names.
type shapeDef struct {
	Name      string
	Title     string
	measure   func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error
	own       func(h *harness) // shapes that start their own processes
	reload    bool             // only proxies that can reload; started ready for it
	gzip      bool             // only proxies that compress
	nginxOnly bool             // only numaproxy and nginx (nginx's directives)
	files     bool             // only servers that serve files (numaproxy, nginx)
	// accessLog: access_log's arguments (the file relative to the run's folder);
	// only the proxies with nginx's log module run the shape.
	accessLog string
	// upKeepalive: the upstream block's keepalive (default 32, fewer than the 50
	// clients of keepalive, so nginx reconnects to the upstream as the load shifts).
	upKeepalive int
	tls         bool // TLS listeners (numaproxy, nginx, HAProxy)
	noResume    bool // with session resumption off
}

var shapeDefs = []shapeDef{
	{Name: "keepalive", Title: "keep-alive, ~100-byte response (wrk -t1 -c50)", measure: (*harness).keepAlive},
	{Name: "keepalive-64", Title: "keep-alive as above, upstream keepalive 64 (more idle connections kept than the 50 clients: no upstream reconnects)", measure: (*harness).keepAlive, upKeepalive: 64},
	{Name: "log", Title: "keepalive-64 as above, access_log combined to a file; baseline: the same process through a location with access_log off", measure: (*harness).logShape, accessLog: "access.log combined", upKeepalive: 64},
	{Name: "logbuf", Title: "keepalive-64 as above, access_log combined to a file with buffer=64k; baseline: the same process through a location with access_log off", measure: (*harness).logShape, accessLog: "access.log combined buffer=64k", upKeepalive: 64},
	{Name: "close", Title: "new connection per request (wrk -t1 -c50 -H 'Connection: close')", measure: (*harness).newConn},
	{Name: "large", Title: "1 MiB response (wrk -t1 -c10)", measure: (*harness).large},
	{Name: "static-small", Title: "static file, keep-alive, 100 bytes (wrk -t1 -c50; sendfile on)", measure: (*harness).staticSmall, files: true},
	{Name: "static-large", Title: "static file, 1 MiB (wrk -t1 -c10; sendfile on)", measure: (*harness).staticLarge, files: true},
	{Name: "openloop", Title: "open loop at a fixed rate (50 keep-alive connections)", measure: (*harness).openLoop},
	{Name: "idle", Title: "idle keep-alive connections (one request each)", measure: (*harness).idle},
	{Name: "reload", Title: "reloads every 0.5 s under connection churn (wrk -t1 -c50 -H 'Connection: close'; nginx listens with reuseport)", measure: (*harness).reloadChurn, reload: true},
	{Name: "gzip1", Title: "100 KB text/html compressed with gzip level 1 (wrk -t1 -c10, Accept-Encoding: gzip)", measure: gzipShape("/gz1/100k"), gzip: true},
	{Name: "gzip5", Title: "100 KB text/html compressed with gzip level 5 (wrk -t1 -c10, Accept-Encoding: gzip)", measure: gzipShape("/gz5/100k"), gzip: true},
	{Name: "limitreq", Title: "keep-alive with limit_req on a 64m zone, rate never reached (wrk -t1 -c50; compare with keepalive)", measure: (*harness).limitReq, nginxOnly: true},
	{Name: "reqlogic", Title: "keep-alive through map + set + if (not firing) + rewrite with captures (wrk -t1 -c50, a browser's User-Agent; compare with keepalive)", measure: (*harness).reqLogic, nginxOnly: true, upKeepalive: 64},
	{Name: "syscalls-keepalive", Title: "system calls per request, keep-alive (perf trace -s during wrk -t1 -c16; not in the default set)", measure: syscallShape("/")},
	{Name: "syscalls-close", Title: "system calls per request, new connection per request (perf trace -s during wrk -t1 -c16 -H 'Connection: close'; not in the default set)", measure: syscallShape("/", "Connection: close")},
	{Name: "syscalls-static", Title: "system calls per request, static-small's 100-byte file, keep-alive (perf trace -s during wrk -t1 -c16; not in the default set)", measure: syscallShape("/static/small.html"), files: true},
	{Name: "syscalls-static-large", Title: "system calls per request, static-large's 1 MiB file, keep-alive (perf trace -s during wrk -t1 -c16; not in the default set)", measure: syscallShape("/static/1m.bin"), files: true},
	{Name: "syscalls-log", Title: "system calls per request, keep-alive with access_log combined to a file (perf trace -s during wrk -t1 -c16; not in the default set)", measure: syscallShape("/"), accessLog: "access.log combined"},
	{Name: "syscalls-logbuf", Title: "system calls per request, keep-alive with access_log combined buffer=64k (perf trace -s during wrk -t1 -c16; not in the default set)", measure: syscallShape("/"), accessLog: "access.log combined buffer=64k"},
	{Name: "syscalls-tls-keepalive", Title: "system calls per request, keep-alive over TLS, ECDSA (perf trace -s during wrk -t1 -c16; not in the default set)", measure: syscallShapeOn(true, "/"), tls: true},
	{Name: "syscalls-cache-large", Title: "system calls per request, cache-large's 1 MiB proxy_cache hit (perf trace -s during wrk -t1 -c16; not in the default set)", measure: warmCache("/cached/1m", syscallShape("/cached/1m")), nginxOnly: true},
	{Name: "cache-small", Title: "proxy_cache hit, ~100-byte response (wrk -t1 -c50)", measure: cacheShape("/cached/", 50), nginxOnly: true},
	{Name: "cache-large", Title: "proxy_cache hit, 1 MiB response (wrk -t1 -c10; sendfile off, the default: pread and writev)", measure: cacheShape("/cached/1m", 10), nginxOnly: true},
	{Name: "tls-hs-ecdsa", Title: "TLS full handshakes, ECDSA P-256, a new connection per request, resumption off on the server (wrk -t1 -c50 -H 'Connection: close'; 10⁶/CPU µs = handshakes per CPU-second)", measure: tlsShape(false, "/", 50, "Connection: close"), tls: true, noResume: true},
	{Name: "tls-hs-rsa", Title: "TLS full handshakes, RSA-2048, a new connection per request, resumption off on the server (wrk -t1 -c50 -H 'Connection: close')", measure: tlsShape(true, "/", 50, "Connection: close"), tls: true, noResume: true},
	{Name: "tls-resume", Title: "TLS resumed handshakes, ECDSA, one connection at a time (openssl s_time -reuse -www /)", measure: (*harness).tlsResume, tls: true},
	{Name: "tls-keepalive", Title: "keep-alive over TLS, ECDSA, ~100-byte response (wrk -t1 -c50)", measure: tlsShape(false, "/", 50), tls: true},
	{Name: "tls-large", Title: "1 MiB response over TLS, ECDSA (wrk -t1 -c10; userspace TLS where the kernel has no kTLS)", measure: tlsShape(false, "/1m", 10), tls: true},
	{Name: "locality", Title: "locality with simulated domains (fresh connection per request, clients on CPU 0 and 1)", own: (*harness).locality},
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "npbench: "+format+"\n", args...)
}

// startUpstream starts (or restarts) the shared upstream on CPU 1.
func (h *harness) startUpstream() error {
	if h.upProc != nil && !h.upProc.exited() {
		return nil
	}
	addr, err := freePort()
	if err != nil {
		return err
	}
	p, err := startProc("upstream", "1", []string{"env", "GOMAXPROCS=1", h.env.self, "-role", "upstream", "-listen", addr.String()},
		filepath.Join(h.env.tmp, "upstream.log"))
	if err != nil {
		return err
	}
	if err := waitReady(p, addr, "/", 10*time.Second); err != nil {
		p.stop()
		return fmt.Errorf("upstream: %w", err)
	}
	h.upstream, h.upProc = addr, p
	return nil
}

func (h *harness) quietLimit() time.Duration {
	if h.opt.quick {
		return time.Second
	}
	return 5 * time.Second
}

// window measures the proxy tree and CPU 0 over a stretch of time.
type window struct {
	pid            int
	before, after  treeSample
	cpuB, cpuA     cpuStat
	start, stopped time.Time
}

func openWindow(pid int) *window {
	w := &window{pid: pid}
	w.cpuB, _ = readCPUStat(0)
	w.before = sampleTree(pid)
	w.start = time.Now()
	return w
}

func (w *window) close() {
	w.stopped = time.Now()
	w.after = sampleTree(w.pid)
	w.cpuA, _ = readCPUStat(0)
}

// fill records CPU per request, CPU 0's load and RSS for n requests.
func (w *window) fill(res *runResult, n int64) {
	ticks := uint64(0)
	if w.after.ticks > w.before.ticks {
		ticks = w.after.ticks - w.before.ticks
	}
	res.Requests = n
	res.Seconds = w.stopped.Sub(w.start).Seconds()
	if n > 0 {
		res.CPUus = float64(ticks) * (1e6 / clockTick) / float64(n)
		if w.after.user > w.before.user {
			res.UserCPUus = float64(w.after.user-w.before.user) * (1e6 / clockTick) / float64(n)
		}
	}
	res.Load = foreignLoad(w.cpuB, w.cpuA, ticks)
	res.RSSBytes = w.after.rssBytes
}

// runProxy starts one proxy pinned to CPU 0, measures one shape and stops it,
// repeating the run when other processes used CPU 0.
func (h *harness) runProxy(s shapeDef, name string, rep int) runResult {
	def := proxyDefs[name]
	var tries []runResult // attempts disturbed by foreign load
	for attempt := 1; ; attempt++ {
		res := runResult{Shape: s.Name, Proxy: name, Rep: rep, Attempt: attempt}
		h.waitQuiet(h.quietLimit())
		if err := h.startUpstream(); err != nil {
			res.Errors, res.ErrorKind = 1, err.Error()
			return res
		}
		dir, err := os.MkdirTemp(h.env.tmp, fmt.Sprintf("%s-%s-%d-", s.Name, name, rep))
		if err == nil {
			// nginx's workers (nobody) reach the cache shapes' proxy_cache_path in it.
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			res.Errors, res.ErrorKind = 1, err.Error()
			return res
		}
		listen, err := freePort()
		if err != nil {
			res.Errors, res.ErrorKind = 1, err.Error()
			return res
		}
		d := confData{Dir: dir, Listen: listen.String(), Upstream: h.upstream.String(), NoFile: noFile, MaxConn: noFile/2 + 100, Reload: s.reload,
			Static: h.env.static, AccessLog: "off", Certs: h.env.certs, UpstreamKeepalive: 32}
		if s.upKeepalive > 0 {
			d.UpstreamKeepalive = s.upKeepalive
		}
		if s.tls {
			ec, err1 := freePort()
			rsa, err2 := freePort()
			if err := errors.Join(err1, err2); err != nil {
				res.Errors, res.ErrorKind = 1, err.Error()
				return res
			}
			d.TLSEC, d.TLSRSA, d.NoResume = ec.String(), rsa.String(), s.noResume
		}
		h.cur = d
		if s.accessLog != "" {
			d.AccessLog = filepath.Join(dir, s.accessLog)
		}
		argv, err := def.command(h.env, dir, d)
		if err != nil {
			res.Errors, res.ErrorKind = 1, err.Error()
			return res
		}
		p, err := startProc(name, "0", argv, filepath.Join(dir, "out.log"))
		if err != nil {
			res.Errors, res.ErrorKind = 1, err.Error()
			return res
		}
		if err := waitReady(p, listen, "/", 10*time.Second); err != nil {
			p.stop()
			res.Errors, res.ErrorKind = 1, "start: "+err.Error()
			return res
		}
		if err := s.measure(h, p, listen, &res); err != nil {
			res.Errors++
			if res.ErrorKind == "" {
				res.ErrorKind = err.Error()
			}
		}
		if p.exited() {
			res.Crashed = true
			res.ErrorKind = strings.TrimSpace(fmt.Sprintf("%s; exited (%v): %s", res.ErrorKind, p.err, p.tail()))
		}
		p.stop()
		if res.Errors == 0 {
			os.RemoveAll(dir)
		}
		if res.Load.ForeignShare > h.opt.foreignMax && !res.Crashed {
			tries = append(tries, res)
			if attempt <= h.opt.retries {
				logf("  %s %s rep %d: %.0f%% of CPU 0 used by other processes, repeating", s.Name, name, rep, 100*res.Load.ForeignShare)
				continue
			}
			// Every attempt was disturbed: keep the least disturbed one.
			best := 0
			for i, t := range tries {
				if t.Load.ForeignShare < tries[best].Load.ForeignShare {
					best = i
				}
			}
			res = tries[best]
			tries = append(tries[:best], tries[best+1:]...)
		}
		h.discarded = append(h.discarded, tries...)
		return res
	}
}

// waitQuiet waits (up to limit) until other processes leave CPU 0 mostly idle,
// sampling it for 250 ms at a time, so a run does not start into foreign load.
func (h *harness) waitQuiet(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		a, err := readCPUStat(0)
		if err != nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
		b, err := readCPUStat(0)
		if err != nil {
			return
		}
		if l := foreignLoad(a, b, 0); l.ForeignShare <= h.opt.foreignMax || time.Now().After(deadline) {
			return
		}
	}
}

func (h *harness) wrkShape(p *proc, addr netip.AddrPort, res *runResult, path string, conns int, headers ...string) (wrkResult, error) {
	return h.wrkURL(p, res, "http://"+addr.String()+path, conns, headers...)
}

func (h *harness) wrkURL(p *proc, res *runResult, url string, conns int, headers ...string) (wrkResult, error) {
	if h.opt.warmup > 0 {
		if _, _, err := runWrk(url, conns, h.opt.warmup, headers...); err != nil {
			return wrkResult{}, err
		}
	}
	w := openWindow(p.pid)
	r, _, err := runWrk(url, conns, h.opt.duration, headers...)
	w.close()
	if err != nil {
		return r, err
	}
	w.fill(res, r.Requests)
	res.ReqPerSec = r.ReqPerSec
	res.Errors += r.Errors
	res.ErrorKind = r.ErrorKinds
	res.Detail = map[string]float64{"wrk_closed_loop_p50_us": r.P50, "wrk_closed_loop_p99_us": r.P99}
	return r, nil
}

func (h *harness) keepAlive(p *proc, addr netip.AddrPort, res *runResult) error {
	_, err := h.wrkShape(p, addr, res, "/", 50)
	return err
}

// limitReq is keepAlive through a location with limit_req_zone $binary_remote_addr
// zone=big:64m rate=1000000r/s; limit_req zone=big burst=1000 nodelay: every
// request is looked up and accounted, none is delayed or rejected. Its CPU per
// request less keepalive's is limit_req's cost.
func (h *harness) limitReq(p *proc, addr netip.AddrPort, res *runResult) error {
	_, err := h.wrkShape(p, addr, res, "/limited", 50)
	return err
}

// reqLogicUA is a browser's User-Agent: the map's regexes run over all of it and
// none matches.
const reqLogicUA = "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

// pairedDetail is a run's baseline, measured on the same proxy process in turns
// with it (paired, pairedTurns), so that what the
// shape adds is told apart from what the machine's state adds to both: reqlogic's
// is the request the upstream sees after the rewrite (/rl/items/42?id=42, the same
// User-Agent) through location /, without the map, set, if and rewrite; the log
// shapes' is location /nolog/, the same proxying with access_log off.
type pairedDetail struct {
	BaseReqPerSec float64 `json:"baseline_req_per_sec"`
	BaseCPUus     float64 `json:"baseline_cpu_us_per_req"`
	CPUVsBase     float64 `json:"cpu_vs_baseline"`
	CPUOverBase   float64 `json:"cpu_us_over_baseline"`
	BaseErrors    int64   `json:"baseline_errors"`
}

// reqLogic is keepAlive through /logic/: a map with regex keys on the User-Agent
// ($is_bot), set, two ifs that do not fire and a rewrite with captures that does
// (break, proxied as /rl/...). Its baseline (pairedDetail) runs in turns with
// it. One request first checks that the
// rewrite reached the upstream and that the map and if answer a crawler with 403.
func (h *harness) reqLogic(p *proc, addr netip.AddrPort, res *runResult) error {
	url := "http://" + addr.String()
	for _, c := range []struct {
		ua     string
		status int
	}{{reqLogicUA, 200}, {"User-Agent: Googlebot/2.1 (+http://www.google.com/bot.html)", 403}} {
		st, body, err := getWith(url+"/logic/items/42", c.ua)
		if err != nil {
			return err
		}
		if st != c.status || st == 200 && !bytes.Equal(body, smallBody) {
			return fmt.Errorf("reqlogic: %s: status %d (%d bytes), want %d", c.ua, st, len(body), c.status)
		}
	}
	return h.paired(p, addr, res, "/logic/items/42", "/rl/items/42?id=42", reqLogicUA)
}

// pairedTurns is how many times a paired run switches between the measured path
// and its baseline: CPU speed on a shared VM drifts over seconds, by more than a
// microsecond per request, and short alternating turns put the same drift in
// both halves instead of in one.
const pairedTurns = 4

// paired measures path with wrk -c50 and, in turns with it on the same process,
// its baseline basePath (pairedDetail): pairedTurns turns of each, alternating,
// the baseline first in odd repetitions; each half's figures are summed over its
// turns.
func (h *harness) paired(p *proc, addr netip.AddrPort, res *runResult, path, basePath string, headers ...string) error {
	var base runResult
	saved := h.opt
	defer func() { h.opt = saved }()
	h.opt.duration = max(saved.duration/pairedTurns, time.Second)
	for turn := range 2 * pairedTurns {
		measured, url := res, path
		if (turn+res.Rep)%2 == 1 {
			measured, url = &base, basePath
		}
		var one runResult
		if _, err := h.wrkShape(p, addr, &one, url, 50, headers...); err != nil {
			if measured == &base {
				return fmt.Errorf("baseline: %w", err)
			}
			return err
		}
		addTurn(measured, &one)
		if turn == 1 {
			h.opt.warmup = 0 // both paths are warm now
		}
	}
	// Foreign load during either half repeats the run.
	res.Load.ForeignShare = max(res.Load.ForeignShare, base.Load.ForeignShare)
	d := pairedDetail{BaseReqPerSec: base.ReqPerSec, BaseCPUus: base.CPUus, BaseErrors: base.Errors}
	if base.CPUus > 0 {
		d.CPUVsBase = res.CPUus / base.CPUus
		d.CPUOverBase = res.CPUus - base.CPUus
	}
	res.Detail = d
	return nil
}

// addTurn adds one turn's run to the sum in dst: requests, seconds and errors
// add up, CPU per request and request rate are of the sum, CPU 0's foreign share
// is the largest of a turn's, and RSS the last turn's.
func addTurn(dst, one *runResult) {
	n := dst.Requests + one.Requests
	if n > 0 {
		dst.CPUus = (dst.CPUus*float64(dst.Requests) + one.CPUus*float64(one.Requests)) / float64(n)
		dst.UserCPUus = (dst.UserCPUus*float64(dst.Requests) + one.UserCPUus*float64(one.Requests)) / float64(n)
	}
	dst.Requests, dst.Seconds = n, dst.Seconds+one.Seconds
	if dst.Seconds > 0 {
		dst.ReqPerSec = float64(n) / dst.Seconds
	}
	dst.Errors += one.Errors
	if dst.ErrorKind == "" {
		dst.ErrorKind = one.ErrorKind
	}
	foreign := max(dst.Load.ForeignShare, one.Load.ForeignShare)
	dst.Load, dst.Load.ForeignShare = one.Load, foreign
	dst.RSSBytes = one.RSSBytes
}

// logShape is keepAlive (through location /, logged) paired with location
// /nolog/ (access_log off): CPU over the baseline is what the access log costs.
func (h *harness) logShape(p *proc, addr netip.AddrPort, res *runResult) error {
	return h.paired(p, addr, res, "/", "/nolog/")
}

// getWith fetches url with one extra header ("Name: value").
func getWith(url, header string) (int, []byte, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, nil, err
	}
	name, value, _ := strings.Cut(header, ": ")
	req.Header.Set(name, value)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func (h *harness) newConn(p *proc, addr netip.AddrPort, res *runResult) error {
	_, err := h.wrkShape(p, addr, res, "/", 50, "Connection: close")
	return err
}

func (h *harness) large(p *proc, addr netip.AddrPort, res *runResult) error {
	r, err := h.wrkShape(p, addr, res, "/1m", 10)
	if err == nil && r.Seconds > 0 {
		res.MBps = float64(r.Requests) * largeSize / r.Seconds / 1e6
	}
	return err
}

// cacheShape measures hits of path: one request stores the entry, then wrk.
func cacheShape(path string, conns int) func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
	return warmCache(path, func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
		_, err := h.wrkShape(p, addr, res, path, conns)
		return err
	})
}

// warmCache runs measure once path was asked twice (stored, then a hit).
func warmCache(path string, measure func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error) func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
	return func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
		for i := 0; i < 2; i++ {
			resp, err := http.Get("http://" + addr.String() + path)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("%s: status %d", path, resp.StatusCode)
			}
		}
		return measure(h, p, addr, res)
	}
}

// gzipShape measures a gzip shape: the compressed size of one response (which must
// decompress to the upstream's body), then wrk asking for gzip.
func gzipShape(path string) func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
	return func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
		n, err := gzipSize("http://" + addr.String() + path)
		if err != nil {
			return err
		}
		res.GzipBytes = float64(n)
		_, err = h.wrkShape(p, addr, res, path, 10, "Accept-Encoding: gzip")
		return err
	}
}

// gzipSize fetches url with Accept-Encoding: gzip and returns the compressed body's
// size, after checking that it decompresses to the upstream's body.
func gzipSize(url string) (int, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		return 0, fmt.Errorf("%s: not compressed (status %d, Content-Encoding %q)", url, resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(plain, compressibleBody()) {
		return 0, fmt.Errorf("%s: the body does not decompress to the upstream's (%d bytes, %v)", url, len(plain), err)
	}
	return len(body), nil
}

// staticSmall and staticLarge fetch a file the server itself sends (location
// /static/ with sendfile on): the same two files for numaproxy and nginx.
func (h *harness) staticSmall(p *proc, addr netip.AddrPort, res *runResult) error {
	_, err := h.wrkShape(p, addr, res, "/static/small.html", 50)
	return err
}

func (h *harness) staticLarge(p *proc, addr netip.AddrPort, res *runResult) error {
	r, err := h.wrkShape(p, addr, res, "/static/1m.bin", 10)
	if err == nil && r.Seconds > 0 {
		res.MBps = float64(r.Requests) * largeSize / r.Seconds / 1e6
	}
	return err
}

// writeStaticFiles makes the files of the static shapes, readable by nginx's
// workers (nobody): the run's scratch folder is opened to them.
func writeStaticFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	head, tail := "<!DOCTYPE html><html><head><title>bench</title></head><body>", "</body></html>\n"
	small := head + strings.Repeat("x", 100-len(head)-len(tail)) + tail
	if err := os.WriteFile(filepath.Join(dir, "small.html"), []byte(small), 0o644); err != nil {
		return err
	}
	large := make([]byte, largeSize)
	for i := range large {
		large[i] = "0123456789abcdef"[i%16]
	}
	return os.WriteFile(filepath.Join(dir, "1m.bin"), large, 0o644)
}

// reloadDetail counts the reloads done during a run.
type reloadDetail struct {
	Reloads         int     `json:"reloads"`
	ReloadErrors    int     `json:"reload_errors,omitempty"` // signals that could not be sent
	ErrorsPerReload float64 `json:"errors_per_reload"`
}

// reloadChurn reloads the proxy every 500 ms while wrk opens a new connection
// per request, and counts the requests that failed.
func (h *harness) reloadChurn(p *proc, addr netip.AddrPort, res *runResult) error {
	def := proxyDefs[res.Proxy]
	url := "http://" + addr.String() + "/"
	if h.opt.warmup > 0 {
		if _, _, err := runWrk(url, 50, h.opt.warmup, "Connection: close"); err != nil {
			return err
		}
	}
	var det reloadDetail
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := def.reload(p); err != nil {
					det.ReloadErrors++
				}
				det.Reloads++
			}
		}
	}()
	w := openWindow(p.pid)
	r, _, err := runWrk(url, 50, h.opt.duration, "Connection: close")
	close(stop)
	<-done
	w.close()
	if err != nil {
		return err
	}
	w.fill(res, r.Requests)
	res.ReqPerSec = r.ReqPerSec
	res.Errors += r.Errors + int64(det.ReloadErrors)
	res.ErrorKind = r.ErrorKinds
	if det.Reloads > 0 {
		det.ErrorsPerReload = float64(res.Errors) / float64(det.Reloads)
	}
	res.Detail = det
	return nil
}

// openLoopRate is the fixed rate: -rate, or a fraction of nginx's median
// keep-alive throughput measured in this run (measured now if it was not).
func (h *harness) openLoopRate() float64 {
	if h.rate > 0 {
		return h.rate
	}
	if h.opt.rate > 0 {
		h.rate = h.opt.rate
		return h.rate
	}
	var v []float64
	for _, r := range h.results {
		if r.Shape == "keepalive" && r.Proxy == "nginx" && r.Errors == 0 {
			v = append(v, r.ReqPerSec)
		}
	}
	if len(v) == 0 && h.env.missing["nginx"] == "" {
		logf("open loop: measuring nginx keep-alive throughput for the rate")
		r := h.runProxy(shapeDef{Name: "keepalive", measure: (*harness).keepAlive}, "nginx", 0)
		if r.Errors == 0 {
			v = append(v, r.ReqPerSec)
		}
	}
	if len(v) == 0 {
		h.rate = 5000
	} else {
		h.rate = float64(int(median(v)*h.opt.rateFrac/100)) * 100
	}
	logf("open loop: %.0f req/s", h.rate)
	return h.rate
}

func (h *harness) openLoop(p *proc, addr netip.AddrPort, res *runResult) error {
	rate := h.openLoopRate()
	cfg := openLoopConfig{addr: addr, request: request("/", false), rate: rate, conns: 50, duration: h.opt.warmup}
	if cfg.duration > 0 {
		if _, err := runOpenLoop(cfg); err != nil {
			return err
		}
	}
	cfg.duration = h.opt.duration
	w := openWindow(p.pid)
	r, err := runOpenLoop(cfg)
	w.close()
	if err != nil {
		return err
	}
	w.fill(res, int64(r.Completed))
	res.ReqPerSec = r.Rate
	res.P50, res.P99, res.P999 = r.P50, r.P99, r.P999
	res.Errors += int64(r.Errors)
	res.ErrorKind = r.ErrorKind
	res.Detail = r
	return nil
}

// idleDetail is what the idle shape saw besides memory.
type idleDetail struct {
	Conns          int     `json:"conns"`
	Base           int     `json:"base_conns,omitempty"` // held open before RSSBefore (-idle-base)
	RSSBefore      int64   `json:"rss_before"`
	RSSAfter       int64   `json:"rss_after"`
	OpenSeconds    float64 `json:"open_seconds"`
	CheckedAfter   int     `json:"checked_after"` // connections asked again after the RSS sample
	CheckFailures  int     `json:"check_failures"`
	CPUusPerConnRq float64 `json:"cpu_us_per_conn_and_request"`
}

// idle opens idleConns keep-alive connections with one request on each, then
// compares the proxy's RSS with what it was before.
func (h *harness) idle(p *proc, addr netip.AddrPort, res *runResult) error {
	req := request("/", false)
	// Warm up: a few hundred requests, so first-use allocations are not counted.
	if c, err := net.Dial("tcp4", addr.String()); err == nil {
		buf := make([]byte, 0, 4096)
		for range 300 {
			if _, err := roundTrip(c, req, buf); err != nil {
				break
			}
		}
		c.Close()
	}
	time.Sleep(300 * time.Millisecond)
	var failures atomic.Int64
	var firstErr atomic.Value
	// openConns opens n connections with one request each; a failed one is nil.
	openConns := func(n int) []net.Conn {
		conns := make([]net.Conn, n)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				buf := make([]byte, 0, 4096)
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					c, err := net.DialTimeout("tcp4", addr.String(), 5*time.Second)
					if err == nil {
						c.SetDeadline(time.Now().Add(10 * time.Second))
						var r response
						r, err = roundTrip(c, req, buf)
						if err == nil && (r.status != 200 || r.close) {
							err = fmt.Errorf("status %d close %v", r.status, r.close)
						}
					}
					if err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						if c != nil {
							c.Close()
						}
						continue
					}
					conns[i] = c
				}
			})
		}
		wg.Wait()
		return conns
	}
	var baseFailed int64
	if h.opt.idleBase > 0 {
		// Held through the run: what the first connections cost once (the
		// runtime's first collections, code paged in, buffers for 32 requests at a
		// time) is in the baseline.
		base := openConns(h.opt.idleBase)
		defer func() {
			for _, c := range base {
				if c != nil {
					c.Close()
				}
			}
		}()
		time.Sleep(2 * time.Second)
		baseFailed = failures.Swap(0)
	}
	n := h.opt.idleConns
	w := openWindow(p.pid)
	conns := openConns(n)
	opened := time.Since(w.start)
	if h.opt.quick {
		time.Sleep(500 * time.Millisecond)
	} else {
		time.Sleep(2 * time.Second)
	}
	w.close()
	w.fill(res, int64(n)-failures.Load())
	det := idleDetail{Conns: n, Base: h.opt.idleBase, RSSBefore: w.before.rssBytes, RSSAfter: w.after.rssBytes, OpenSeconds: opened.Seconds(), CPUusPerConnRq: res.CPUus}
	open := int64(n) - failures.Load()
	if open > 0 {
		res.KBPerConn = float64(w.after.rssBytes-w.before.rssBytes) / float64(open) / 1024
	}
	res.ReqPerSec = float64(open) / opened.Seconds()
	// Are they still open? Ask again on every 100th connection.
	buf := make([]byte, 0, 4096)
	for i := 0; i < n; i += 100 {
		if conns[i] == nil {
			continue
		}
		det.CheckedAfter++
		conns[i].SetDeadline(time.Now().Add(5 * time.Second))
		if r, err := roundTrip(conns[i], req, buf); err != nil || r.status != 200 {
			det.CheckFailures++
			if err == nil {
				err = fmt.Errorf("status %d", r.status)
			}
			firstErr.CompareAndSwap(nil, "idle connection asked again: "+err.Error())
		}
	}
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	res.Errors = failures.Load() + baseFailed + int64(det.CheckFailures)
	if s, ok := firstErr.Load().(string); ok {
		res.ErrorKind = s
	}
	res.Detail = det
	return nil
}

// localityDetail counts where fresh connections were served.
type localityDetail struct {
	Domains    string  `json:"numa_domains"`
	Conns      int     `json:"conns"`
	Local      int     `json:"local"`
	ArrivedAs  float64 `json:"arrival_cpu_matches_client_cpu"` // $incoming_cpu == the client's pinned CPU
	PerCPU     [2]int  `json:"served_on_cpu"`
	ConnPerSec float64 `json:"conn_per_sec"`
}

// locality runs numaproxy with two loops, with numa_domains 0 1 when this build
// accepts the directive and without (for comparison), and asks from clients
// pinned alternately to CPU 0 and CPU 1 where each fresh connection was served.
func (h *harness) locality() {
	if h.env.missing["numaproxy"] != "" {
		h.skipped["locality"] = "numaproxy: " + h.env.missing["numaproxy"]
		return
	}
	variants := []struct{ name, domains string }{{"numaproxy numa_domains 0 1", "0 1"}, {"numaproxy no numa_domains", ""}}
	if msg := h.checkNumaDomains(); msg != "" {
		h.skipped["locality numa_domains"] = msg
		logf("locality: %s", msg)
		variants = variants[1:]
	}
	for rep := 1; rep <= h.opt.reps; rep++ {
		for _, v := range variants {
			res := h.localityRun(v.name, v.domains, rep)
			h.results = append(h.results, res)
			logf("  %s", res.line())
		}
	}
}

// checkNumaDomains returns "" if numaproxy -t accepts numa_domains.
func (h *harness) checkNumaDomains() string {
	dir, err := os.MkdirTemp(h.env.tmp, "numa-domains-check-")
	if err != nil {
		return err.Error()
	}
	conf := filepath.Join(dir, "numaproxy.conf")
	if err := renderTemplate("numaproxy-locality.conf.tmpl", conf, confData{Dir: dir, Listen: "127.0.0.1:1", NoFile: noFile, Domains: "0 1"}); err != nil {
		return err.Error()
	}
	out, err := exec.Command(h.env.numaproxy, "-t", "-p", dir, "-c", conf).CombinedOutput()
	if err == nil {
		return ""
	}
	if strings.Contains(string(out), `unknown directive "numa_domains"`) {
		return "skipped: numa_domains not supported by this build"
	}
	return "skipped: numaproxy -t rejected numa_domains: " + strings.TrimSpace(string(out))
}

func (h *harness) localityRun(name, domains string, rep int) runResult {
	res := runResult{Shape: "locality", Proxy: name, Rep: rep, Attempt: 1}
	fail := func(err error) runResult {
		res.Errors++
		if res.ErrorKind == "" {
			res.ErrorKind = err.Error()
		}
		return res
	}
	dir, err := os.MkdirTemp(h.env.tmp, "locality-")
	if err != nil {
		return fail(err)
	}
	listen, err := freePort()
	if err != nil {
		return fail(err)
	}
	conf := filepath.Join(dir, "numaproxy.conf")
	if err := renderTemplate("numaproxy-locality.conf.tmpl", conf, confData{Dir: dir, Listen: listen.String(), NoFile: noFile, Domains: domains}); err != nil {
		return fail(err)
	}
	// Both CPUs: the harness (and so its children) is pinned to CPU 1.
	p, err := startProc(name, "0,1", []string{h.env.numaproxy, "-p", dir, "-c", conf}, filepath.Join(dir, "out.log"))
	if err != nil {
		return fail(err)
	}
	defer p.stop()
	if err := waitReady(p, listen, "/", 10*time.Second); err != nil {
		return fail(err)
	}
	det := localityDetail{Domains: domains, Conns: h.opt.locConns}
	var mu sync.Mutex
	var matches int
	var errs []string
	req := request("/", true)
	w := openWindow(p.pid)
	var wg sync.WaitGroup
	for cpu := range 2 {
		wg.Go(func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			buf := make([]byte, 0, 1024)
			for i := cpu; i < det.Conns; i += 2 {
				inc, node, wcpu, err := localityOnce(listen, req, buf)
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else {
					if inc == cpu {
						matches++
					}
					if wcpu >= 0 && wcpu < 2 {
						det.PerCPU[wcpu]++
					}
					// Simulated domains: CPU c is domain c. With numa_domains the
					// loop's $numa_node must be the arrival CPU's domain; without it
					// every loop says node 0, so compare the loop's CPU instead.
					if (domains != "" && node == inc) || (domains == "" && wcpu == inc) {
						det.Local++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	w.close()
	served := int64(det.Conns - len(errs))
	w.fill(&res, served)
	res.Load = cpuLoad{} // both CPUs are in use: no foreign-load check here
	if served > 0 {
		res.LocalFraction = float64(det.Local) / float64(served)
		det.ArrivedAs = float64(matches) / float64(served)
	}
	res.ReqPerSec = float64(served) / res.Seconds
	det.ConnPerSec = res.ReqPerSec
	res.Errors = int64(len(errs))
	if len(errs) > 0 {
		res.ErrorKind = errs[0]
	}
	res.Detail = det
	if p.exited() {
		res.Crashed = true
		res.ErrorKind = strings.TrimSpace(fmt.Sprintf("%s; exited (%v): %s", res.ErrorKind, p.err, p.tail()))
	}
	if res.Errors == 0 {
		defer os.RemoveAll(dir)
	}
	return res
}

// localityOnce opens a connection from the calling thread (so the SYN is
// processed on its CPU), sends req, and parses "$incoming_cpu $numa_node $worker_cpu".
func localityOnce(addr netip.AddrPort, req, buf []byte) (incoming, node, worker int, err error) {
	fd, err := dialRaw(addr)
	if err != nil {
		return 0, 0, 0, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	r, err := roundTrip(fdConn(fd), req, buf)
	if err != nil {
		return 0, 0, 0, err
	}
	if r.status != 200 {
		return 0, 0, 0, fmt.Errorf("status %d", r.status)
	}
	f := strings.Fields(string(r.body))
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("body %q is not \"$incoming_cpu $numa_node $worker_cpu\"", r.body)
	}
	var v [3]int
	for i := range f {
		if v[i], err = strconv.Atoi(f[i]); err != nil {
			return 0, 0, 0, fmt.Errorf("body %q: %w", r.body, err)
		}
	}
	return v[0], v[1], v[2], nil
}

// fdConn reads and writes a blocking socket on the calling thread.
type fdConn int

func (c fdConn) Read(b []byte) (int, error) {
	n, err := unix.Read(int(c), b)
	if n < 0 {
		n = 0
	}
	return n, err
}

func (c fdConn) Write(b []byte) (int, error) {
	n, err := unix.Write(int(c), b)
	if n < 0 {
		n = 0
	}
	return n, err
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
