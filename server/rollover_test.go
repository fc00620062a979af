package server

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRolloverUnderLoad: reloads that change worker_processes and numa_domains start
// new loops on the same addresses and retire the old ones while clients keep
// connecting and reusing keep-alive connections; no request fails.
func TestRolloverUnderLoad(t *testing.T) {
	_, _, numaLine := domainCPUs(t)
	body := `events { }
http { server { listen PORT; location / { return 200 "$worker_cpu"; } } }`
	s, addr, _ := startServer(t, "worker_processes 1;\n"+body)
	port, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	withPort := func(src string) string { return strings.ReplaceAll(src, "PORT", strconv.Itoa(port)) }

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	for i := 0; i < 3; i++ { // a new connection per request
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := get(addr); err != nil {
					fail(err)
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	for i := 0; i < 3; i++ { // keep-alive, with net/http's client: like real clients it
		// retries an idempotent request whose idle connection the server closed.
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get("http://" + addr + "/")
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err != nil {
					fail(err)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	steps := []struct {
		src   string
		loops int
	}{
		{"worker_processes 2;\n" + body, 2},
		{numaLine + "\nworker_processes 2;\n" + body, 2},
		{"worker_processes 1;\n" + body, 1},
	}
	for i, step := range steps {
		before := ok.Load()
		cfg, snap := loadSnapshot(t, withPort(step.src))
		if err := s.Reload(cfg, snap); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if len(s.Loops()) != step.loops {
			t.Fatalf("step %d: %d loops, want %d", i, len(s.Loops()), step.loops)
		}
		deadline := time.Now().Add(10 * time.Second)
		for ok.Load() < before+200 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("step %d (%d loops, %s): %d requests answered so far", i, step.loops, s.Plan(), ok.Load())
	}
	close(stop)
	wg.Wait()
	s.rolling.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed across the rollovers, first: %v", failed.Load(), firstErr.Load())
	}
	if ok.Load() < 600 {
		t.Fatalf("only %d requests answered", ok.Load())
	}
}
