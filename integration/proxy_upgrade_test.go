package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echoUpgrade is a raw upstream that answers an upgrade request with 101 and then
// echoes every byte; it records the request head and counts closed tunnels.
type echoUpgrade struct {
	*rawUpstream
	head   atomic.Value // string
	closed atomic.Int64
}

func newEchoUpgrade(t *testing.T) *echoUpgrade {
	e := &echoUpgrade{}
	e.rawUpstream = newRawUpstream(t, func(c net.Conn) {
		defer e.closed.Add(1)
		br := bufio.NewReader(c)
		head, err := readHead(br)
		if err != nil {
			return
		}
		e.head.Store(head)
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Up: 1\r\n\r\nhello")
		c.SetDeadline(time.Time{})
		io.Copy(c, br)
	})
	return e
}

func TestProxyUpgrade(t *testing.T) {
	t.Parallel()
	up := newEchoUpgrade(t)
	addr := addrFor(t)
	startHTTP(t, `
  server {
    listen `+addr+`;
    location /ws {
      proxy_pass http://`+up.Addr+`;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
    }
    location /idle {
      proxy_pass http://`+up.Addr+`;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_read_timeout 300ms;
    }
    location /plain { proxy_pass http://`+up.Addr+`; }
  }`, addr)
	upgrade := func(t *testing.T, path string) *client {
		cl := newClient(t, addr)
		cl.send("GET " + path + " HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: k\r\n\r\n")
		h := cl.head()
		if !strings.HasPrefix(h, "HTTP/1.1 101 ") || !strings.Contains(h, "\r\nUpgrade: websocket\r\n") ||
			!strings.Contains(h, "\r\nConnection: Upgrade\r\n") || !strings.Contains(h, "\r\nX-Up: 1\r\n") {
			t.Fatalf("101 head %q", h)
		}
		hello := make([]byte, 5)
		cl.c.SetReadDeadline(time.Now().Add(ioTimeout))
		if _, err := io.ReadFull(cl.br, hello); err != nil || string(hello) != "hello" {
			t.Fatalf("bytes after the 101: %q %v", hello, err)
		}
		return cl
	}

	t.Run("echo", func(t *testing.T) {
		cl := upgrade(t, "/ws")
		head, _ := up.head.Load().(string)
		if !strings.Contains(head, "\r\nUpgrade: websocket\r\n") || !strings.Contains(head, "\r\nConnection: upgrade\r\n") || !strings.Contains(head, "Sec-WebSocket-Key: k\r\n") {
			t.Fatalf("upstream head %q", head)
		}
		cl.send("ping")
		buf := make([]byte, 4)
		if _, err := io.ReadFull(cl.br, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo %q %v", buf, err)
		}
	})

	t.Run("large both ways", func(t *testing.T) {
		cl := upgrade(t, "/ws")
		data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstu\n"), 1<<20) // 32 MiB
		go func() {
			cl.c.SetWriteDeadline(time.Now().Add(20 * time.Second))
			cl.c.Write(data)
		}()
		h := sha256.New()
		cl.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if n, err := io.CopyN(h, cl.br, int64(len(data))); err != nil {
			t.Fatalf("echoed %d of %d bytes: %v", n, len(data), err)
		}
		if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatal("the echoed bytes differ")
		}
	})

	t.Run("backpressure", func(t *testing.T) {
		// The client writes and never reads: the tunnel must stop taking its bytes
		// once the buffers on the way are full, not queue without bound.
		cl := upgrade(t, "/ws")
		chunk := make([]byte, 64<<10)
		var sent int64
		cl.c.SetWriteDeadline(time.Now().Add(1500 * time.Millisecond))
		for sent < 1<<30 {
			n, err := cl.c.Write(chunk)
			sent += int64(n)
			if err != nil {
				break
			}
		}
		if sent >= 256<<20 {
			t.Fatalf("the proxy took %d MiB from a client that reads nothing", sent>>20)
		}
		// Everything taken comes back once the client reads.
		cl.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if n, err := io.CopyN(io.Discard, cl.br, sent); err != nil {
			t.Fatalf("echoed %d of %d: %v", n, sent, err)
		}
		t.Logf("the tunnel held %d KiB for a client that did not read", sent>>10)
	})

	t.Run("idle timeout", func(t *testing.T) {
		closed := up.closed.Load()
		cl := upgrade(t, "/idle")
		began := time.Now()
		cl.wantEOF()
		if d := time.Since(began); d < 250*time.Millisecond {
			t.Fatalf("closed after %v", d)
		}
		waitFor(t, "the upstream side to close", 5*time.Second, func() bool { return up.closed.Load() > closed })
	})

	t.Run("101 without upgrade headers", func(t *testing.T) {
		cl := newClient(t, addr)
		cl.send("GET /plain HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		resp, _ := cl.read("GET")
		if resp.StatusCode != 502 {
			t.Fatalf("%d", resp.StatusCode)
		}
		head, _ := up.head.Load().(string)
		if strings.Contains(head, "Upgrade:") {
			t.Fatalf("Upgrade forwarded without proxy_set_header: %q", head)
		}
	})
}
