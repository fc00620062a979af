package integration

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUpstreamHeadShapesLikeNginx: upstream response heads in the shapes a read can
// cut them (whole with the body, split inside a line, after an interim response in
// the same or an earlier read, near proxy_buffer_size), and a keep-alive connection
// whose second response lacks the first's fields: the client gets what nginx's gets.
func TestUpstreamHeadShapesLikeNginx(t *testing.T) {
	big := strings.Repeat("v", 3500)
	up := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			head, err := readHead(br)
			if err != nil {
				return
			}
			path := strings.Fields(head)[1]
			var parts []string
			switch path {
			case "/whole":
				parts = []string{"HTTP/1.1 200 OK\r\nLocation: /first\r\nX-A: 1\r\nContent-Length: 5\r\n\r\nhello"}
			case "/split":
				parts = []string{"HTTP/1.1 200 OK\r\nX-Sp", "lit: yes\r\nContent-Length: 5\r\n\r\nhe", "llo"}
			case "/interim-same":
				parts = []string{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-I: same\r\nContent-Length: 2\r\n\r\nok"}
			case "/interim-apart":
				parts = []string{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", "HTTP/1.1 201 Created\r\nX-I: apart\r\nContent-Length: 2\r\n\r\nok"}
			case "/big":
				parts = []string{"HTTP/1.1 200 OK\r\nX-Big: " + big + "\r\nContent-Length: 3\r\n\r\nbig"}
			case "/second":
				parts = []string{"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nsec\r\n0\r\n\r\n"}
			}
			for i, p := range parts {
				if i > 0 {
					time.Sleep(30 * time.Millisecond)
				}
				if _, err := io.WriteString(c, p); err != nil {
					return
				}
			}
		}
	})
	body := `
  server {
    listen %[1]s;
    location / { proxy_pass http://%[2]s; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }`
	srvs := bothServers(t, strings.Replace(body, "http://%[2]s", "http://"+up.Addr, 1), "")
	// nginx 1.22 takes an upstream's 1xx for the response: numaproxy alone.
	for _, tc := range []struct{ path, want string }{
		{"/interim-same", "HTTP/1.1 200 OK\r\n"}, {"/interim-apart", "HTTP/1.1 201 Created\r\n"},
	} {
		raw, err := roundTripRaw(t, srvs[0].addr, "GET "+tc.path+" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
		if err != nil || !strings.HasPrefix(raw, tc.want) || !strings.HasSuffix(raw, "\r\n\r\nok") {
			t.Errorf("%s: %v %q", tc.path, err, raw)
		}
	}
	mask := regexp.MustCompile(`(?m)^(Server|Date): .*\r\n`)
	for _, reqs := range [][]string{{"/whole"}, {"/split"}, {"/big"}, {"/whole", "/second", "/whole", "/second"}} {
		var got [2]string
		for i, s := range srvs {
			c := dial(t, s.addr)
			br := bufio.NewReader(c)
			var sb strings.Builder
			for _, p := range reqs {
				io.WriteString(c, "GET "+p+" HTTP/1.1\r\nHost: t\r\n\r\n")
				resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
				if err != nil {
					t.Fatalf("%s %v: %v", s.name, reqs, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				resp.Header.Del("Server")
				resp.Header.Del("Date")
				var hb strings.Builder
				resp.Header.Write(&hb)
				sb.WriteString(resp.Status + "\n" + mask.ReplaceAllString(hb.String(), "") + string(b) + "\n" + strings.Join(resp.TransferEncoding, ",") + "\n")
				if err != nil {
					sb.WriteString(err.Error())
				}
			}
			c.Close()
			got[i] = sb.String()
		}
		if got[0] != got[1] {
			t.Errorf("%v:\nnumaproxy %q\nnginx     %q", reqs, got[0], got[1])
		}
	}
}
