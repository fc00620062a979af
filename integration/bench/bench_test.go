package main

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// These tests check the harness's own parsing and arithmetic; none of them runs
// a benchmark.

func TestParseResponse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		status   int
		body     string
		close    bool
		err      string // "" ok, "incomplete", or a substring
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, "hello", false, ""},
		{"no reason", "HTTP/1.1 204\r\n\r\n", 204, "", false, ""},
		{"close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 200, "", true, ""},
		{"http10", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 200, "x", true, ""},
		{"http10 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", 200, "x", false, ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n", 200, "5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n", false, ""},
		{"head incomplete", "HTTP/1.1 200 OK\r\nContent-Le", 0, "", false, "incomplete"},
		{"body incomplete", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", 0, "", false, "incomplete"},
		{"chunk incomplete", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", 0, "", false, "incomplete"},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", 0, "", false, "bare LF"},
		{"no length", "HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", 0, "", false, "without content-length"},
		{"conflicting", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 0, "", false, "conflicting"},
		{"both", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 0, "", false, "both"},
		{"folding", "HTTP/1.1 200 OK\r\nA: b\r\n c\r\nContent-Length: 0\r\n\r\n", 0, "", false, "folding"},
		{"bad name", "HTTP/1.1 200 OK\r\nA b: c\r\nContent-Length: 0\r\n\r\n", 0, "", false, "malformed header"},
		{"interim", "HTTP/1.1 100 Continue\r\n\r\n", 0, "", false, "interim"},
		{"not http", "HTTP/2.0 200 OK\r\n\r\n", 0, "", false, "not HTTP/1.x"},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", 0, "", false, "invalid number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseResponse([]byte(tc.in), false)
			switch {
			case tc.err == "incomplete":
				if !errors.Is(err, errIncomplete) {
					t.Fatalf("err = %v, want incomplete", err)
				}
				return
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if r.status != tc.status || string(r.body) != tc.body || r.close != tc.close || r.size != len(tc.in) {
				t.Fatalf("got status %d body %q close %v size %d", r.status, r.body, r.close, r.size)
			}
		})
	}
}

func TestParseResponsePipelined(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabHTTP/1.1 200 OK\r\n"
	r, err := parseResponse([]byte(in), false)
	if err != nil || string(r.body) != "ab" || r.size != len(in)-len("HTTP/1.1 200 OK\r\n") {
		t.Fatalf("r=%+v err=%v", r, err)
	}
}

const wrkOutput = `Running 2s test @ http://127.0.0.1:1234/
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.01ms  310.12us   9.00ms   90.00%
    Req/Sec    24.99k     1.10k   26.00k    80.00%
  Latency Distribution
     50%    1.98ms
     75%    2.10ms
     90%    2.30ms
     99%    3.50ms
  49731 requests in 2.00s, 9.53MB read
  Socket errors: connect 0, read 3, write 0, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:  24860.12
Transfer/sec:      4.76MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 49731 || r.Seconds != 2 || r.ReqPerSec != 24860.12 || r.Errors != 12 || r.P50 != 1980 || r.P99 != 3500 {
		t.Fatalf("%+v", r)
	}
	if r.BytesRead != 9.53*(1<<20) {
		t.Fatalf("bytes %v", r.BytesRead)
	}
	if r.ErrorKinds != "read 3, timeout 2, non-2xx 7" {
		t.Fatalf("kinds %q", r.ErrorKinds)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused"); err == nil {
		t.Fatal("no error for output without results")
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and a parenthesis.
	in := "4242 (a b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 5 6 20 0 3 0 1000 100000 500 18446744073709551615"
	ppid, tm, err := parseProcStat([]byte(in))
	if err != nil || ppid != 17 || tm.utime != 250 || tm.stime != 75 || tm.cutime != 5 || tm.cstime != 6 {
		t.Fatalf("ppid %d times %+v err %v", ppid, tm, err)
	}
}

func TestForeignLoad(t *testing.T) {
	stat := []byte("cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 100 0 50 800 0 0 10 0 0 0\ncpu1 1 1 1 1 1 1 1 1 0 0\n")
	before, err := parseCPUStat(stat, 0)
	if err != nil {
		t.Fatal(err)
	}
	after := before
	// 200 ticks pass: proxy 100 (user 70 + system 30), someone else 40, idle 50, softirq 10.
	after.user += 70 + 30
	after.system += 30 + 10
	after.idle += 50
	after.softirq += 10
	l := foreignLoad(before, after, 100)
	if l.ProxyShare != 0.5 || l.ForeignShare != 0.2 || l.SoftirqShare != 0.05 || l.IdleShare != 0.25 {
		t.Fatalf("%+v", l)
	}
	if rss := parseVmRSS([]byte("Name:\tx\nVmRSS:\t  1234 kB\n")); rss != 1234*1024 {
		t.Fatalf("rss %d", rss)
	}
}

func TestStats(t *testing.T) {
	v := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if pct(v, 50) != 5 || pct(v, 99) != 10 || pct(v, 0) != 1 || pct(nil, 50) != 0 {
		t.Fatal("pct")
	}
	s := spreadOf([]float64{3, 1, 2, 10})
	if s.Median != 2.5 || s.Min != 1 || s.Max != 10 || s.N != 4 {
		t.Fatalf("%+v", s)
	}
	if c := commas(1234567.891, 1); c != "1,234,567.9" {
		t.Fatal(c)
	}
	if c := commas(-999, 0); c != "-999" {
		t.Fatal(c)
	}
}

func TestSummaryRatios(t *testing.T) {
	runs := []runResult{
		{Shape: "keepalive", Proxy: "numaproxy", Requests: 1, ReqPerSec: 30, CPUus: 20},
		{Shape: "keepalive", Proxy: "nginx", Requests: 1, ReqPerSec: 20, CPUus: 40},
		{Shape: "keepalive", Proxy: "numaproxy", Requests: 1, ReqPerSec: 50, CPUus: 10, Errors: 2, ErrorKind: "read 2"},
	}
	s := summarize(runs, []runResult{{Shape: "keepalive", Proxy: "nginx"}})
	if len(s) != 2 || s[0].ReqPerSec.Median != 40 || s[0].CPUVsNginx != 0.375 || s[0].Errors != 2 || s[1].Reruns != 1 {
		t.Fatalf("%+v", s)
	}
}

// TestPairedRatios: each repetition's run is divided by nginx's run of the same
// repetition; a repetition nginx has no figures for is left out.
func TestPairedRatios(t *testing.T) {
	runs := []runResult{
		{Shape: "static-large", Proxy: "numaproxy", Rep: 1, Requests: 1, CPUus: 90},
		{Shape: "static-large", Proxy: "nginx", Rep: 1, Requests: 1, CPUus: 100},
		{Shape: "static-large", Proxy: "numaproxy", Rep: 2, Requests: 1, CPUus: 220},
		{Shape: "static-large", Proxy: "nginx", Rep: 2, Requests: 1, CPUus: 200},
		{Shape: "static-large", Proxy: "numaproxy", Rep: 3, Requests: 1, CPUus: 160},
		{Shape: "static-large", Proxy: "nginx", Rep: 3, Requests: 1, CPUus: 200},
		{Shape: "static-large", Proxy: "numaproxy", Rep: 4, Requests: 1, CPUus: 10},
		{Shape: "static-large", Proxy: "nginx", Rep: 4},
	}
	s := summarize(runs, nil)
	p := s[0].CPUVsNginxPaired
	if p.N != 3 || p.Median != 0.9 || p.Min != 0.8 || p.Max != 1.1 || s[0].BelowNginx != 2 || s[1].CPUVsNginxPaired.N != 0 {
		t.Fatalf("%+v", s)
	}
	var b strings.Builder
	printTables(&b, s, map[string]string{"static-large": "static"}, nil, []string{"static-large"})
	if !strings.Contains(b.String(), "0.90 (0.80–1.10), 2/3 below") {
		t.Fatal(b.String())
	}
}

// TestReqLogicSummary: the reqlogic rows carry the medians of the per-run ratios
// to the paired baseline and of the differences, and print them.
func TestReqLogicSummary(t *testing.T) {
	runs := []runResult{
		{Shape: "reqlogic", Proxy: "numaproxy", Requests: 1, ReqPerSec: 30, CPUus: 21, Detail: pairedDetail{BaseCPUus: 20, CPUVsBase: 1.05, CPUOverBase: 1}},
		{Shape: "reqlogic", Proxy: "numaproxy", Requests: 1, ReqPerSec: 30, CPUus: 22, Detail: pairedDetail{BaseCPUus: 20, CPUVsBase: 1.1, CPUOverBase: 2}},
		{Shape: "reqlogic", Proxy: "numaproxy", Requests: 1, ReqPerSec: 30, CPUus: 30, Detail: pairedDetail{BaseCPUus: 30, CPUVsBase: 1}},
		{Shape: "reqlogic", Proxy: "nginx", Requests: 1, ReqPerSec: 20, CPUus: 40, Detail: pairedDetail{}},
	}
	s := summarize(runs, nil)
	if len(s) != 2 || s[0].CPUVsBase.Median != 1.05 || s[0].CPUVsBase.N != 3 || s[0].BaseCPUus.Median != 20 || s[0].CPUOverBase.Median != 1 || s[1].CPUVsBase.N != 0 {
		t.Fatalf("%+v", s)
	}
	var b strings.Builder
	printTables(&b, s, map[string]string{"reqlogic": "request logic"}, nil, []string{"reqlogic"})
	if !strings.Contains(b.String(), "CPU ×baseline") || !strings.Contains(b.String(), "1.050 (1.000–1.100)") ||
		!strings.Contains(b.String(), "CPU µs over baseline") || !strings.Contains(b.String(), "1.00 (0.00–2.00)") {
		t.Fatal(b.String())
	}
}

// The open-loop generator against a tiny local server: 100 requests at 1000/s.
func TestOpenLoopSmall(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				pending := ""
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					pending += string(buf[:n])
					for {
						i := strings.Index(pending, "\r\n\r\n")
						if i < 0 {
							break
						}
						pending = pending[i+4:]
						c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
					}
				}
			}()
		}
	}()
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	r, err := runOpenLoop(openLoopConfig{addr: netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()), request: request("/", false), rate: 1000, conns: 4, duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Scheduled != 100 || r.Completed != 100 || r.Errors != 0 || r.P50 <= 0 || r.P99 < r.P50 {
		t.Fatalf("%+v", r)
	}
}

func TestParsePerfTraceSummary(t *testing.T) {
	in := `
 Summary of events:

 numaproxy (23317), 1278 events, 2.1%

   syscall            calls  errors  total       min       avg       max       stddev
                                     (msec)    (msec)    (msec)    (msec)        (%)
   --------------- --------  ------ -------- --------- --------- ---------     ------
   nanosleep            319      0  3560.704     0.000    11.162    46.741      1.95%
   read                   5      1     0.100     0.010     0.020     0.030      1.00%


 numaproxy (23322), 58299 events, 96.0%

   syscall            calls  errors  total       min       avg       max       stddev
                                     (msec)    (msec)    (msec)    (msec)        (%)
   --------------- --------  ------ -------- --------- --------- ---------     ------
   epoll_pwait          990     38   792.383     0.000     0.800    24.040     14.79%
   read               13851      3   394.880     0.019     0.029     0.757      0.34%
`
	calls, errs := parsePerfTraceSummary(strings.NewReader(in))
	if len(calls) != 3 || calls["read"] != 13856 || errs["read"] != 4 || calls["epoll_pwait"] != 990 || errs["epoll_pwait"] != 38 || calls["nanosleep"] != 319 {
		t.Fatalf("calls %v errors %v", calls, errs)
	}
}

func TestParseSTime(t *testing.T) {
	out := "\n\nNow timing with session id reuse.\nstarting\nrrrr*rr\nrrr\n\n" +
		"990 connections in 0.33s; 3000.00 connections/user sec, bytes read 4615380\n" +
		"990 connections in 2 real seconds, 4662 bytes read per connection\n"
	n, reused, other, err := parseSTime(out)
	if err != nil || n != 990 || reused != 9 || other != 1 {
		t.Errorf("parseSTime: %d %d %d %v", n, reused, other, err)
	}
	if _, _, _, err := parseSTime("starting\n"); err == nil {
		t.Error("no reuse run: no error")
	}
}

// TestAddTurn: a paired half's CPU per request is that of its turns' sum
// (weighted by their requests), its rate the sum's, its foreign share the worst.
func TestAddTurn(t *testing.T) {
	var sum runResult
	addTurn(&sum, &runResult{Requests: 100, Seconds: 1, CPUus: 10, UserCPUus: 2, Load: cpuLoad{ForeignShare: 0.03}})
	addTurn(&sum, &runResult{Requests: 300, Seconds: 1, CPUus: 20, UserCPUus: 4, Errors: 1, Load: cpuLoad{ForeignShare: 0.01}})
	if sum.Requests != 400 || sum.Seconds != 2 || sum.ReqPerSec != 200 || sum.CPUus != 17.5 || sum.UserCPUus != 3.5 ||
		sum.Errors != 1 || sum.Load.ForeignShare != 0.03 {
		t.Fatalf("%+v", sum)
	}
}
