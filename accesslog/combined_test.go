package accesslog

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/upstream"
)

// TestCombinedAsOps: appendCombined writes what the format's ops write, byte for
// byte, for requests with and without the fields it reads, their names in any
// case and repeated, values to escape, a user from Authorization, and statuses
// and body sizes of several handlers; and a log_format is formatted that way
// only when it is combined's text with default escaping.
func TestCombinedAsOps(t *testing.T) {
	up := looptest.Upstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
	addr := looptest.Addr(t)
	reg := conf.MustRegistry(upstream.Module, httpcore.Module, rewrite.Module, proxy.Module, Module, onLogModule)
	cfg, _ := looptest.Load(t, reg, `events {}
http {
  log_format mine '$remote_addr - $remote_user [$time_local] '
                  '"$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"';
  log_format json escape=json '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"';
  log_format other '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" ';
  log_format swapped '$remote_addr - $remote_user [$time_local] "$request" $status $bytes_sent "$http_referer" "$http_user_agent"';
  log_format main '$remote_addr - $remote_user [$time_local] "$request" '
                  '$status $body_bytes_sent "$http_referer" '
                  '"$http_user_agent" "$http_x_forwarded_for"';
  log_format uax '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent_x"';
  log_format short '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent';
  upstream app { server `+up+`; keepalive 8; }
  server {
    listen `+addr+`;
    keepalive_requests 1000000;
    access_log /dev/null;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /r { return 201 "created\n"; }
    location /nf { return 404; }
    location /mine { access_log /dev/null mine; access_log /dev/null json; access_log /dev/null other;
                     access_log /dev/null swapped; access_log /dev/null main; access_log /dev/null uax;
                     access_log /dev/null short; return 200; }
  }
}
`)
	looptest.Start(t, cfg, nil, addr)

	// Each log's format: its line as formatted, and as its ops alone format it.
	type line struct {
		f             *Format
		combined, ops []byte
	}
	results := make(chan []line, 1)
	f := func(r *httpcore.Request) {
		lc := r.LocConf(self).(*LocConf)
		ls := r.Worker().State(key).(*loopState)
		var res []line
		for _, lg := range lc.Logs {
			l := line{f: lg.Format}
			if lg.Format.combined {
				l.combined = lg.Format.appendLine(ls, nil, r)
				ops := *lg.Format
				ops.combined = false
				l.ops = ops.appendLine(ls, nil, r)
			}
			res = append(res, l)
		}
		results <- res
	}
	onLog.Store(&f)
	defer onLog.Store(nil)

	b64 := base64.StdEncoding.EncodeToString
	reqs := []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /r?x=1 HTTP/1.1\r\nHost: a\r\nuser-AGENT: curl/8.0\r\nREFERER: http://a/b?c=d\r\n\r\n",
		"GET /r HTTP/1.1\r\nHost: a\r\nUser-Agent: first\r\nUser-Agent: second\r\nReferer: one\r\nReferer: two\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: q\"uo\\te \xc3\xa9\xff end\r\nReferer: \xe2\x82\xac\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: tab\tin it\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: del\x7f\r\n\r\n",
		"GET /r HTTP/1.1\r\nHost: a\r\nAuthorization: Basic " + b64([]byte("alice:secret")) + "\r\n\r\n",
		"GET /r HTTP/1.1\r\nHost: a\r\nauthorization: basic " + b64([]byte("al\"i\\ce\xff:pw")) + "\r\n\r\n",
		"GET /r HTTP/1.1\r\nHost: a\r\nAuthorization: Basic !!!\r\n\r\n",
		"GET /r HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer abc\r\nAuthorization: Basic " + b64([]byte("bob:x")) + "\r\n\r\n",
		"GET /r HTTP/1.1\r\nHost: a\r\nUser-Agent: " + strings.Repeat("long agent ", 300) + "\r\n\r\n",
		"GET /a%22b\"c?\xe9=1 HTTP/1.1\r\nHost: a\r\nX-User-Agent: not this\r\nUser_Agent: nor this\r\n\r\n",
		"GET /nothing/here HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nUser-Agent: \r\n\r\n",
		"GET /nf HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /mine HTTP/1.1\r\nHost: a\r\nReferer:\r\nUser-Agent:\r\nX-Forwarded-For:\r\n\r\n",
		"GET /mine HTTP/1.1\r\nHost: a\r\nUser-Agent: mine\r\n\r\n",
		"GET /mine HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.1\r\nx-forwarded-for: 10.0.0.2\r\nReferer: \"r\"\r\n\r\n",
	}
	var last []line
	for _, req := range reqs {
		looptest.Dial(t, addr).RoundTrip(t, []byte(req))
		last = <-results
		for _, l := range last {
			if !bytes.Equal(l.combined, l.ops) {
				t.Errorf("%.40q, log_format %s:\ncombined %q\nops      %q", req, l.f.Name, l.combined, l.ops)
			}
		}
		if !last[0].f.combined {
			t.Fatalf("%.40q: not formatted as combined", req)
		}
	}
	want := map[string]bool{"mine": true, "json": false, "other": true, "swapped": false, "main": true, "uax": false, "short": false}
	for _, l := range last {
		if l.f.combined != want[l.f.Name] {
			t.Errorf("log_format %s: combined %v, want %v", l.f.Name, l.f.combined, want[l.f.Name])
		}
	}
	if len(last) != len(want) {
		t.Errorf("%d logs, want %d", len(last), len(want))
	}
}

func TestAppendUint(t *testing.T) {
	for _, n := range []uint64{0, 1, 9, 10, 99, 100, 101, 999, 1000, 65535, 1 << 32, 1<<64 - 1} {
		if got, want := appendUint([]byte("x"), n), strconv.AppendUint([]byte("x"), n, 10); !bytes.Equal(got, want) {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}
