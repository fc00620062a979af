package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestErrorPageVariables: error_page's target may hold variables, evaluated when
// the error comes (nginx's complex value): what it gives is a URI (arguments split
// at "?"), an @name or else a URL to redirect to; $status is the error's, or the
// "=code" one ("=" alone: 000). numaproxy and nginx on the same configuration,
// files and requests. Before, the target was taken literally ("/errors/$status.html"
// was looked up as is) and one starting with a variable was refused.
func TestErrorPageVariables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"errors/404.html": "page 404\n", "errors/403.html": "page 403\n", "s/a.txt": "a\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o755)
	targets, _ := startBoth(t, func() *recUpstream { return newRecUpstream(t, "tcp", statusAnswer) },
		func(listen string, up *recUpstream) string {
			return `
  server {
    listen ` + listen + `;
    root ` + dir + `;
    location /s/ { error_page 404 /errors/$status.html; }
    location /errors/ { internal; }
    location /ret { return 404; error_page 404 /errors/$status.html; }
    location /over { return 404; error_page 404 =200 /e/$status?from=$uri&q=$arg_q; }
    location /eq { return 404; error_page 404 = /e/$status; }
    location /e/ { return 200 "e uri=$uri args=$args status=$status\n"; }
    location /url { return 404; error_page 404 https://$host$request_uri; }
    location /url301 { return 404; error_page 404 =301 http://$host/moved?u=$uri; }
    location /rel { return 404; error_page 404 $arg_to; }
    location /named { set $t @fb; return 403; error_page 403 $t; }
    location /setv { set $t /errors/403.html; return 403; error_page 403 $t; }
    location @fb { return 200 "fallback $uri $status\n"; }
    location /plain { return 200 "plain $status\n"; }
    location /lit { return 404; error_page 404 /e/literal; }
    location /litrel { return 404; error_page 404 =301 moved.html; }
    location /ie/ { proxy_pass http://` + up.Addr + `; proxy_intercept_errors on; error_page 404 502 /e/$status-$upstream_status; }
  }`
		})
	paths := []string{"/s/a.txt", "/s/missing", "/ret", "/over?q=7", "/eq", "/url?x=1", "/url301", "/rel?to=elsewhere", "/rel?to=/e/x%3Fy",
		"/named", "/setv", "/ie/s404", "/ie/s200", "/plain", "/lit", "/litrel"}
	var obs [2][]string
	for i, tg := range targets {
		for _, p := range paths {
			resp, body := rawExchange(t, tg.addr, "GET", "GET "+p+" HTTP/1.1\r\nHost: example.org\r\n\r\n")
			obs[i] = append(obs[i], fmt.Sprintf("%s: %d %q Location=%q Content-Type=%q", p, resp.StatusCode, norm(body),
				resp.Header.Get("Location"), resp.Header.Get("Content-Type")))
		}
		resp, body := rawExchange(t, tg.addr, "HEAD", "HEAD /ret HTTP/1.1\r\nHost: example.org\r\n\r\n")
		obs[i] = append(obs[i], fmt.Sprintf("HEAD /ret: %d %q Content-Length=%q", resp.StatusCode, body, resp.Header.Get("Content-Length")))
		resp, body = rawExchange(t, tg.addr, "POST", "POST /over HTTP/1.1\r\nHost: example.org\r\nContent-Length: 3\r\n\r\nabc")
		obs[i] = append(obs[i], fmt.Sprintf("POST /over: %d %q", resp.StatusCode, body))
	}
	sameObservations(t, "error_page with variables", obs[0], obs[1])
	for i, want := range map[int]string{
		1: `/s/missing: 404 "page 404\n"`,
		3: `/over?q=7: 200 "e uri=/e/200 args=from=/over&q=7 status=200\n"`,
		5: `/url?x=1: 302 `,
		9: `/named: 403 "fallback /named 403\n"`,
	} {
		if len(obs[0]) <= i || len(obs[0][i]) < len(want) || obs[0][i][:len(want)] != want {
			t.Errorf("numaproxy: %q, want it to start with %q", obs[0][i], want)
		}
	}
}
