package integration

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProxyVariables checks every variable of the issue in a return text, an
// add_header or a proxy_set_header.
func TestProxyVariables(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		io.WriteString(w, "0123456789")
	})
	addr := addrFor(t)
	host, port, _ := strings.Cut(addr, ":")
	startHTTP(t, `
  upstream app { server `+be.Addr+`; }
  server {
    listen `+addr+`;
    server_name vars.test alias.test;
    location /r {
      return 200 "host=$host|h=$http_x_custom_header|ra=$remote_addr|rp=$remote_port|sa=$server_addr|sp=$server_port|sn=$server_name|scheme=$scheme|request=$request|m=$request_method|ru=$request_uri|uri=$uri|args=$args|foo=$arg_foo|is=$is_args|cl=$content_length|ct=$content_type|conn=$connection|cr=$connection_requests|st=$status|ph=$proxy_host|";
    }
    location /t { return 200 "tl=$time_local|ti=$time_iso8601|ms=$msec|rt=$request_time|"; }
    location /p/ {
      proxy_pass http://app;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Proxy-Host $proxy_host;
      proxy_set_header X-Host $host;
      add_header X-Upstream-Addr $upstream_addr;
      add_header X-Upstream-Status $upstream_status;
      add_header X-Upstream-Time $upstream_response_time;
      add_header X-Status $status;
      add_header X-Body-Sent $body_bytes_sent;
      add_header X-Proxy-Host $proxy_host;
    }
  }`, addr)

	cl := newClient(t, addr)
	local := cl.c.LocalAddr().String()
	_, cport, _ := strings.Cut(local, ":")
	cl.send("POST /r/a%2Fb/../c?foo=bar&x=1 HTTP/1.1\r\nHost: Vars.Test:" + port + "\r\nX-Custom-Header: v1\r\nContent-Type: text/x\r\nContent-Length: 0\r\n\r\n")
	_, body := cl.read("POST")
	cl.send("GET /r HTTP/1.1\r\nHost: alias.test\r\n\r\n")
	_, body2 := cl.read("GET")
	// $uri is normalised as nginx's: decoded (%2F is a slash), dot segments removed.
	want := "host=vars.test|h=v1|ra=127.0.0.1|rp=" + cport + "|sa=" + host + "|sp=" + port + "|sn=vars.test|scheme=http|" +
		"request=POST /r/a%2Fb/../c?foo=bar&x=1 HTTP/1.1|m=POST|ru=/r/a%2Fb/../c?foo=bar&x=1|uri=/r/a/c|args=foo=bar&x=1|foo=bar|is=?|" +
		"cl=0|ct=text/x|conn=" // then $connection
	if !strings.HasPrefix(body, want) {
		t.Fatalf("got  %s\nwant %s...", body, want)
	}
	// $status in return's text is its code: nginx sets the status before it evaluates
	// the text (TestErrorPageVariables' /plain runs nginx on it).
	m := regexp.MustCompile(`\|conn=(\d+)\|cr=1\|st=200\|ph=\|$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("tail of %s", body)
	}
	if !strings.HasPrefix(body2, "host=alias.test|") || !strings.Contains(body2, "|sn=vars.test|") ||
		!strings.Contains(body2, "|is=|") || !strings.Contains(body2, "|args=|") || !strings.Contains(body2, "|conn="+m[1]+"|cr=2|") {
		t.Fatalf("second request: %s", body2)
	}
	// A new connection has another number.
	_, body3 := get(t, keepAliveClient(nil), "http://"+addr+"/r")
	if strings.Contains(body3, "|conn="+m[1]+"|") || !strings.Contains(body3, "|cr=1|") {
		t.Fatalf("new connection: %s", body3)
	}
	// Without Host (HTTP/1.0) $host is the server name.
	raw, _ := roundTripRaw(t, addr, "GET /r HTTP/1.0\r\n\r\n")
	if !strings.Contains(raw, "host=vars.test|") {
		t.Fatalf("no Host: %q", raw)
	}

	t.Run("time", func(t *testing.T) {
		before := time.Now()
		_, body := get(t, keepAliveClient(nil), "http://"+addr+"/t")
		m := regexp.MustCompile(`^tl=(\d\d/\w\w\w/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\|ti=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d)\|ms=(\d+\.\d{3})\|rt=(\d+\.\d{3})\|$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%q", body)
		}
		tl, err1 := time.Parse("02/Jan/2006:15:04:05 -0700", m[1])
		ti, err2 := time.Parse(time.RFC3339, m[2])
		ms, err3 := strconv.ParseFloat(m[3], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatal(err1, err2, err3)
		}
		for _, ts := range []time.Time{tl, ti, time.UnixMilli(int64(ms * 1000))} {
			if d := ts.Sub(before); d < -time.Second || d > 5*time.Second {
				t.Errorf("time %v is %v from now", ts, d)
			}
		}
		if rt, _ := strconv.ParseFloat(m[4], 64); rt > 1 {
			t.Errorf("request_time %v", rt)
		}
	})

	t.Run("upstream", func(t *testing.T) {
		resp, body := get(t, keepAliveClient(nil), "http://"+addr+"/p/x", "X-Forwarded-For", "203.0.113.7", "Host", "Front.test")
		h := resp.Header
		if resp.StatusCode != 201 || body != "0123456789" || h.Get("X-Upstream-Addr") != be.Addr || h.Get("X-Upstream-Status") != "201" ||
			h.Get("X-Status") != "201" || h.Get("X-Body-Sent") != "0" || h.Get("X-Proxy-Host") != "app" {
			t.Fatalf("%d %q %v", resp.StatusCode, body, h)
		}
		if ut, err := strconv.ParseFloat(h.Get("X-Upstream-Time"), 64); err != nil || ut > 1 || !regexp.MustCompile(`^\d+\.\d{3}$`).MatchString(h.Get("X-Upstream-Time")) {
			t.Fatalf("upstream_response_time %q", h.Get("X-Upstream-Time"))
		}
		s := be.last(t)
		if s.Header.Get("X-Forwarded-For") != "203.0.113.7, 127.0.0.1" || s.Header.Get("X-Proxy-Host") != "app" || s.Host != "app" || s.Header.Get("X-Host") != "front.test" {
			t.Fatalf("upstream saw %q %v", s.Host, s.Header)
		}
		get(t, keepAliveClient(nil), "http://"+addr+"/p/x")
		if s := be.last(t); s.Header.Get("X-Forwarded-For") != "127.0.0.1" {
			t.Fatalf("X-Forwarded-For without one from the client: %q", s.Header.Get("X-Forwarded-For"))
		}
	})
}
