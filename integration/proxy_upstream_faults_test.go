package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallMidBody answers each request head with a 200 of Content-Length 1000 and 100
// body bytes, then sends nothing more until the proxy gives up.
func stallMidBody(t *testing.T) *rawUpstream {
	return newRawUpstream(t, func(c net.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"+strings.Repeat("x", 100))
		io.Copy(io.Discard, c) // until the proxy closes
	})
}

// TestProxyReadTimeoutMidBody: an upstream that stalls in the middle of a body hits
// proxy_read_timeout; the client gets the head and the bytes that came, then a close
// (a truncated body must not look whole), and the proxy goes on serving. nginx does the
// same on the same configuration. Before the fix every such request logged a recovered
// panic (nil pointer in client.isHEAD via exchange.dropConn <- exchange.abort <-
// client.onClose <- client.close <- exchange.onTimeout).
func TestProxyReadTimeoutMidBody(t *testing.T) {
	t.Parallel()
	stall := stallMidBody(t)
	live := newBackend(t, nil)
	addr, ngAddr := addrFor(t), addrFor(t)
	body := func(listen string) string {
		return `
  server {
    listen ` + listen + `;
    proxy_read_timeout 1s;
    location /stall { proxy_pass http://` + stall.Addr + `; proxy_http_version 1.1; }
    location /live { proxy_pass http://` + live.Addr + `; }
  }`
	}
	in := startHTTP(t, body(addr), addr)
	ng := startNginx(t, body(ngAddr), ngAddr)

	for _, target := range []struct{ name, addr string }{{"numaproxy", addr}, {"nginx", ngAddr}} {
		t.Run(target.name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- truncatedThenClosed(target.addr)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			// Still serving, on a new connection and on a kept-alive one.
			cl := newClient(t, target.addr)
			for i := 0; i < 2; i++ {
				cl.send("GET /live HTTP/1.1\r\nHost: a\r\n\r\n")
				if resp, got := cl.read("GET"); resp.StatusCode != 200 || got != "ok" {
					t.Fatalf("after the timeouts: %d %q", resp.StatusCode, got)
				}
			}
		})
	}
	in.waitLog("upstream timed out while reading upstream")
	if log := ng.errorLog(); !strings.Contains(log, "upstream timed out") {
		t.Errorf("nginx logged no upstream timeout:\n%s", log)
	}
}

// truncatedThenClosed asks for /stall on a keep-alive connection and checks that the
// response is a 200 with at most the 100 bytes that came, followed by the connection
// closing, not before the timeout. numaproxy passes the 100 bytes on as they come;
// nginx 1.22 (proxy_buffering on) keeps them in its buffer and sends none.
func truncatedThenClosed(addr string) error {
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	start := time.Now()
	if _, err := io.WriteString(c, "GET /stall HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || resp.ContentLength != 1000 {
		return fmt.Errorf("want a 200 of length 1000, got %s of %d", resp.Status, resp.ContentLength)
	}
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) > 100 {
		return fmt.Errorf("the truncated body (%d bytes) was not ended by a close: %v", len(got), err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		return fmt.Errorf("closed after %v, before proxy_read_timeout 1s", d)
	}
	return nil
}
