package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
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
		case strings.HasSuffix(p, "/404"):
			status = 404
		case strings.HasSuffix(p, "/500"):
			status = 500
		case strings.HasSuffix(p, "/slow"):
			time.Sleep(300 * time.Millisecond)
		}
		h.Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		io.WriteString(w, "body of "+p)
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
    }
`, addr, up, up, up, up, up)
}

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
		out = append(out, fmt.Sprintf("%s %s: %d %s %q upstream=%d", s.method, s.path, resp.StatusCode, resp.Header.Get("X-Cache"), body, count(strings.SplitN(s.path, "?", 2)[0])))
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
		{method: "GET", path: "/q?x=1"}, {method: "GET", path: "/q?x=2"}, {method: "GET", path: "/q?x=1"},
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
