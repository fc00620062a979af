package integration

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestCacheConvertedHeadRetryLikeNginx: a HEAD sent upstream as GET for the cache
// (proxy_cache_convert_head, on by default) that passes to a next server
// (proxy_next_upstream) gets a GET's response there too: its body is read and
// cached. The next try's response was parsed as a HEAD's, without a body: the
// cache kept the 200 with an empty body, and every GET it served after was
// "Content-Length: 0" (nginx: the 10 bytes). The same after an interim response
// (103) to the converted HEAD, on the first try.
func TestCacheConvertedHeadRetryLikeNginx(t *testing.T) {
	bad := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readHead(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbad")
	})
	good := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			h, err := readHead(br)
			if err != nil {
				return
			}
			hints := ""
			if strings.Fields(h)[1] == "/hints" {
				hints = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
			}
			io.WriteString(c, hints+"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nCache-Control: max-age=60\r\nX-Method: "+
				strings.Fields(h)[0]+"\r\n\r\n0123456789")
		}
	})
	body := `
  proxy_cache_path cache keys_zone=z:1m;
  upstream u { server ` + bad.Addr + `; server ` + good.Addr + `; }
  server {
    listen %[1]s;
    location / {
      proxy_pass http://u; proxy_cache z; proxy_next_upstream error timeout http_502;
      proxy_http_version 1.1; proxy_set_header Connection "";
    }
    location /hints { proxy_pass http://` + good.Addr + `; proxy_cache z; }
  }`
	srvs := bothServers(t, body, "")
	for _, s := range srvs {
		checkConvertedHead(t, s, "/x")
		if s.name == "numaproxy" {
			// After an interim response (nginx 1.22 takes it for the response).
			checkConvertedHead(t, s, "/hints")
		}
	}
}

func checkConvertedHead(t *testing.T, s server, path string) {
	t.Helper()
	if _, err := roundTripRaw(t, s.addr, "HEAD "+path+" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatalf("%s %s: HEAD: %v", s.name, path, err)
	}
	c := dial(t, s.addr)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil || !strings.Contains(string(b), "X-Method: GET\r\n") || !strings.HasSuffix(string(b), "\r\n\r\n0123456789") {
		t.Errorf("%s %s: the GET after the HEAD: %v %q", s.name, path, err, b)
	}
}
