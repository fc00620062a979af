package integration

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestProxyNoFdLeak runs bursts of error cases in parallel and checks that the
// process's open files come back to what they were.
func TestProxyNoFdLeak(t *testing.T) {
	t.Parallel()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Length", strconv.Itoa(16<<20))
			chunk := make([]byte, 32<<10)
			for i := 0; i < 512; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		io.WriteString(w, "ok")
	})
	silent := silentUpstream(t)
	short := rawReply(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", false)
	up := newEchoUpgrade(t)
	addr := addrFor(t)
	in := startHTTP(t, `
  upstream ka { server `+be.Addr+`; keepalive 2; }
  upstream silent { server `+silent.Addr+` max_fails=0; }
  upstream short { server `+short.Addr+` max_fails=0; }
  server {
    listen `+addr+`;
    client_max_body_size 10;
    proxy_read_timeout 100ms;
    location / { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location /refused { proxy_pass http://`+addrFor(t)+`; }
    location /silent { proxy_pass http://silent; }
    location /short { proxy_pass http://short; }
    location /ws {
      proxy_pass http://`+up.Addr+`;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
    }
  }`, addr)

	cases := []func(t *testing.T){
		func(t *testing.T) {
			roundTripRaw(t, addr, "GET /refused HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		},
		func(t *testing.T) {
			roundTripRaw(t, addr, "GET /silent HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		},
		func(t *testing.T) { roundTripRaw(t, addr, "GET /short HTTP/1.1\r\nHost: a\r\n\r\n") },
		func(t *testing.T) {
			roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
		},
		func(t *testing.T) {
			roundTripRaw(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n01234567890")
		},
		func(t *testing.T) { roundTripRaw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") },
		func(t *testing.T) {
			// Gone before the answer.
			c := dial(t, addr)
			io.WriteString(c, "GET /silent HTTP/1.1\r\nHost: a\r\n\r\n")
			c.Close()
		},
		func(t *testing.T) {
			// Gone mid-response.
			c := dial(t, addr)
			io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
			readHead(bufio.NewReader(c))
			c.Close()
		},
		func(t *testing.T) {
			// A tunnel the client closes.
			c := dial(t, addr)
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n")
			readHead(bufio.NewReader(c))
			c.Close()
		},
		func(t *testing.T) {
			// A half-sent head.
			c := dial(t, addr)
			io.WriteString(c, "GET / HTTP/1.1\r\nHo")
			c.Close()
		},
	}
	burst := func(rounds int) {
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					for _, f := range cases {
						f(t)
					}
				}
			}()
		}
		wg.Wait()
	}
	burst(1)
	settle := func() int {
		// Idle connections (both sides) and tunnels are gone once counts stop moving.
		prev, stable := -1, 0
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && stable < 5; {
			n := in.fdCount()
			if n == prev {
				stable++
			} else {
				prev, stable = n, 0
			}
			time.Sleep(20 * time.Millisecond)
		}
		return prev
	}
	base := settle()
	burst(10)
	var got int
	waitFor(t, "open files back to the baseline", 10*time.Second, func() bool {
		got = in.fdCount()
		return got <= base
	})
	t.Logf("open files: %d before and after %d error cases", base, 4*10*len(cases))

	// And it still serves.
	c := dial(t, addr)
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	raw, err := readToEOF(c)
	if err != nil || len(raw) < 12 || raw[:12] != "HTTP/1.1 200" {
		t.Fatalf("%q %v", raw, err)
	}
}
