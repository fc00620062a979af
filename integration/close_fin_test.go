package integration

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCloseAnswerWithFIN: the last answer on a connection whose client asked for
// the close ("Connection: close", HTTP/1.0) reaches it in one segment with the FIN
// (nginx sends the FIN alone after it), whether the answer ends in the write that
// carries its head (return) or its body comes from an upstream. A close the server
// chooses (keepalive_requests) sends the answer at once, as nginx: the client may
// still be sending, and the reset that unread input causes would drop what waits.
// Counted on the client: the segments it received without data (the SYN-ACK,
// ACKs, a FIN alone); the answers must be the same bytes but for Date and Server.
func TestCloseAnswerWithFIN(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from the upstream\n") })
	// An upstream whose answers come in three reads: the head, then the body in two
	// parts (with a length, or chunked).
	slow := newRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			head, err := readHead(br)
			if err != nil {
				return
			}
			parts := []string{"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", "first ", "second"}
			if strings.HasPrefix(head, "GET /slowchunked") {
				parts = []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "6\r\nfirst \r\n", "6\r\nsecond\r\n0\r\n\r\n"}
			}
			for _, p := range parts {
				time.Sleep(20 * time.Millisecond)
				if _, err := io.WriteString(c, p); err != nil {
					return
				}
			}
		}
	})
	conf := `
    server {
        listen %[1]s;
        keepalive_requests 1;
        server_tokens off;
        location / {
            return 200 "hello\n";
        }
        location /up {
            proxy_pass http://%[2]s;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        location /slow {
            proxy_pass http://%[3]s;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }`
	conf = strings.ReplaceAll(conf, "%[3]s", slow.Addr)
	servers := bothServers(t, conf, be.Addr)
	for _, tc := range []struct {
		name, req string
		fewer     uint32 // segments numaproxy's client gets fewer than nginx's
	}{
		{"client close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: x\r\n\r\n", 1},
		{"proxied, client close", "GET /up HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1},
		{"proxied in three reads, client close", "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1},
		{"proxied chunked in three reads, client close", "GET /slowchunked HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1},
		{"keepalive_requests", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"proxied, keepalive_requests", "GET /up HTTP/1.1\r\nHost: x\r\n\r\n", 0},
	} {
		noData := map[string]uint32{}
		answers := map[string]string{}
		for _, s := range servers {
			raw, n := answerSegments(t, s.addr, tc.req)
			noData[s.name], answers[s.name] = n, withoutDateServer(raw)
		}
		if answers["numaproxy"] != answers["nginx"] {
			t.Errorf("%s: numaproxy answered\n%q\nnginx\n%q", tc.name, answers["numaproxy"], answers["nginx"])
		}
		if noData["numaproxy"] != noData["nginx"]-tc.fewer {
			t.Errorf("%s: segments without data the client received: numaproxy %d, nginx %d; want %d fewer",
				tc.name, noData["numaproxy"], noData["nginx"], tc.fewer)
		}
	}
}

// answerSegments sends req on a new connection, reads to EOF and returns what it
// read and the number of segments without data the client's socket received.
func answerSegments(t *testing.T, addr, req string) (string, uint32) {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	raw, err := readToEOF(c)
	if err != nil {
		t.Fatalf("%s: %q, %v", addr, raw, err)
	}
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ti *unix.TCPInfo
	rc.Control(func(fd uintptr) { ti, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if err != nil {
		t.Fatal(err)
	}
	return raw, ti.Segs_in - ti.Data_segs_in
}

// withoutDateServer drops the Date and Server fields of a response head.
func withoutDateServer(raw string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(raw, "\r\n") {
		if strings.HasPrefix(line, "Date: ") || strings.HasPrefix(line, "Server: ") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}
