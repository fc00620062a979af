package limit

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/internal/testport"
)

// Differential tests against Debian's nginx 1.22, the specification: the same
// requests at the same times, nginx's outcome (status, $limit_req_status or
// $limit_conn_status, the delay it applied, measured as its response time)
// against this package's decision for the arrival times the client saw.

func nginxPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/nginx", "/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nginx is not installed; .ci/run installs it")
	}
	t.Skip("nginx is not installed: no comparison with it")
	return ""
}

func freePort(t *testing.T) int { return testport.Free(t) }

// startNginx runs nginx in the foreground, one process, with http block body on
// 127.0.0.1:port, and returns its folder (logs/error.log).
func startNginx(t *testing.T, port int, body string) string {
	t.Helper()
	bin := nginxPath(t)
	dir := t.TempDir()
	for _, d := range []string{"logs", "temp", "html"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A file to serve: "return" would answer in the rewrite phase, before the
	// preaccess phase where the limits are.
	if err := os.WriteFile(filepath.Join(dir, "html/index.html"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "daemon off;\nmaster_process off;\nuser root;\npid logs/nginx.pid;\nerror_log logs/error.log info;\n" +
		"events { worker_connections 1024; }\nhttp {\n  access_log off;\n  client_body_temp_path temp/body;\n" +
		"  proxy_temp_path temp/proxy;\n  fastcgi_temp_path temp/fastcgi;\n  uwsgi_temp_path temp/uwsgi;\n" +
		"  scgi_temp_path temp/scgi;\n  root html;\n" + body + "\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "logs/error.log"))
	out, _ := os.Create(filepath.Join(dir, "stderr.txt"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return dir
		}
		select {
		case <-exited:
			data, _ := os.ReadFile(filepath.Join(dir, "stderr.txt"))
			log, _ := os.ReadFile(filepath.Join(dir, "logs/error.log"))
			t.Fatalf("nginx exited: %s%s", data, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("nginx does not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sent is one request to nginx and what came back.
type sent struct {
	path   string
	at     time.Duration // when the request was written, from the scenario's start
	status int
	body   string
	header http.Header
	took   time.Duration // from writing to the end of the response
	err    error
	done   chan struct{}
}

// send writes a GET on a new connection and reads the response in the background.
func send(addr, path string, base time.Time) *sent {
	r := &sent{path: path, done: make(chan struct{})}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		r.err = err
		close(r.done)
		return r
	}
	_, err = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: limits.test\r\nConnection: close\r\n\r\n")
	wrote := time.Now()
	r.at = wrote.Sub(base)
	if err != nil {
		r.err = err
		c.Close()
		close(r.done)
		return r
	}
	go func() {
		defer close(r.done)
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			r.err = err
			return
		}
		b, err := io.ReadAll(resp.Body)
		r.took = time.Since(wrote)
		r.status, r.body, r.header, r.err = resp.StatusCode, string(b), resp.Header, err
	}()
	return r
}

// step is a request of a scenario: at offset ms from its start, to path.
type step struct {
	at   int
	path string
}

func burstAt(at, n int, path string) []step {
	s := make([]step, n)
	for i := range s {
		s[i] = step{at + 2*i, path} // 2 ms apart so that nginx takes them in order
	}
	return s
}

func TestNginxLimitReq(t *testing.T) {
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := startNginx(t, port, `
  limit_req_zone $arg_k zone=z:1m rate=10r/s;
  limit_req_zone $arg_k zone=w:1m rate=2r/s;
  server {
    listen 127.0.0.1:`+strconv.Itoa(port)+`;
    location /burst   { limit_req zone=z burst=5; add_header X-Limit-Req $limit_req_status always; try_files /index.html =404; }
    location /nodelay { limit_req zone=z burst=5 nodelay; add_header X-Limit-Req $limit_req_status always; try_files /index.html =404; }
    location /delay   { limit_req zone=z burst=6 delay=3; add_header X-Limit-Req $limit_req_status always; try_files /index.html =404; }
    location /none    { limit_req zone=z; add_header X-Limit-Req $limit_req_status always; try_files /index.html =404; }
    location /two     { limit_req zone=z burst=4 nodelay; limit_req zone=w burst=2; add_header X-Limit-Req $limit_req_status always; try_files /index.html =404; }
    location /dry     { limit_req_dry_run on; limit_req zone=z burst=2; add_header X-Limit-Req $limit_req_status always; try_files /index.html =404; }
    location /status  { limit_req_status 429; limit_req zone=z; add_header X-Limit-Req $limit_req_status always; try_files /index.html =404; }
  }`)

	// On a busy machine nginx may take a request tens of milliseconds after it
	// was written, and then decides on a later clock than ours: such a run
	// proves nothing and is tried again, with new keys, up to three times.
	for attempt := range 3 {
		mismatches, noisy := reqScenarios(t, addr, dir, fmt.Sprint(attempt))
		if len(mismatches) == 0 {
			return
		}
		if !noisy {
			t.Fatal(strings.Join(mismatches, "\n"))
		}
		t.Logf("attempt %d: nginx was late to take a request; mismatches:\n%s", attempt, strings.Join(mismatches, "\n"))
	}
	t.Fatal("three runs where nginx was late: the machine is too busy to compare timings")
}

// reqScenarios sends the scenarios' requests to nginx and returns where its
// outcomes and this package's differ, and whether nginx took any request late
// (answered a request it did not delay after more than 10 ms).
func reqScenarios(t *testing.T, addr, dir, attempt string) (mismatches []string, noisy bool) {
	logStart, _ := os.Stat(filepath.Join(dir, "logs/error.log"))
	z, _ := NewReqZone(ReqZoneConfig{Name: "z", Key: "$arg_k", Size: 1 << 20, Rate: 10000}, nil)
	w, _ := NewReqZone(ReqZoneConfig{Name: "w", Key: "$arg_k", Size: 1 << 20, Rate: 2000}, nil)
	confs := map[string]*ReqConf{
		"/burst":   {Limits: []ReqLimit{{Zone: z, Burst: 5000}}, Status: 503},
		"/nodelay": {Limits: []ReqLimit{{Zone: z, Burst: 5000, Delay: math.MaxUint64}}, Status: 503},
		"/delay":   {Limits: []ReqLimit{{Zone: z, Burst: 6000, Delay: 3000}}, Status: 503},
		"/none":    {Limits: []ReqLimit{{Zone: z}}, Status: 503},
		"/two":     {Limits: []ReqLimit{{Zone: z, Burst: 4000, Delay: math.MaxUint64}, {Zone: w, Burst: 2000}}, Status: 503},
		"/dry":     {Limits: []ReqLimit{{Zone: z, Burst: 2000}}, Status: 503, DryRun: true},
		"/status":  {Limits: []ReqLimit{{Zone: z}}, Status: 429},
	}
	scenarios := map[string][]step{
		// burst=5: one free, five delayed 1/rate apart, the rest rejected; 350 ms
		// later 3.5 requests drained; after 2 s all.
		"b": append(append(burstAt(0, 8, "/burst"), burstAt(350, 2, "/burst")...), step{2400, "/burst"}),
		"n": append(burstAt(0, 8, "/nodelay"), burstAt(250, 3, "/nodelay")...),
		// delay=3 (burst=6): three free beyond the first, three delayed, two
		// rejected. The second burst comes 30 ms past the moment (~500 ms) its
		// first request's excess falls to the delay threshold: at 500 ms a
		// millisecond between nginx's clock and the client's decided it.
		"d": append(burstAt(0, 9, "/delay"), burstAt(530, 3, "/delay")...),
		"o": {{0, "/none"}, {50, "/none"}, {120, "/none"}, {135, "/none"}, {260, "/none"}, {300, "/none"}},
		// Two limits: w (2r/s burst=2) sets the delays; a request w rejects is
		// not counted in z either.
		"t": append(burstAt(0, 5, "/two"), step{1700, "/two"}, step{1720, "/two"}),
		"y": append(burstAt(0, 5, "/dry"), step{150, "/dry"}),
		"s": {{0, "/status"}, {20, "/status"}, {130, "/status"}},
	}
	type result struct {
		key  string
		reqs []*sent
	}
	base := time.Now().Add(50 * time.Millisecond)
	var wg sync.WaitGroup
	results := make(chan result, len(scenarios))
	for key, steps := range scenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reqs []*sent
			for _, s := range steps {
				time.Sleep(time.Until(base.Add(time.Duration(s.at) * time.Millisecond)))
				reqs = append(reqs, send(addr, s.path+"?k="+key+attempt, base))
			}
			for _, r := range reqs {
				<-r.done
			}
			results <- result{key, reqs}
		}()
	}
	wg.Wait()
	close(results)

	var ours []string // our log lines for the requests nginx logs
	for res := range results {
		now0 := int64(1) << 36
		for i, r := range res.reqs {
			if r.err != nil {
				t.Fatalf("%s %d: %v", res.key, i, r.err)
			}
			path := r.path[:strings.IndexByte(r.path, '?')]
			c := confs[path]
			key := []byte(res.key + attempt)
			d := c.Check([][]byte{key, key}[:len(c.Limits)], now0+r.at.Milliseconds())
			got := d.Status.String()
			if d.Status == ReqRejected {
				got = strconv.Itoa(d.Code)
			}
			if l := d.AppendLog(nil); len(l) > 0 {
				ours = append(ours, string(l))
			}
			nginx := r.header.Get("X-Limit-Req")
			if r.status != 200 {
				nginx = strconv.Itoa(r.status)
			}
			// nginx's response time is its delay plus a little, or more when
			// the machine is busy; its clock may tick a millisecond off ours.
			slack := r.took - d.Delay
			t.Logf("%s %-16s at %4dms: nginx %-16s in %4dms, here %-16s delay %4dms", res.key, r.path, r.at.Milliseconds(), nginx, r.took.Milliseconds(), got, d.Delay.Milliseconds())
			if (nginx == "PASSED" || nginx == "503" || nginx == "429" || strings.HasSuffix(nginx, "DRY_RUN")) && r.took > 10*time.Millisecond {
				noisy = true
			}
			if got != nginx || slack < -3*time.Millisecond || slack > 75*time.Millisecond {
				mismatches = append(mismatches, fmt.Sprintf("%s request %d (%s at %v): nginx %s after %v, here %s with delay %v", res.key, i, r.path, r.at, nginx, r.took, got, d.Delay))
			}
		}
	}
	// The same log lines. nginx's excess may differ in the last digits: it
	// reads its clock when it takes the request, which on a busy machine may be
	// 10 ms after the client wrote it (0.1 request at 10r/s).
	time.Sleep(100 * time.Millisecond)
	log, _ := os.ReadFile(filepath.Join(dir, "logs/error.log"))
	log = log[logStart.Size():]
	re := regexp.MustCompile(`(limiting requests|delaying request)(, dry run)?, excess: (\d+\.\d{3}),? by zone "\w"`)
	var theirs []string
	for _, m := range re.FindAllString(string(log), -1) {
		theirs = append(theirs, m)
	}
	a, b := logShapes(theirs), logShapes(ours)
	if len(a) != len(b) || len(a) == 0 {
		return append(mismatches, fmt.Sprintf("nginx logged %d lines\n%s\nwe %d\n%s", len(a), strings.Join(theirs, "\n"), len(b), strings.Join(ours, "\n"))), noisy
	}
	for i := range a {
		if a[i].shape != b[i].shape || math.Abs(a[i].excess-b[i].excess) > 0.15 {
			return append(mismatches, fmt.Sprintf("nginx logged %q, we %q", theirs, ours)), noisy
		}
	}
	return mismatches, noisy
}

type logLine struct {
	shape  string
	excess float64
}

// logShapes sorts log lines by their text without the excess, then the excess.
func logShapes(lines []string) []logLine {
	re := regexp.MustCompile(`excess: (\d+\.\d{3})`)
	out := make([]logLine, len(lines))
	for i, l := range lines {
		m := re.FindStringSubmatchIndex(l)
		out[i].excess, _ = strconv.ParseFloat(l[m[2]:m[3]], 64)
		out[i].shape = l[:m[2]] + "X" + l[m[3]:]
	}
	slices.SortFunc(out, func(a, b logLine) int {
		if c := strings.Compare(a.shape, b.shape); c != 0 {
			return c
		}
		return cmp.Compare(a.excess, b.excess)
	})
	return out
}

// heldUpstream answers a request only when the test releases it, so that nginx
// keeps it (and its limit_conn counts) until then.
type heldUpstream struct {
	mu      sync.Mutex
	release map[string]chan struct{}
	arrived chan string
}

func (u *heldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	ch := make(chan struct{})
	u.mu.Lock()
	u.release[id] = ch
	u.mu.Unlock()
	u.arrived <- id
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
	}
	io.WriteString(w, "ok")
}

func (u *heldUpstream) let(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	close(u.release[id])
}

func TestNginxLimitConn(t *testing.T) {
	up := &heldUpstream{release: map[string]chan struct{}{}, arrived: make(chan string, 16)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: up}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pass := "add_header X-Limit-Conn $limit_conn_status always; proxy_pass http://" + ln.Addr().String() + ";"
	dir := startNginx(t, port, `
  limit_conn_zone $arg_a zone=a:1m;
  limit_conn_zone $arg_b zone=b:1m;
  server {
    listen 127.0.0.1:`+strconv.Itoa(port)+`;
    location /conn   { limit_conn a 2; `+pass+` }
    location /two    { limit_conn a 2; limit_conn b 1; `+pass+` }
    location /dry    { limit_conn_dry_run on; limit_conn a 1; `+pass+` }
    location /status { limit_conn_status 429; limit_conn a 1; `+pass+` }
  }`)

	a, _ := NewConnZone(ConnZoneConfig{Name: "a", Key: "$arg_a", Size: 1 << 20}, nil)
	b, _ := NewConnZone(ConnZoneConfig{Name: "b", Key: "$arg_b", Size: 1 << 20}, nil)
	confs := map[string]*ConnConf{
		"/conn":   {Limits: []ConnLimit{{Zone: a, Conn: 2}}, Status: 503},
		"/two":    {Limits: []ConnLimit{{Zone: a, Conn: 2}, {Zone: b, Conn: 1}}, Status: 503},
		"/dry":    {Limits: []ConnLimit{{Zone: a, Conn: 1}}, Status: 503, DryRun: true},
		"/status": {Limits: []ConnLimit{{Zone: a, Conn: 1}}, Status: 429},
	}
	// "+id path?query" opens a request (held at the upstream if nginx passes it),
	// "-id" lets the upstream answer it.
	script := []string{
		"+1 /conn?a=x", "+2 /conn?a=x", "+3 /conn?a=x", "-1", "+4 /conn?a=x", "+5 /conn?a=y", "-2", "-4", "-5",
		// b rejects 7 and gives back what 7 took in a, so 8 passes, 9 does not.
		"+6 /two?a=x&b=p", "+7 /two?a=x&b=p", "+8 /two?a=x&b=q", "+9 /two?a=x&b=s", "-6", "+10 /two?a=x&b=p", "-8", "-10",
		// A dry run rejects without counting: 12 and 13 go on, 14 passes.
		"+11 /dry?a=z", "+12 /dry?a=z", "+13 /dry?a=z", "-11", "+14 /dry?a=z", "-12", "-13", "-14",
		"+15 /status?a=x", "+16 /status?a=x", "-15",
		// No key, no count, no status.
		"+17 /conn", "+18 /conn", "+19 /conn", "-17", "-18", "-19",
	}
	type req struct {
		r    *sent
		want ConnDecision
		hold ConnHold
	}
	reqs := map[string]*req{}
	base := time.Now()
	for _, step := range script {
		id, target, _ := strings.Cut(step[1:], " ")
		if step[0] == '-' {
			up.let(id)
			<-reqs[id].r.done
			reqs[id].hold.Release()
			continue
		}
		path, query, _ := strings.Cut(target, "?")
		sep := "&"
		if query == "" {
			sep = "?"
		}
		q := &req{r: send(addr, target+sep+"id="+id, base)}
		reqs[id] = q
		select {
		case got := <-up.arrived:
			if got != id {
				t.Fatalf("request %s: the upstream got %s", id, got)
			}
		case <-q.r.done:
		case <-time.After(5 * time.Second):
			t.Fatalf("request %s: neither answered nor passed on", id)
		}
		c := confs[path]
		keys := make([][]byte, len(c.Limits))
		for i, l := range c.Limits {
			for _, kv := range strings.Split(query, "&") {
				if k, v, _ := strings.Cut(kv, "="); k == l.Zone.Name {
					keys[i] = []byte(v)
				}
			}
		}
		q.want = c.Acquire(keys, &q.hold)
		if q.want.Status >= ConnRejected && q.hold.Held() != 0 {
			t.Errorf("request %s rejected holds %d counts", id, q.hold.Held())
		}
	}
	for _, step := range script {
		id, target, _ := strings.Cut(step[1:], " ")
		if step[0] == '-' {
			continue
		}
		q := reqs[id]
		<-q.r.done
		if q.r.err != nil {
			t.Fatalf("request %s: %v", id, q.r.err)
		}
		got, want := fmt.Sprint(q.r.status, " ", q.r.header.Get("X-Limit-Conn")), fmt.Sprint(200, " ", q.want.Status)
		if q.want.Code != 0 {
			want = fmt.Sprint(q.want.Code, " ", q.want.Status)
		}
		t.Logf("%-3s %-18s nginx %-20s here %s", id, target, got, want)
		if got = strings.TrimSpace(got); got != strings.TrimSpace(want) {
			t.Errorf("request %s %s: nginx %q, here %q", id, target, got, want)
		}
	}
	if n := a.count("x") + a.count("y") + a.count("z") + b.count("p") + b.count("q"); n != 0 {
		t.Errorf("%d counts left", n)
	}
	// nginx's log lines for the rejections, as ours.
	time.Sleep(100 * time.Millisecond)
	log, _ := os.ReadFile(filepath.Join(dir, "logs/error.log"))
	var theirs, ours []string
	for _, m := range regexp.MustCompile(`limiting connections(, dry run,)? by zone "\w"`).FindAllString(string(log), -1) {
		theirs = append(theirs, m)
	}
	for _, step := range script {
		if q := reqs[strings.Fields(step[1:])[0]]; step[0] == '+' {
			if l := q.want.AppendLog(nil); len(l) > 0 {
				ours = append(ours, string(l))
			}
		}
	}
	if !slices.Equal(theirs, ours) {
		t.Errorf("nginx logged %q, we %q", theirs, ours)
	}
}

// How many states nginx keeps in a zone: fill it with new keys, then ask for the
// newest ones again, newest first; a key still there is rejected (rate=1r/m), the
// first one gone passes. nginx evicts its least recently used, so the count of
// rejections is its capacity. The table holds as many (the slab model); which
// ones it evicted is the CLOCK's choice among keys not used since the hand last
// passed, so its newest keys in a row are fewer (TestActiveKeySurvivesFlood says
// what it keeps).
func TestNginxZoneCapacity(t *testing.T) {
	port := freePort(t)
	startNginx(t, port, `
  limit_req_zone $arg_k zone=small:32k rate=1r/m;
  limit_req_zone $arg_k zone=pages15:64k rate=1r/m;
  server {
    listen 127.0.0.1:`+strconv.Itoa(port)+`;
    keepalive_requests 100000;
    location /small   { limit_req zone=small; try_files /index.html =404; }
    location /pages15 { limit_req zone=pages15; try_files /index.html =404; }
  }`)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	get := func(path string) int {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: limits.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		zone string
		size int64
	}{{"small", 32 << 10}, {"pages15", 64 << 10}} {
		z, _ := NewReqZone(ReqZoneConfig{Name: tc.zone, Key: "$arg_k", Size: tc.size, Rate: 16}, nil)
		conf := &ReqConf{Limits: []ReqLimit{{Zone: z}}, Status: 503}
		const keys = 700
		now := Now()
		for k := range keys {
			if st := get(fmt.Sprintf("/%s?k=%d", tc.zone, k)); st != 200 {
				t.Fatalf("new key %d: %d", k, st)
			}
			conf.Check([][]byte{fmt.Appendf(nil, "%d", k)}, now)
		}
		nginx, ours := 0, 0
		for k := keys - 1; k >= 0 && get(fmt.Sprintf("/%s?k=%d", tc.zone, k)) == 503; k-- {
			nginx++
		}
		for k := keys - 1; k >= 0 && conf.Check([][]byte{fmt.Appendf(nil, "%d", k)}, now).Status == ReqRejected; k-- {
			ours++
		}
		t.Logf("zone %s (%d bytes): nginx keeps the last %d keys; the table holds %d (%d newest in a row)", tc.zone, tc.size, nginx, z.Len(), ours)
		if z.Len() != nginx {
			t.Errorf("zone %s: nginx keeps %d states, the table %d", tc.zone, nginx, z.Len())
		}
	}
}
