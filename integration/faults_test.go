package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The fault battery: what an operator runs before trusting a proxy. Each fault
// runs against numaproxy and, where the behaviour compares, Debian's nginx on the
// same configuration, and prints its figure; TestFaultBattery prints the table
// (README's "Fault battery"). `make faults` runs it in full
// (NUMAPROXY_FAULTS=full); `make test` runs it in a short form (fewer clients and
// connections). Faults that other tests already cover in depth are named in the
// table and, in the full form, run again here.

func faultsFull() bool { return os.Getenv("NUMAPROXY_FAULTS") == "full" }

// scale is short in `make test`, full in `make faults`.
func scale(short, full int) int {
	if faultsFull() {
		return full
	}
	return short
}

type faultRow struct{ fault, numaproxy, nginx string }

// proxyUnder is one proxy a fault runs against.
type proxyUnder struct {
	name string
	addr string
	pid  func() int
	log  func() string
}

func (p *proxyUnder) fds(t *testing.T) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid()))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// rssKB is the resident memory of the serving process.
func (p *proxyUnder) rssKB() int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return 0
}

// bothProxies starts numaproxy and nginx on the same http block (ADDR stands for
// the listen address) and runs f on each; f returns the figure.
func bothProxies(t *testing.T, httpBody string, f func(t *testing.T, p *proxyUnder) string) (string, string) {
	return bothProxiesMain(t, "", httpBody, f)
}

// bothProxiesMain is bothProxies with main-context directives (an events block).
func bothProxiesMain(t *testing.T, mainExtra, httpBody string, f func(t *testing.T, p *proxyUnder) string) (string, string) {
	addr := addrFor(t)
	in := startMain(t, "worker_processes 1;\n"+mainExtra, strings.ReplaceAll(httpBody, "ADDR", addr), addr)
	np := &proxyUnder{name: "numaproxy", addr: addr, pid: func() int { return in.cmd.Process.Pid },
		log: func() string { d, _ := os.ReadFile(in.path("logs/error.log")); return string(d) }}
	a := f(t, np)
	addr2 := addrFor(t)
	// nginx's figures are for comparison only.
	ng := startNginxMain(t, mainExtra, strings.ReplaceAll(httpBody, "ADDR", addr2), addr2)
	wpid := ng.worker(t)
	b := f(t, &proxyUnder{name: "nginx", addr: addr2, pid: func() int { return wpid }, log: ng.errorLog})
	return a, b
}

// TestFaultBattery runs the battery and prints its table.
func TestFaultBattery(t *testing.T) {
	var rows []faultRow
	add := func(fault, a, b string) {
		rows = append(rows, faultRow{fault, a, b})
		t.Logf("%s: numaproxy %s; nginx %s", fault, a, b)
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) { f.run(t, add) })
	}
	var sb strings.Builder
	mode := "short"
	if faultsFull() {
		mode = "full"
	}
	fmt.Fprintf(&sb, "\nFault battery (%s form)\n\n| Fault | numaproxy | nginx 1.22 |\n|---|---|---|\n", mode)
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %s | %s | %s |\n", r.fault, r.numaproxy, r.nginx)
	}
	t.Log(sb.String())
	if faultsFull() {
		fmt.Print(sb.String())
	}
}

type fault struct {
	name string
	run  func(t *testing.T, add func(fault, a, b string))
}

var faults = []fault{
	{"UpstreamFaults", faultUpstream},
	{"Uploads", faultUploads},
	{"HeaderAbuse", faultHeaders},
	{"ConnectionStorm", faultStorm},
	{"Slowloris", faultSlowloris},
	{"SlowReaders", faultSlowReaders},
	{"DescriptorExhaustion", faultEMFILE},
	{"ReloadAndStopUnderFaults", faultReloadStop},
}

// statusOf is the status of a raw response, or what happened instead.
func statusOf(raw string, err error) string {
	if strings.HasPrefix(raw, "HTTP/1.") && len(raw) >= 12 {
		return raw[9:12]
	}
	switch {
	case err != nil && strings.Contains(err.Error(), "reset"):
		return "reset"
	case err != nil && isTimeout(err):
		return "no answer"
	case raw == "":
		return "closed"
	}
	return "garbage"
}

// faultUpstream: upstreams that reset mid-response, close before the head, never
// answer, send an invalid head, a 1 GB header, or an endless chunked body; each
// client gets its status or a closed connection and no descriptor is left behind.
func faultUpstream(t *testing.T, add func(fault, a, b string)) {
	type uf struct {
		name  string
		serve func(c net.Conn)
	}
	readReq := func(c net.Conn) { readHead(bufio.NewReader(c)) }
	if faultsFull() {
		t.Run("TestProxyNoFdLeak", TestProxyNoFdLeak)
		t.Run("TestProxyUpstreamClosesMidResponse", TestProxyUpstreamClosesMidResponse)
		t.Run("TestProxyReadTimeoutMidBody", TestProxyReadTimeoutMidBody)
		t.Run("TestProxyUpstreamErrors", TestProxyUpstreamErrors)
	}
	ufs := []uf{
		{"reset mid-response", func(c net.Conn) {
			readReq(c)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 5000))
			c.(*net.TCPConn).SetLinger(0)
		}},
		{"close before headers", func(c net.Conn) { readReq(c) }},
		{"never answers", func(c net.Conn) { readReq(c); time.Sleep(3 * time.Second) }},
		{"invalid header", func(c net.Conn) { readReq(c); io.WriteString(c, "HTTP/1.1 200 OK\r\nBad Header\x01: x\r\n\r\nbody") }},
		{"1 GB header", func(c net.Conn) {
			readReq(c)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Huge: ")
			chunk := strings.Repeat("a", 64<<10)
			for i := 0; i < (1<<30)/(64<<10); i++ {
				if _, err := io.WriteString(c, chunk); err != nil {
					return
				}
			}
		}},
		{"endless chunked body", func(c net.Conn) {
			readReq(c)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			chunk := "4000\r\n" + strings.Repeat("z", 0x4000) + "\r\n"
			end := time.Now().Add(2 * time.Second)
			for time.Now().Before(end) {
				if _, err := io.WriteString(c, chunk); err != nil {
					return
				}
			}
		}},
	}
	for _, u := range ufs {
		up := newRawUpstream(t, u.serve)
		clients := scale(3, 20)
		hb := fmt.Sprintf("server { listen ADDR; location / { proxy_pass http://%s; proxy_read_timeout 1s; } }", up.Addr)
		fig := func(t *testing.T, p *proxyUnder) string {
			before := p.fds(t)
			got := map[string]int{}
			var mbs []int // bodies that ended with a clean close, in MB
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := 0; i < clients; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := net.DialTimeout("tcp", p.addr, ioTimeout)
					if err != nil {
						mu.Lock()
						got["dial error"]++
						mu.Unlock()
						return
					}
					defer c.Close()
					io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					br := bufio.NewReader(c)
					head, err := readHead(br)
					st := statusOf(head, err)
					// The rest: how the body ends.
					n, err := io.Copy(io.Discard, br)
					switch {
					case st == "200" && u.name == "reset mid-response" && n < 100000:
						// A close or a reset: either way the client sees the body cut
						// short of its Content-Length.
						st += " cut short"
					case st == "200" && err == nil:
						mu.Lock()
						mbs = append(mbs, int(n>>20))
						mu.Unlock()
						return
					}
					mu.Lock()
					got[st]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			if len(mbs) > 0 {
				sort.Ints(mbs)
				got[fmt.Sprintf("200 then close after %d–%d MB", mbs[0], mbs[len(mbs)-1])] = len(mbs)
			}
			after := p.fds(t)
			for end := time.Now().Add(10 * time.Second); after > before && time.Now().Before(end); after = p.fds(t) {
				time.Sleep(20 * time.Millisecond)
			}
			// nginx's worker opens a descriptor of its own after its first requests:
			// only numaproxy's count is held to its start.
			if after > before && p.name == "numaproxy" {
				t.Errorf("%s, %s: %d descriptors 10s after the clients were done, %d before", p.name, u.name, after, before)
			}
			var parts []string
			for k, v := range got {
				parts = append(parts, fmt.Sprintf("%d× %s", v, k))
			}
			sort.Strings(parts)
			return fmt.Sprintf("%s; fds %d→%d", strings.Join(parts, ", "), before, after)
		}
		a, b := bothProxies(t, hb, fig)
		add("upstream: "+u.name, a, b)
		// The descriptors came back (fig waits for it); the statuses are nginx's.
		if sa, sb, _ := strings.Cut(a, ";"); u.name != "endless chunked body" && sa != strings.SplitN(b, ";", 2)[0] {
			t.Errorf("%s: numaproxy %s, nginx %s", u.name, sa, b)
		} else {
			_ = sb
		}
	}
}

// faultUploads: oversized uploads (client_max_body_size) and stalled uploads
// (client_body_timeout): every client reads its 413 or 408, none is reset.
func faultUploads(t *testing.T, add func(fault, a, b string)) {
	up := newBackend(t, nil)
	hb := fmt.Sprintf(`client_max_body_size 1m; client_body_timeout 1s;
server { listen ADDR; location / { proxy_pass http://%s; } }`, up.Addr)
	clients := scale(10, 100)
	run := func(p *proxyUnder, slow bool) string {
		got := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", p.addr, ioTimeout)
				if err != nil {
					return
				}
				defer c.Close()
				size := 8 << 20
				if slow {
					size = 1000
				}
				fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
				go func() {
					if slow {
						io.WriteString(c, "partial") // then nothing
						return
					}
					chunk := make([]byte, 64<<10)
					for sent := 0; sent < size; sent += len(chunk) {
						if _, err := c.Write(chunk); err != nil {
							return
						}
					}
				}()
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				head, err := readHead(bufio.NewReader(c))
				st := statusOf(head, err)
				mu.Lock()
				got[st]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		var parts []string
		for k, v := range got {
			parts = append(parts, fmt.Sprintf("%d× %s", v, k))
		}
		sort.Strings(parts)
		return fmt.Sprintf("%d clients: %s", clients, strings.Join(parts, ", "))
	}
	a, b := bothProxies(t, hb, func(t *testing.T, p *proxyUnder) string { return run(p, false) })
	add("oversized uploads (8 MB, client_max_body_size 1m)", a, b)
	if !strings.HasSuffix(a, fmt.Sprintf("%d× 413", clients)) {
		t.Errorf("oversized uploads: %s", a)
	}
	a, b = bothProxies(t, hb, func(t *testing.T, p *proxyUnder) string { return run(p, true) })
	// nginx answers nothing at client_body_timeout (the 408 is for its access
	// log) and closes: so does numaproxy. What matters is that nothing is reset.
	add("stalled uploads (client_body_timeout 1s)", a, b)
	if !strings.HasSuffix(a, fmt.Sprintf("%d× closed", clients)) && !strings.HasSuffix(a, fmt.Sprintf("%d× 408", clients)) {
		t.Errorf("stalled uploads: %s", a)
	}
	if faultsFull() {
		t.Run("TestLingeringTooLargeUploads", TestLingeringTooLargeUploads)
		t.Run("TestProxyClientLimits", TestProxyClientLimits)
		t.Run("TestProxySlowUpload", TestProxySlowUpload)
	}
}

// faultHeaders: many headers, a huge line, 10,000 pipelined requests in one write.
func faultHeaders(t *testing.T, add func(fault, a, b string)) {
	up := newBackend(t, nil)
	hb := fmt.Sprintf("server { listen ADDR; location / { proxy_pass http://%s; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }", up.Addr)
	var many strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&many, "X-H%d: v\r\n", i)
	}
	one := func(p *proxyUnder, req string) string {
		raw, err := roundTripRaw(t, p.addr, req)
		return statusOf(raw, err)
	}
	a, b := bothProxies(t, hb, func(t *testing.T, p *proxyUnder) string {
		return one(p, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"+many.String()+"\r\n")
	})
	add("1,000 request headers (20 KB)", a, b)
	a, b = bothProxies(t, hb, func(t *testing.T, p *proxyUnder) string {
		return one(p, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Long: "+strings.Repeat("a", 64<<10)+"\r\n\r\n")
	})
	add("one 64 KB header line", a, b)
	a, b = bothProxies(t, hb, func(t *testing.T, p *proxyUnder) string {
		return one(p, "GET /"+strings.Repeat("a", 64<<10)+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	})
	add("64 KB request line", a, b)
	n := scale(2000, 10000)
	a, b = bothProxies(t, strings.Replace(hb, "listen ADDR;", "listen ADDR; keepalive_requests 100000;", 1), func(t *testing.T, p *proxyUnder) string {
		c := dial(t, p.addr)
		defer c.Close()
		req := strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", n-1) + "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
		start := time.Now()
		go io.WriteString(c, req)
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		br := bufio.NewReader(c)
		got := 0
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				got++
			}
		}
		return fmt.Sprintf("%d/%d answered 200 in %v", got, n, time.Since(start).Round(10*time.Millisecond))
	})
	add(fmt.Sprintf("%d pipelined requests in one write", n), a, b)
	if !strings.HasPrefix(a, fmt.Sprintf("%d/%d", n, n)) {
		t.Errorf("pipelined: %s", a)
	}
	if faultsFull() {
		t.Run("TestProxyPipelineFlood", TestProxyPipelineFlood)
		t.Run("TestProxyPipelineOrder", TestProxyPipelineOrder)
	}
}

// faultStorm: connections opened and closed without a request; no descriptor is
// left and a request after it is served.
func faultStorm(t *testing.T, add func(fault, a, b string)) {
	n := scale(2000, 20000)
	a, b := bothProxies(t, "server { listen ADDR; location / { return 200 ok; } }", func(t *testing.T, p *proxyUnder) string {
		before := p.fds(t)
		start := time.Now()
		var wg sync.WaitGroup
		var failed, slow atomic.Int64
		per := n / 8
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; i++ {
					s := time.Now()
					c, err := net.DialTimeout("tcp", p.addr, ioTimeout)
					if err != nil {
						failed.Add(1)
						continue
					}
					if time.Since(s) > 500*time.Millisecond {
						slow.Add(1) // a SYN dropped and sent again a second later
					}
					c.(*net.TCPConn).SetLinger(0) // no TIME_WAIT on the test's side
					c.Close()
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		raw, err := roundTripRaw(t, p.addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		after := p.fds(t)
		for end := time.Now().Add(10 * time.Second); after > before && time.Now().Before(end); after = p.fds(t) {
			time.Sleep(20 * time.Millisecond)
		}
		if after > before && p.name == "numaproxy" {
			t.Errorf("storm: %d descriptors 10s after, %d before", after, before)
		}
		return fmt.Sprintf("%d in %v, %d failed, %d SYN retried; next request %s; fds %d→%d", per*8, el.Round(10*time.Millisecond), failed.Load(), slow.Load(), statusOf(raw, err), before, after)
	})
	add(fmt.Sprintf("%d connects and closes without a request", n), a, b)
	if !strings.Contains(a, "next request 200") {
		t.Errorf("storm: %s", a)
	}
}

// faultSlowloris: thousands of connections each sending a header byte a second
// while normal traffic runs: they are closed at client_header_timeout and the
// normal requests keep their latency.
func faultSlowloris(t *testing.T, add func(fault, a, b string)) {
	n := scale(300, 2000)
	up := newBackend(t, nil)
	a, b := bothProxiesMain(t, "events { worker_connections 8192; }\n", fmt.Sprintf("client_header_timeout 2s; server { listen ADDR; location / { proxy_pass http://%s; } }", up.Addr), func(t *testing.T, p *proxyUnder) string {
		latency := func(d time.Duration) time.Duration {
			var ls []time.Duration
			c := &http.Client{Timeout: 5 * time.Second}
			end := time.Now().Add(d)
			for time.Now().Before(end) {
				s := time.Now()
				resp, err := c.Get("http://" + p.addr + "/")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				ls = append(ls, time.Since(s))
				time.Sleep(5 * time.Millisecond)
			}
			sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
			return ls[len(ls)*99/100]
		}
		base := latency(time.Second)
		var closedAt []time.Duration
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < n; i++ {
			c, err := net.DialTimeout("tcp", p.addr, ioTimeout)
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				hdr := "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("s", 20)
				for i := 0; i < len(hdr); i++ {
					if _, err := c.Write([]byte{hdr[i]}); err != nil {
						break
					}
					c.SetReadDeadline(time.Now().Add(time.Second))
					var one [1]byte
					if _, err := c.Read(one[:]); err != nil && !isTimeout(err) {
						break
					}
				}
				mu.Lock()
				closedAt = append(closedAt, time.Since(start))
				mu.Unlock()
			}()
		}
		under := latency(2 * time.Second)
		wg.Wait()
		sort.Slice(closedAt, func(i, j int) bool { return closedAt[i] < closedAt[j] })
		last := closedAt[len(closedAt)-1]
		return fmt.Sprintf("%d closed by %.1fs; p99 of normal requests %v (%v before)", len(closedAt), last.Seconds(), under.Round(100*time.Microsecond), base.Round(100*time.Microsecond))
	})
	add(fmt.Sprintf("slowloris: %d connections, a byte a second (client_header_timeout 2s)", n), a, b)
	if !strings.HasPrefix(a, fmt.Sprintf("%d closed by ", n)) {
		t.Errorf("slowloris: %s", a)
	}
	if faultsFull() {
		t.Run("TestProxySlowloris", TestProxySlowloris)
	}
}

// faultSlowReaders: clients that ask for a large response and do not read it;
// the proxy's memory is bounded by its buffers, not by the responses' size.
func faultSlowReaders(t *testing.T, add func(fault, a, b string)) {
	n := scale(20, 100)
	const size = 64 << 20
	big := strings.Repeat("b", 1<<20)
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for i := 0; i < size>>20; i++ {
			if _, err := io.WriteString(w, big); err != nil {
				return
			}
		}
	})
	a, b := bothProxies(t, fmt.Sprintf("server { listen ADDR; location / { proxy_pass http://%s; proxy_max_temp_file_size 0; } location /ok { return 200 ok; } }", up.Addr), func(t *testing.T, p *proxyUnder) string {
		before := p.rssKB()
		var conns []net.Conn
		for i := 0; i < n; i++ {
			c := dial(t, p.addr)
			c.(*net.TCPConn).SetReadBuffer(4096)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			conns = append(conns, c)
		}
		time.Sleep(2 * time.Second)
		peak := p.rssKB()
		s := time.Now()
		raw, err := roundTripRaw(t, p.addr, "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		other := time.Since(s)
		for _, c := range conns {
			c.Close()
		}
		return fmt.Sprintf("RSS %d→%d MB for %d × 64 MB unread; another client %s in %v", before>>10, peak>>10, n, statusOf(raw, err), other.Round(100*time.Microsecond))
	})
	add("slow readers of 64 MB responses (proxy_max_temp_file_size 0)", a, b)
}

// faultEMFILE: more clients than worker_rlimit_nofile allows: the proxy stays up,
// logs without flooding, and serves again when they go.
func faultEMFILE(t *testing.T, add func(fault, a, b string)) {
	n := scale(150, 500)
	fig := func(t *testing.T, p *proxyUnder) string {
		var conns []net.Conn
		for i := 0; i < n; i++ {
			c, err := net.DialTimeout("tcp", p.addr, time.Second)
			if err != nil {
				break
			}
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			conns = append(conns, c)
		}
		time.Sleep(time.Second)
		for _, c := range conns {
			c.Close()
		}
		time.Sleep(500 * time.Millisecond)
		raw, err := roundTripRaw(t, p.addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		lines := strings.Count(p.log(), "Too many open files")
		return fmt.Sprintf("after %d clients under a 64 fd limit: next request %s; %d EMFILE log lines", n, statusOf(raw, err), lines)
	}
	addr := addrFor(t)
	in := startMain(t, "worker_processes 1;\nworker_rlimit_nofile 64;\n", "server { listen "+addr+"; location / { return 200 ok; } }", addr)
	a := fig(t, &proxyUnder{name: "numaproxy", addr: addr, pid: func() int { return in.cmd.Process.Pid }, log: func() string { d, _ := os.ReadFile(in.path("logs/error.log")); return string(d) }})
	addr2 := addrFor(t)
	ng := startNginxMain(t, "worker_rlimit_nofile 64;\n", "server { listen "+addr2+"; location / { return 200 ok; } }", addr2)
	b := fig(t, &proxyUnder{name: "nginx", addr: addr2, log: ng.errorLog})
	add("descriptor exhaustion (worker_rlimit_nofile 64)", a, b)
	if !strings.Contains(a, "next request 200") {
		t.Errorf("after EMFILE: %s", a)
	}
	if faultsFull() {
		t.Run("TestProxyEMFILEReusesIdle", TestProxyEMFILEReusesIdle)
		t.Run("TestProxyUpstreamEMFILE", TestProxyUpstreamEMFILE)
	}
}

// faultReloadStop: a reload and then a graceful stop while slowloris
// connections, slow readers and a connection storm are under way: requests after
// the reload are served, the stop ends within worker_shutdown_timeout.
func faultReloadStop(t *testing.T, add func(fault, a, b string)) {
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(32<<20))
			for i := 0; i < 32; i++ {
				if _, err := w.Write(make([]byte, 1<<20)); err != nil {
					return
				}
			}
			return
		}
		io.WriteString(w, "ok")
	})
	mainExtra := "worker_processes 2;\nworker_shutdown_timeout 3s;\nevents { worker_connections 8192; }\n"
	httpBody := "client_header_timeout 10s; server { listen %s; location / { proxy_pass http://" + up.Addr + "; } }"
	// run puts the faults on the proxy at addr, reloads it, checks that it serves,
	// stops it gracefully and times its exit.
	run := func(addr string, reload, quit func(), exited func() bool) string {
		var conns []net.Conn
		for i := 0; i < scale(100, 1000); i++ {
			c := dial(t, addr)
			io.WriteString(c, "GET / HTTP/1.1\r\nHo") // slowloris
			conns = append(conns, c)
		}
		for i := 0; i < scale(5, 20); i++ {
			c := dial(t, addr)
			io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n") // slow reader
			conns = append(conns, c)
		}
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					c.Close()
				}
			}
		}()
		reload()
		ok := 0
		for i := 0; i < 20; i++ {
			raw, err := roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			if statusOf(raw, err) == "200" {
				ok++
			}
		}
		s := time.Now()
		quit()
		for !exited() && time.Since(s) < 20*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		return fmt.Sprintf("after reload %d/20 served; quit: exited in %.1fs (worker_shutdown_timeout 3s)", ok, time.Since(s).Seconds())
	}
	addr := addrFor(t)
	in := startMain(t, mainExtra, fmt.Sprintf(httpBody, addr), addr)
	a := run(addr, func() { in.signal("reload"); in.waitLog("configuration reloaded") },
		func() { in.signal("quit") }, func() bool { return !in.alive() })
	in.waitExit()
	addr2 := addrFor(t)
	// nginx's harness runs one worker.
	ng := startNginxMain(t, strings.Replace(mainExtra, "worker_processes 2;\n", "", 1), fmt.Sprintf(httpBody, addr2), addr2)
	b := run(addr2, func() {
		ng.cmd.Process.Signal(syscall.SIGHUP)
		waitFor(t, "nginx reloaded", 10*time.Second, func() bool { return strings.Contains(ng.errorLog(), "reconfiguring") })
		time.Sleep(200 * time.Millisecond) // the new workers start
	}, func() { ng.cmd.Process.Signal(syscall.SIGQUIT) }, ng.gone)
	add("reload, then graceful stop, under slowloris + slow readers + a storm", a, b)
	if !strings.HasPrefix(a, "after reload 20/20 served") || !strings.Contains(a, "exited in") {
		t.Errorf("reload/stop under faults: %s", a)
	}
	if faultsFull() {
		t.Run("TestReloadUnderLoad", TestReloadUnderLoad)
		t.Run("TestQuitDrainsSlowResponse", TestQuitDrainsSlowResponse)
		t.Run("TestQuitShutdownTimeoutBounds", TestQuitShutdownTimeoutBounds)
	}
}
