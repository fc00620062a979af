package integration

import (
	"bufio"
	stdtls "crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsRecords fetches path from addr over TLS 1.2 (whose application data
// records are the response's only) and returns the response's length and the
// plaintext lengths of its records.
func tlsRecords(t *testing.T, f *tlsFiles, addr, path string) (int, []int) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tap := &recordTap{Conn: raw}
	c := stdtls.Client(tap, &stdtls.Config{ServerName: "a.test", RootCAs: f.pool, MaxVersion: stdtls.VersionTLS12,
		CipherSuites: []uint16{stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}})
	c.SetDeadline(time.Now().Add(ioTimeout))
	io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
	got, _ := io.ReadAll(c)
	c.Close()
	var lens []int
	for _, n := range appDataLens(tap.buf.Bytes()) {
		lens = append(lens, n-24) // AES-GCM: 8 bytes of explicit nonce, 16 of tag
	}
	return len(got), lens
}

// TestTLSRecordsOfProxiedResponseVsNginx: a proxied response whose upstream
// sent many small chunks at once goes out in full records (ssl_buffer_size),
// as nginx's, not a record (and a write) per chunk; a file's records start
// with the head, as nginx's.
func TestTLSRecordsOfProxiedResponseVsNginx(t *testing.T) {
	f := newTLSFiles(t)
	const pieces, size = 64, 500
	up := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readHead(br); err != nil {
			return
		}
		var b strings.Builder
		b.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
		for i := 0; i < pieces; i++ {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", size, strings.Repeat("y", size))
		}
		b.WriteString("0\r\n\r\n")
		io.WriteString(c, b.String()) // one write: the proxy reads it at once
	})
	// A file: its head and bytes fill the records the same way.
	root := t.TempDir()
	openToAll(t, root)
	if err := os.WriteFile(filepath.Join(root, "f"), []byte(strings.Repeat("x", 100<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		conf string
		rs   int
	}{{"", 16384}, {"ssl_buffer_size 4k;", 4096}} {
		body := func(addr string) string {
			return fmt.Sprintf(`
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    %s
    location / { proxy_pass http://%s; }
    location /f { root %s; }
  }`, addr, f.aEC, f.aECKey, tc.conf, up.Addr, root)
		}
		np, ng := addrFor(t), addrFor(t)
		startHTTP(t, body(np), np)
		startNginx(t, body(ng), ng)
		n1, got := tlsRecords(t, f, np, "/f")
		n2, want := tlsRecords(t, f, ng, "/f")
		t.Logf("%q: file: numaproxy %d bytes in %v; nginx %d bytes in %v", tc.conf, n1, got, n2, want)
		if len(got) != len(want) || got[0] != tc.rs {
			t.Errorf("%q: file in %d records, the first of %d bytes; nginx: %d, %d", tc.conf, len(got), got[0], len(want), want[0])
		}
		n1, got = tlsRecords(t, f, np, "/")
		n2, want = tlsRecords(t, f, ng, "/")
		t.Logf("%q: numaproxy %d bytes in %v; nginx %d bytes in %v", tc.conf, n1, got, n2, want)
		// The head may make a record of its own, and the size of the body's
		// framing differs (nginx chunks what it passes on the same way).
		if len(got) > len(want)+1 || n1 < pieces*size {
			t.Errorf("%q: %d records, nginx %d", tc.conf, len(got), len(want))
		}
		for i, n := range got {
			if n > tc.rs || i > 0 && i < len(got)-1 && n < tc.rs {
				t.Errorf("%q: record %d of %d bytes, want %d (all but the first and last)", tc.conf, i, n, tc.rs)
			}
		}
	}
}

// TestTLSHeldRecordNotWaitingForUpstream: the partial record of a response in
// progress goes out when the upstream has nothing more for now, not when it
// sends more: a chunk followed by a pause reaches the client during the pause.
func TestTLSHeldRecordNotWaitingForUpstream(t *testing.T) {
	f := newTLSFiles(t)
	release := make(chan struct{})
	up := newRawUpstream(t, func(c net.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nfirst\r\n")
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(c, "4\r\nlast\r\n0\r\n\r\n")
	})
	defer close(release)
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`
  server {
    listen %s ssl;
    ssl_certificate %s;
    ssl_certificate_key %s;
    location / { proxy_pass http://%s; }
  }`, addr, f.aEC, f.aECKey, up.Addr), addr)
	c, err := stdtls.Dial("tcp", addr, &stdtls.Config{ServerName: "a.test", RootCAs: f.pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) // the upstream pauses for 10
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	br := bufio.NewReader(c)
	if _, err := readHead(br); err != nil {
		t.Fatal(err)
	}
	line, _ := br.ReadString('\n')
	data, err := br.ReadString('\n')
	if line != "5\r\n" || data != "first\r\n" {
		t.Fatalf("before the upstream's pause: %q %q %v", line, data, err)
	}
}
