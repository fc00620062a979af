package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cacheUpstream answers by path with the caching fields each case needs and counts
// the requests per path (method included).
func cacheUpstream(t *testing.T) (*backend, func(path string) int) {
	var mu sync.Mutex
	counts := map[string]int{}
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		mu.Lock()
		counts[p]++
		n := counts[p]
		mu.Unlock()
		h := w.Header()
		status := 200
		switch {
		case strings.HasSuffix(p, "/cc"):
			h.Set("Cache-Control", "max-age=1")
		case strings.HasSuffix(p, "/nocache"), strings.HasSuffix(p, "/ign"):
			h.Set("Cache-Control", "no-cache")
		case strings.HasSuffix(p, "/private"):
			h.Set("Cache-Control", "private, max-age=60")
		case strings.HasSuffix(p, "/cookie"):
			h.Set("Set-Cookie", "a=b")
		case strings.HasSuffix(p, "/past"):
			h.Set("Expires", "Thu, 01 Jan 1970 00:00:01 GMT")
		case strings.HasSuffix(p, "/future"):
			h.Set("Expires", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		case strings.HasSuffix(p, "/xae0"):
			h.Set("Cache-Control", "max-age=60")
			h.Set("X-Accel-Expires", "0")
		case strings.HasSuffix(p, "/smax"):
			h.Set("Cache-Control", "max-age=0, s-maxage=60")
		case strings.Contains(p, "/cond") && (r.Header.Get("If-None-Match") != "" || r.Header.Get("Range") != ""):
			status = 412 // a location that caches sends neither upstream
		case strings.HasSuffix(p, "/vary"):
			h.Set("Vary", "Accept-Encoding")
			p += " for " + r.Header.Get("Accept-Encoding")
		case strings.HasSuffix(p, "/varystar"):
			h.Set("Vary", "*")
		case strings.HasSuffix(p, "/reval"):
			h.Set("ETag", `"v1"`)
			h.Set("Cache-Control", "max-age=1")
			if r.Header.Get("If-None-Match") == `"v1"` {
				status = 304
			}
		case strings.HasSuffix(p, "/etag"):
			h.Set("ETag", `"abc"`)
			h.Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		case strings.HasSuffix(p, "/r"):
			h.Set("Accept-Ranges", "bytes")
		case strings.HasSuffix(p, "/404"):
			status = 404
		case strings.HasSuffix(p, "/500"):
			status = 500
		case strings.HasSuffix(p, "/slow"):
			time.Sleep(300 * time.Millisecond)
		case strings.HasSuffix(p, "/slowcc"):
			time.Sleep(500 * time.Millisecond)
			h.Set("Cache-Control", "max-age=1")
		case strings.HasSuffix(p, "/flip"):
			// Fresh for a second, then the upstream fails.
			h.Set("Cache-Control", "max-age=1")
			if n > 1 {
				status = 500
			}
		}
		h.Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		if status == 304 {
			return
		}
		body := "body of " + p
		if strings.Contains(p, "/m/") {
			body += strings.Repeat(".", 3000) // one 4 KiB block on disk
		}
		io.WriteString(w, body)
	})
	return b, func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return counts[path]
	}
}

func cacheConf(addr, up string) string {
	return fmt.Sprintf(`
    proxy_cache_path cache levels=1:2 keys_zone=z:1m inactive=10m;
    server {
        listen %s;
        proxy_cache z;
        proxy_cache_valid 200 1m;
        proxy_cache_valid 404 1s;
        proxy_cache_bypass $http_x_bypass;
        proxy_no_cache $http_x_nocache;
        add_header X-Cache $upstream_cache_status always;
        location / { proxy_pass http://%s; }
        location /ign/ { proxy_pass http://%s; proxy_ignore_headers Cache-Control; }
        location /mu/ { proxy_pass http://%s; proxy_cache_min_uses 2; }
        location /lock/ { proxy_pass http://%s; proxy_cache_lock on; }
        location /off/ { proxy_pass http://%s; proxy_cache off; }
        location /nb/ { proxy_pass http://%s; proxy_buffering off; }
    }
`, addr, up, up, up, up, up, up)
}

// serverSignature is the name and version an error page carries.
var serverSignature = regexp.MustCompile(`(numaproxy|nginx)/[0-9.]+`)

// cacheStep is one request of a scripted series and what it saw.
type cacheStep struct {
	method, path string
	hdr          []string
	sleep        time.Duration // before the request
}

func runCacheSeries(t *testing.T, addr string, steps []cacheStep, count func(string) int) []string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	var out []string
	for _, s := range steps {
		time.Sleep(s.sleep)
		req, _ := http.NewRequest(s.method, "http://"+addr+s.path, nil)
		for i := 0; i+1 < len(s.hdr); i += 2 {
			req.Header.Set(s.hdr[i], s.hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", s.method, s.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = serverSignature.ReplaceAll(body, []byte("SERVER"))
		if len(body) > 200 {
			body = []byte(fmt.Sprintf("%d bytes", len(body)))
		}
		line := fmt.Sprintf("%s %s: %d %s %q upstream=%d", s.method, s.path, resp.StatusCode, resp.Header.Get("X-Cache"), body, count(strings.SplitN(s.path, "?", 2)[0]))
		for _, f := range []string{"Content-Range", "Accept-Ranges", "Content-Length"} {
			// Error pages differ in length; a hit of a response that came chunked
			// has its length in numaproxy, nginx sends it chunked.
			if v := resp.Header.Get(f); v != "" && resp.StatusCode < 400 && (f != "Content-Length" || !strings.Contains(s.path, "/m/")) {
				line += " " + f + "=" + v
			}
		}
		out = append(out, line)
	}
	return out
}

// TestCacheSeriesAgainstNginx runs one scripted series of requests through
// numaproxy and nginx on the same configuration, each with an upstream of its own,
// and compares $upstream_cache_status, the responses and the upstream's counts.
func TestCacheSeriesAgainstNginx(t *testing.T) {
	steps := []cacheStep{
		{method: "GET", path: "/a"}, {method: "GET", path: "/a"}, {method: "GET", path: "/a", hdr: []string{"X-Bypass", "1"}},
		{method: "GET", path: "/a"},
		{method: "GET", path: "/cc"}, {method: "GET", path: "/cc"},
		{method: "GET", path: "/nocache"}, {method: "GET", path: "/nocache"},
		{method: "GET", path: "/private"}, {method: "GET", path: "/private"},
		{method: "GET", path: "/cookie"}, {method: "GET", path: "/cookie"},
		{method: "GET", path: "/past"}, {method: "GET", path: "/past"},
		{method: "GET", path: "/future"}, {method: "GET", path: "/future"},
		{method: "GET", path: "/xae0"}, {method: "GET", path: "/xae0"},
		{method: "GET", path: "/smax"}, {method: "GET", path: "/smax"},
		{method: "GET", path: "/ign/ign"}, {method: "GET", path: "/ign/ign"},
		{method: "GET", path: "/404"}, {method: "GET", path: "/404"},
		{method: "GET", path: "/500"}, {method: "GET", path: "/500"},
		{method: "GET", path: "/n", hdr: []string{"X-Nocache", "1"}}, {method: "GET", path: "/n"}, {method: "GET", path: "/n"},
		{method: "GET", path: "/mu/x"}, {method: "GET", path: "/mu/x"}, {method: "GET", path: "/mu/x"},
		{method: "HEAD", path: "/h"}, {method: "GET", path: "/h"},
		{method: "GET", path: "/off/x"}, {method: "GET", path: "/off/x"},
		{method: "GET", path: "/nb/x"}, {method: "GET", path: "/nb/x"},
		{method: "GET", path: "/q?x=1"}, {method: "GET", path: "/q?x=2"}, {method: "GET", path: "/q?x=1"},
		// A location that caches asks the upstream unconditionally, for the whole.
		{method: "GET", path: "/cond", hdr: []string{"If-None-Match", `"x"`}}, {method: "GET", path: "/cond2", hdr: []string{"Range", "bytes=0-1"}},
		{method: "GET", path: "/cond"},
		// Variants by Vary, and Vary: * never cached.
		{method: "GET", path: "/vary", hdr: []string{"Accept-Encoding", "gzip"}}, {method: "GET", path: "/vary", hdr: []string{"Accept-Encoding", "gzip"}},
		{method: "GET", path: "/vary", hdr: []string{"Accept-Encoding", "br"}}, {method: "GET", path: "/vary", hdr: []string{"Accept-Encoding", "br"}},
		{method: "GET", path: "/vary", hdr: []string{"Accept-Encoding", "gzip"}}, {method: "GET", path: "/vary", hdr: []string{"Accept-Encoding", "identity"}},
		{method: "GET", path: "/varystar"}, {method: "GET", path: "/varystar"},
		// The not-modified filter of a stored response and of a hit.
		{method: "GET", path: "/etag", hdr: []string{"If-None-Match", `"abc"`}}, {method: "GET", path: "/etag", hdr: []string{"If-None-Match", `W/"abc"`}},
		{method: "GET", path: "/etag", hdr: []string{"If-Modified-Since", "Mon, 02 Jan 2006 15:04:05 GMT"}},
		{method: "GET", path: "/etag", hdr: []string{"If-Modified-Since", "Mon, 02 Jan 2006 15:04:06 GMT"}},
		{method: "GET", path: "/etag", hdr: []string{"If-Match", `"zzz"`}}, {method: "GET", path: "/etag"},
		// Ranges of a hit.
		{method: "GET", path: "/r"}, {method: "GET", path: "/r", hdr: []string{"Range", "bytes=2-5"}},
		{method: "GET", path: "/r", hdr: []string{"Range", "bytes=-3"}}, {method: "HEAD", path: "/r", hdr: []string{"Range", "bytes=0-0"}},
		{method: "GET", path: "/r", hdr: []string{"Range", "bytes=1-2", "If-Range", `"nope"`}},
		// Expiry: max-age=1 and 404's 1s are past after two seconds.
		{method: "GET", path: "/cc", sleep: 2100 * time.Millisecond}, {method: "GET", path: "/cc"},
		{method: "GET", path: "/404"},
	}
	run := func(start func(addr, up string)) []string {
		up, count := cacheUpstream(t)
		addr := addrFor(t)
		start(addr, up.Addr)
		return runCacheSeries(t, addr, steps, count)
	}
	ours := run(func(addr, up string) { startHTTP(t, cacheConf(addr, up), addr) })
	theirs := run(func(addr, up string) { startNginx(t, cacheConf(addr, up), addr) })
	compareSeries(t, ours, theirs)
}

func compareSeries(t *testing.T, ours, theirs []string) {
	t.Helper()
	t.Logf("nginx's series:\n%s", strings.Join(theirs, "\n"))
	for i := range theirs {
		if i >= len(ours) || ours[i] != theirs[i] {
			got := ""
			if i < len(ours) {
				got = ours[i]
			}
			t.Errorf("step %d: numaproxy %s\n                 nginx     %s", i, got, theirs[i])
		}
	}
}

// TestCacheStaleAndLockAgainstNginx: an expired entry stands in when the upstream
// is down (use_stale error); an expired entry is revalidated with a conditional
// request and a 304 (REVALIDATED); with proxy_cache_lock, concurrent misses make
// one upstream request. Compared with nginx on the same configuration.
func TestCacheStaleAndLockAgainstNginx(t *testing.T) {
	conf := func(addr, up, down string) string {
		return fmt.Sprintf(`
    proxy_cache_path cache keys_zone=z:1m;
    server {
        listen %s;
        proxy_cache z;
        add_header X-Cache $upstream_cache_status always;
        location /lock/ { proxy_pass http://%s; proxy_cache_lock on; proxy_cache_valid 200 1m; }
        location /st/ { proxy_pass http://%s; proxy_cache_use_stale error timeout http_500 updating; proxy_cache_key stkey; }
        location /down/ { proxy_pass http://%s; proxy_cache_use_stale error; proxy_cache_key stkey; }
        location /down2/ { proxy_pass http://%s; proxy_cache_key stkey; }
        location /rv/ { proxy_pass http://%s; proxy_cache_revalidate on; }
    }
`, addr, up, up, down, down, up)
	}
	run := func(start func(addr, cfg string)) []string {
		up, count := cacheUpstream(t)
		addr := addrFor(t)
		start(addr, conf(addr, up.Addr, addrFor(t)))
		var out []string
		// Five concurrent misses under the lock: one upstream request.
		var wg sync.WaitGroup
		statuses := make([]string, 5)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Get("http://" + addr + "/lock/slow")
				if err != nil {
					statuses[i] = err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses[i] = resp.Header.Get("X-Cache")
			}()
			time.Sleep(20 * time.Millisecond) // the first one takes the lock
		}
		wg.Wait()
		out = append(out, fmt.Sprintf("lock: %v upstream=%d", statuses, count("/lock/slow")))
		out = append(out, runCacheSeries(t, addr, []cacheStep{
			{method: "GET", path: "/st/cc"}, {method: "GET", path: "/st/cc"}, {method: "GET", path: "/rv/reval"},
			// Expired: the upstream is down for /down/ (same key): STALE, or 502
			// without use_stale.
			{method: "GET", path: "/down/x", sleep: 2100 * time.Millisecond}, {method: "GET", path: "/down2/x"},
			// Revalidated with a 304, then fresh again.
			{method: "GET", path: "/rv/reval"}, {method: "GET", path: "/rv/reval"},
		}, count)...)
		return out
	}
	ours := run(func(addr, cfg string) { startHTTP(t, cfg, addr) })
	theirs := run(func(addr, cfg string) { startNginx(t, cfg, addr) })
	compareSeries(t, ours, theirs)
}

// TestCacheSurvivesRestart: the loader indexes the entries a previous run left, so
// a new process answers them as hits; a temporary file a crash left is not served.
func TestCacheSurvivesRestart(t *testing.T) {
	up, count := cacheUpstream(t)
	addr := addrFor(t)
	cfg := "error_log logs/error.log info;\nworker_processes 1;\nevents {}\nhttp {\n" + cacheConf(addr, up.Addr) + "\n}\n"
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": cfg})
	in := start(t, dir)
	waitFor(t, "listening", 10*time.Second, func() bool {
		c, err := http.Get("http://" + addr + "/off/x")
		if err == nil {
			c.Body.Close()
		}
		return err == nil
	})
	first := runCacheSeries(t, addr, []cacheStep{{method: "GET", path: "/a"}, {method: "GET", path: "/a"}}, count)
	in.cmd.Process.Kill()
	waitFor(t, "the first process gone", 10*time.Second, func() bool { return !in.alive() })
	// A crash midway leaves a temporary file: the loader removes it.
	stray := filepath.Join(dir, "cache", ".tmp.999999999.1")
	os.WriteFile(stray, []byte("partial"), 0o600)
	start(t, dir)
	waitFor(t, "listening again", 10*time.Second, func() bool {
		c, err := http.Get("http://" + addr + "/off/x")
		if err == nil {
			c.Body.Close()
		}
		return err == nil
	})
	var second []string
	waitFor(t, "a hit from the loaded cache", 5*time.Second, func() bool {
		second = runCacheSeries(t, addr, []cacheStep{{method: "GET", path: "/a"}}, count)
		return strings.Contains(second[0], " HIT ")
	})
	if want := `GET /a: 200 HIT "body of /a" upstream=1 Content-Length=10`; second[0] != want {
		t.Errorf("after a restart: %s, want %s (before: %v)", second[0], want, first)
	}
	if _, err := os.Stat(stray); err == nil {
		t.Errorf("the stray temporary file is still there")
	}
	// A damaged entry (cut short, as by a full disk or another process) is a MISS,
	// never an error or a short response.
	filepath.WalkDir(filepath.Join(dir, "cache"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			os.Truncate(p, fi.Size()-3)
		}
		return nil
	})
	third := runCacheSeries(t, addr, []cacheStep{{method: "GET", path: "/a"}, {method: "GET", path: "/a"}}, count)
	want := []string{`GET /a: 200 MISS "body of /a" upstream=2 Content-Length=10`, `GET /a: 200 HIT "body of /a" upstream=2 Content-Length=10`}
	if strings.Join(third, "\n") != strings.Join(want, "\n") {
		t.Errorf("a damaged entry: %q, want %q", third, want)
	}
}

// TestCacheExpiryAgainstNginx: use_stale updating and http_500, inactive removes
// an entry not used, max_size (counted in 4 KiB blocks, as nginx) evicts the least recently used; compared with nginx.
func TestCacheExpiryAgainstNginx(t *testing.T) {
	conf := func(addr, up string) string {
		return fmt.Sprintf(`
    proxy_cache_path cache keys_zone=z:1m;
    proxy_cache_path inactive keys_zone=i:1m inactive=2s;
    proxy_cache_path small keys_zone=m:1m max_size=10k;
    server {
        listen %s;
        add_header X-Cache $upstream_cache_status always;
        proxy_cache_valid 200 1m;
        location /st/ { proxy_pass http://%s; proxy_cache z; proxy_cache_use_stale http_500 updating; }
        location /i/ { proxy_pass http://%s; proxy_cache i; }
        location /m/ { proxy_pass http://%s; proxy_cache m; }
    }
`, addr, up, up, up)
	}
	run := func(start func(addr, cfg string)) []string {
		up, count := cacheUpstream(t)
		addr := addrFor(t)
		start(addr, conf(addr, up.Addr))
		t0 := time.Now()
		out := runCacheSeries(t, addr, []cacheStep{
			{method: "GET", path: "/st/slowcc"}, {method: "GET", path: "/st/flip"},
			{method: "GET", path: "/i/a"}, {method: "GET", path: "/i/a"},
			{method: "GET", path: "/m/1"}, {method: "GET", path: "/m/2"}, {method: "GET", path: "/m/3"},
		}, count)
		time.Sleep(2100 * time.Millisecond)
		// One request updates the expired entry; another meanwhile gets it UPDATING.
		done := make(chan []string)
		go func() { done <- runCacheSeries(t, addr, []cacheStep{{method: "GET", path: "/st/slowcc"}}, count) }()
		time.Sleep(150 * time.Millisecond)
		updating := runCacheSeries(t, addr, []cacheStep{{method: "GET", path: "/st/slowcc"}}, count)
		out = append(out, <-done...)
		out = append(out, updating...)
		out = append(out, runCacheSeries(t, addr, []cacheStep{
			{method: "GET", path: "/st/flip"},
		}, count)...)
		// nginx's cache manager, idle, wakes every 10 s: past its second pass the
		// inactive entry and the least recently used one beyond max_size are gone.
		time.Sleep(time.Until(t0.Add(11 * time.Second)))
		out = append(out, runCacheSeries(t, addr, []cacheStep{
			{method: "GET", path: "/i/a"}, {method: "GET", path: "/m/1"}, {method: "GET", path: "/m/3"},
		}, count)...)
		return out
	}
	ours := run(func(addr, cfg string) { startHTTP(t, cfg, addr) })
	theirs := run(func(addr, cfg string) { startNginx(t, cfg, addr) })
	compareSeries(t, ours, theirs)
}

// TestCacheBackgroundUpdateAgainstNginx: with proxy_cache_background_update and
// use_stale updating, the request that finds the entry expired is answered with
// it at once (STALE) while a background request, which outlives it and its
// connection, fetches it anew from a slow upstream; a request meanwhile gets it
// UPDATING; once the refresh is done the new response is a HIT, after exactly one
// upstream request. A refresh that fails leaves the expired entry, which the next
// request gets STALE again with a refresh of its own. Compared with nginx; every
// request on a connection of its own (nginx holds a keep-alive connection's next
// request until its background request ends).
func TestCacheBackgroundUpdateAgainstNginx(t *testing.T) {
	const slow = 1500 * time.Millisecond
	conf := func(addr, up, down string) string {
		return fmt.Sprintf(`
    proxy_cache_path cache keys_zone=z:1m;
    server {
        listen %s;
        add_header X-Cache $upstream_cache_status always;
        proxy_cache z;
        proxy_cache_use_stale updating;
        proxy_cache_background_update on;
        proxy_cache_key $uri;
        location / { proxy_pass http://%s; }
        # The same entry as /bg/down, refreshed from an upstream that refuses.
        location /down/ { proxy_pass http://%s; proxy_cache_key /bg/down; }
        # The refresh asks for the same URI: the location's capture included.
        location ~ ^/re/(.*)$ { proxy_pass http://%s/bg/$1; }
    }
`, addr, up, down, up)
	}
	run := func(start func(addr, cfg string)) []string {
		up, counts := countingBackend(t, func(w http.ResponseWriter, p string, n int) {
			status := 200
			if n > 1 {
				time.Sleep(slow) // the refreshes are slow
				if strings.HasSuffix(p, "/fail") {
					status = 500
				}
			}
			if status == 200 {
				w.Header().Set("Cache-Control", "max-age=1") // a 500 is not stored
			}
			w.WriteHeader(status)
			fmt.Fprintf(w, "%s version %d", p, n)
		})
		addr := addrFor(t)
		start(addr, conf(addr, up.Addr, addrFor(t)))
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		get := func(p string) string {
			resp, err := c.Get("http://" + addr + p)
			if err != nil {
				t.Fatalf("GET %s: %v", p, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_, ended := counts(p)
			return fmt.Sprintf("GET %s: %d %s %q (upstream answers so far: %d)", p, resp.StatusCode, resp.Header.Get("X-Cache"), body, ended)
		}
		// waitRefresh waits for the upstream to have answered n requests of p.
		waitRefresh := func(p string, n int) string {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if _, e := counts(p); e >= n {
					break
				}
			}
			time.Sleep(200 * time.Millisecond) // the proxy stores it
			b, e := counts(p)
			return fmt.Sprintf("%s: upstream asked %d, answered %d", p, b, e)
		}
		var out []string
		for _, p := range []string{"/bg/ok", "/bg/fail", "/bg/down", "/re/cap"} {
			out = append(out, get(p))
		}
		time.Sleep(2100 * time.Millisecond) // all expired
		// A refresh that cannot connect ends at once: the entry is STALE again.
		out = append(out, get("/down/x"), get("/down/x"))
		out = append(out, get("/re/cap"), waitRefresh("/bg/cap", 2))
		for _, p := range []string{"/bg/ok", "/bg/fail"} {
			out = append(out, get(p), get(p)) // STALE at once, then UPDATING
			out = append(out, waitRefresh(p, 2))
			out = append(out, get(p))
		}
		out = append(out, waitRefresh("/bg/fail", 3), get("/bg/ok"))
		return out
	}
	ours := run(func(addr, cfg string) { startHTTP(t, cfg, addr) })
	theirs := run(func(addr, cfg string) { startNginx(t, cfg, addr) })
	compareSeries(t, ours, theirs)
}

// TestCacheHitKeepsDescriptor: a loop keeps the descriptor of a cache file its
// hit opened, so the next hits read it without looking the name up (shown by
// unlinking the file: still a HIT, where opening it by name would be a MISS); a
// response stored anew is a file of another generation, served at once; a
// descriptor not used for about five seconds is closed (the unlinked file is
// released).
func TestCacheHitKeepsDescriptor(t *testing.T) {
	var mu sync.Mutex
	n := 0
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		v := n
		mu.Unlock()
		fmt.Fprintf(w, "version %d", v)
	})
	addr := addrFor(t)
	in := startHTTP(t, fmt.Sprintf(`
    proxy_cache_path cache keys_zone=z:1m;
    server {
        listen %s;
        add_header X-Cache $upstream_cache_status always;
        location / { proxy_pass http://%s; proxy_cache z; proxy_cache_valid 200 1h; proxy_cache_bypass $http_x_bypass; }
    }
`, addr, up.Addr), addr)
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(hdr ...string) string {
		req, _ := http.NewRequest("GET", "http://"+addr+"/a", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Header.Get("X-Cache") + " " + string(body)
	}
	cacheFiles := func() []string {
		var files []string
		filepath.WalkDir(filepath.Join(in.dir, "cache"), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files = append(files, p)
			}
			return nil
		})
		return files
	}
	var got []string
	got = append(got, get(), get())
	files := cacheFiles()
	if len(files) != 1 {
		t.Fatalf("cache files: %v", files)
	}
	os.Remove(files[0])
	got = append(got, get(), get("X-Bypass", "1"), get())
	want := []string{"MISS version 1", "HIT version 1", "HIT version 1", "BYPASS version 2", "HIT version 2"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The descriptor of the unlinked file went with its replacement; the new one,
	// unused, is closed after about five seconds.
	held := func() []string {
		var open []string
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", in.cmd.Process.Pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", in.cmd.Process.Pid, fd.Name())); err == nil && strings.Contains(l, "/cache/") {
				open = append(open, l)
			}
		}
		return open
	}
	if h := held(); len(h) != 1 || strings.Contains(h[0], "deleted") {
		t.Errorf("cache files held open after the hits: %v, want the new one", h)
	}
	waitFor(t, "the idle descriptor closed", 15*time.Second, func() bool { return len(held()) == 0 })
}

// TestCacheStaleExtensionsAgainstNginx: Cache-Control's stale-while-revalidate
// lets an expired entry stand in while it is fetched anew (in the background with
// proxy_cache_background_update) and stale-if-error for an upstream's error or
// 5xx, without proxy_cache_use_stale; past their seconds, or without them, the
// error goes to the client. Compared with nginx.
func TestCacheStaleExtensionsAgainstNginx(t *testing.T) {
	conf := func(addr, up, down string) string {
		return fmt.Sprintf(`
    proxy_cache_path cache keys_zone=z:1m;
    server {
        listen %s;
        add_header X-Cache $upstream_cache_status always;
        proxy_cache z;
        proxy_cache_key $uri;
        location / { proxy_pass http://%s; proxy_cache_background_update on; }
        location /fg/ { proxy_pass http://%s; }
        location /down/ { proxy_pass http://%s; proxy_cache_key /sie; }
        location /down2/ { proxy_pass http://%s; proxy_cache_key /plain; }
    }
`, addr, up, up, down, down)
	}
	run := func(start func(addr, cfg string)) []string {
		up, answered := countingBackend(t, func(w http.ResponseWriter, p string, n int) {
			cc := map[string]string{"/swr": "max-age=1, stale-while-revalidate=30", "/fg/swr": "max-age=1, stale-while-revalidate=30",
				"/sie": "max-age=1, stale-if-error=30", "/plain": "max-age=1", "/short": "max-age=1, stale-if-error=1"}[p]
			status := 200
			if n > 1 {
				if strings.HasSuffix(p, "swr") {
					time.Sleep(time.Second)
				} else {
					status, cc = 500, ""
				}
			}
			if cc != "" {
				w.Header().Set("Cache-Control", cc)
			}
			w.WriteHeader(status)
			fmt.Fprintf(w, "%s version %d", p, n)
		})
		counts := func(p string) int {
			_, ended := answered(p)
			return ended
		}
		addr := addrFor(t)
		start(addr, conf(addr, up.Addr, addrFor(t)))
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		get := func(p, key string) string {
			resp, err := c.Get("http://" + addr + p)
			if err != nil {
				t.Fatalf("GET %s: %v", p, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = serverSignature.ReplaceAll(body, []byte("SERVER"))
			if resp.StatusCode >= 500 {
				body = nil // error pages differ
			}
			return fmt.Sprintf("GET %s: %d %s %q (upstream answers so far: %d)", p, resp.StatusCode, resp.Header.Get("X-Cache"), body, counts(key))
		}
		var out []string
		for _, p := range []string{"/swr", "/fg/swr", "/sie", "/plain", "/short"} {
			out = append(out, get(p, p))
		}
		time.Sleep(2100 * time.Millisecond) // all expired; /short's stale-if-error=1 is over
		out = append(out,
			get("/swr", "/swr"), get("/swr", "/swr"), // STALE at once with a background update, then UPDATING
			get("/fg/swr", "/fg/swr"),                   // without background update: the request itself fetches it
			get("/sie", "/sie"), get("/down/x", "/sie"), // a 500 and a refused connection: STALE
			get("/plain", "/plain"), get("/down2/x", "/plain"), get("/short", "/short"), // no stale: the error
		)
		for deadline := time.Now().Add(10 * time.Second); counts("/swr") < 2 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		out = append(out, get("/swr", "/swr"))
		return out
	}
	ours := run(func(addr, cfg string) { startHTTP(t, cfg, addr) })
	theirs := run(func(addr, cfg string) { startNginx(t, cfg, addr) })
	compareSeries(t, ours, theirs)
}

// countingBackend is an upstream whose answer is respond's for the path and the
// number of its request (1 for the first); counts reports how many requests of
// a path began and how many were answered.
func countingBackend(t *testing.T, respond func(w http.ResponseWriter, p string, n int)) (up *backend, counts func(p string) (begun, ended int)) {
	var mu sync.Mutex
	began, answered := map[string]int{}, map[string]int{}
	up = newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		mu.Lock()
		began[p]++
		n := began[p]
		mu.Unlock()
		defer func() {
			mu.Lock()
			answered[p]++
			mu.Unlock()
		}()
		respond(w, p, n)
	})
	return up, func(p string) (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return began[p], answered[p]
	}
}

// TestCacheHitSendfileByLocation: a hit's body goes out as the location's
// sendfile says, as in nginx (ngx_http_update_location_config sets the request's
// c->sendfile): with the default "sendfile off" it is read with pread and written,
// 32 KiB at a time (nginx 1.22, strace: 32 pread64 and 32 writev for a 1 MiB hit),
// with "sendfile on" the kernel sends it. Seen in /proc/PID/io's syscr, which
// counts a read or pread, or a sendfile, as one call each: 1 MiB read needs at
// least 16 calls of at most 64 KiB, one sendfile a few. The hit in the "on"
// location comes first on the same connection: a later hit does not inherit it.
func TestCacheHitSendfileByLocation(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
	addr := addrFor(t)
	in := startHTTP(t, fmt.Sprintf(`
    proxy_cache_path cache keys_zone=z:1m;
    server {
        listen %s;
        add_header X-Cache $upstream_cache_status always;
        location /on/ { proxy_pass http://%s; proxy_cache z; proxy_cache_valid 200 1h; sendfile on; }
        location /off/ { proxy_pass http://%s; proxy_cache z; proxy_cache_valid 200 1h; }
    }
`, addr, up.Addr, up.Addr), addr)
	syscr := func() int {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", in.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^syscr: (\d+)$`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("no syscr in /proc/PID/io:\n%s", data)
		}
		n := 0
		fmt.Sscan(string(m[1]), &n)
		return n
	}
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) int { // read calls of the instance for the response
		before := syscr()
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != body {
			t.Fatalf("%s: %d bytes, want the 1 MiB body", path, len(got))
		}
		return syscr() - before
	}
	get("/on/a") // stored
	get("/off/a")
	on, off := get("/on/a"), get("/off/a")
	if off < 16 || off > 32+8 {
		t.Errorf("hit in the sendfile-off location: %d read calls, want 16 to 40 (pread, not sendfile, of 32 KiB as nginx)", off)
	}
	if on >= 16 {
		t.Errorf("hit in the sendfile-on location: %d read calls, want fewer than 16 (sendfile)", on)
	}
	t.Logf("read calls per 1 MiB hit: sendfile on %d, off %d", on, off)
}

// TestCacheHitHeadWithBodyLikeNginx: a cache hit read with pread (sendfile off)
// sends its head with the body's first bytes, one TCP segment for a 20 KiB
// entry, as nginx's writev of its header and first output buffer does; the head
// used to go out on its own first. Also behind a PROXY protocol header.
func TestCacheHitHeadWithBodyLikeNginx(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 20<<10/16)
	up := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
	conf := func(addr, pp string) string {
		return fmt.Sprintf(`
    proxy_cache_path cache keys_zone=z:1m;
    server {
        listen %s;
        listen %s proxy_protocol;
        location / { proxy_pass http://%s; proxy_cache z; proxy_cache_valid 200 1h; }
    }
`, addr, pp, up.Addr)
	}
	ours, oursPP, theirs, theirsPP := addrFor(t), addrFor(t), addrFor(t), addrFor(t)
	startHTTP(t, conf(ours, oursPP), ours, oursPP)
	startNginx(t, conf(theirs, theirsPP), theirs, theirsPP)
	const preamble = "PROXY TCP4 192.0.2.1 127.0.0.1 5000 80\r\n"
	for _, server := range []struct{ name, addr, preamble string }{
		{"numaproxy", ours, ""}, {"nginx", theirs, ""},
		{"numaproxy proxy_protocol", oursPP, preamble}, {"nginx proxy_protocol", theirsPP, preamble},
	} {
		c, err := net.Dial("tcp", server.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, server.preamble); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		var segs []uint32
		for i := range 3 { // stored, then two hits
			before := dataSegsIn(t, c)
			if _, err := io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(got) != body {
				t.Fatalf("%s, request %d: %d bytes (%v), want the 20 KiB body", server.name, i+1, len(got), err)
			}
			segs = append(segs, dataSegsIn(t, c)-before)
		}
		if segs[1] != 1 || segs[2] != 1 {
			t.Errorf("%s: segments with data per response %v, want 1 for each hit", server.name, segs)
		}
	}
}

// dataSegsIn is the number of TCP segments with data c received.
func dataSegsIn(t *testing.T, c net.Conn) uint32 {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	return info.Data_segs_in
}
