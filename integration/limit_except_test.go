package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLimitExceptAgainstNginx: limit_except's block (allow/deny, auth_basic,
// proxy_pass) applies to the methods it does not list, GET bringing HEAD along;
// nested locations, a named location and an if inside the location; what the
// upstream saw, compared with nginx on the same http block.
func TestLimitExceptAgainstNginx(t *testing.T) {
	file, _ := htpasswdFixture(t)
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "b %s %s", r.Method, r.RequestURI) })
	b2 := newBackend(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "b2 %s %s", r.Method, r.RequestURI) })
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "file.txt"), []byte("a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pass := "proxy_pass http://" + b.Addr + ";"
	conf := func(a []string) string {
		return `
set_real_ip_from 127.0.0.1;
server { listen ` + a[0] + `; root ` + root + `;
	location /get { limit_except GET { deny all; } ` + pass + ` }
	location /head { limit_except HEAD { deny all; } ` + pass + ` }
	location /getpost { limit_except get Post { allow 10.0.0.0/8; deny all; } ` + pass + ` }
	location /outer { deny 10.0.0.1; limit_except GET { allow 10.0.0.0/8; deny all; } ` + pass + ` }
	location /auth { limit_except GET HEAD OPTIONS { auth_basic "writers"; auth_basic_user_file ` + file + `; } ` + pass + ` }
	location /nested { limit_except GET { deny all; } ` + pass + `
		location /nested/in { ` + pass + ` }
		location /nested/own { limit_except PUT { deny all; } ` + pass + ` } }
	location /proxied { limit_except GET { proxy_pass http://` + b2.Addr + `; } ` + pass + ` }
	location /inherits { proxy_pass http://` + b2.Addr + `; limit_except GET { allow 10.0.0.0/8; deny all; } }
	location /file.txt { limit_except GET { deny all; } }
	location /toname { try_files /nothing @named; }
	location @named { limit_except GET { deny all; } ` + pass + ` }
	location /uri/ { limit_except GET { allow 10.0.0.0/8; deny all; } proxy_pass http://` + b.Addr + `/up/; }
	location /if { limit_except GET { deny all; } if ($arg_x) { ` + pass + ` } ` + pass + ` }
}`
	}
	paths := []string{"/get", "/head", "/getpost", "/outer", "/auth", "/nested", "/nested/in", "/nested/own",
		"/proxied", "/inherits", "/file.txt", "/toname", "/if?x=1", "/if", "/uri/a?b=c"}
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "PROPFIND", "TRACE", "FOO"}
	froms := []string{"", "X-Real-IP: 10.0.0.1\r\n", "X-Real-IP: 10.0.0.2\r\n", basicAuth("plain", "pw-plain")}
	differential(t, 1, conf, func(name string, addrs []string) map[string]string {
		out := map[string]string{}
		for _, p := range paths {
			for _, m := range methods {
				for _, f := range froms {
					body := ""
					if m == "POST" || m == "PUT" || m == "PATCH" {
						body = "Content-Length: 0\r\n"
					}
					raw := exchangeRaw(t, addrs[0], m+" "+p+" HTTP/1.0\r\nHost: x\r\n"+f+body+"\r\n")
					out[m+" "+p+" "+strings.TrimSpace(f)] = answer(raw, "WWW-Authenticate", "Allow")
				}
			}
		}
		all := fmt.Sprint(out)
		if n := strings.Count(all, "403 Forbidden"); n < 50 {
			t.Errorf("%s: %d of %d requests forbidden: the table tests little", name, n, len(out))
		}
		if !strings.Contains(all, "b2 POST /proxied") || !strings.Contains(all, "401 Unauthorized") {
			t.Errorf("%s: the block's proxy_pass or auth_basic was never used", name)
		}
		return out
	})
}
