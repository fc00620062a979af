package rewrite

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/upstream"
	"github.com/numaproxy/numaproxy/varmap"
)

// reqLogicConf is the reqlogic shape of integration/bench (its template's map and
// /logic/ location): UP is the upstream, ADDR the server.
const reqLogicConf = `
  map $http_user_agent $is_bot {
    default 0;
    ~*(googlebot|bingbot|yandex|baiduspider) 1;
    ~*(crawler|spider|bot)/(\d+) 1;
  }
  upstream backend { server UP; keepalive 32; keepalive_requests 1000000000; }
  server {
    listen ADDR;
    keepalive_requests 1000000000;
    location /logic/ {
      set $route app;
      if ($is_bot) { return 403; }
      if ($route = maintenance) { return 503; }
      rewrite ^/logic/(\w+)/(\d+)$ /rl/$1/$2?id=$2 break;
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }`

const reqLogicUA = "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

// BenchmarkReqLogic is the reqlogic bench shape in process, through a real loop
// and a keep-alive upstream: "logic" through /logic/ (map, set, two ifs that do not
// fire, a rewrite that does), "baseline" the rewritten request through location /.
// The difference in cpu-ns/op is the request logic's cost.
func BenchmarkReqLogic(b *testing.B) {
	var seen []byte
	up := looptest.Serve(b, "\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", func(req []byte) {
		if seen == nil {
			seen = append([]byte{}, req...)
		}
	})
	addr := looptest.Addr(b)
	src := strings.NewReplacer("ADDR", addr, "UP", up).Replace(reqLogicConf)
	cfg, _ := looptest.Load(b, conf.MustRegistry(upstream.Module, httpcore.Module, Module, proxy.Module, varmap.Module),
		"events {}\nhttp {\n"+src+"\n}\n")
	looptest.Start(b, cfg, nil, addr)
	for _, c := range []struct{ name, uri string }{{"logic", "/logic/items/42"}, {"baseline", "/rl/items/42?id=42"}} {
		b.Run(c.name, func(b *testing.B) {
			k := looptest.Dial(b, addr)
			req := []byte("GET " + c.uri + " HTTP/1.1\r\nHost: " + addr + "\r\n" + reqLogicUA + "\r\n\r\n")
			for range 200 {
				if st := k.RoundTrip(b, req); st != 200 {
					b.Fatalf("status %d", st)
				}
			}
			if !strings.HasPrefix(string(seen), "GET /rl/items/42?id=42 ") {
				b.Fatalf("upstream saw %q", seen)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				k.RoundTrip(b, req)
			}
			// The process's CPU time (client and loop) per request.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func cpuTime() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
