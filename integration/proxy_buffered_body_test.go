package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestChunkedBodyToHTTP10Upstream: with nginx's default proxy_http_version 1.0 an
// upstream cannot take a chunked body, so numaproxy reads it whole and sends it with
// a Content-Length, as nginx does; a body over client_max_body_size is 413.
func TestChunkedBodyToHTTP10Upstream(t *testing.T) {
	be := newBackend(t, nil)
	addr := addrFor(t)
	startHTTP(t, fmt.Sprintf(`server { listen %s;
  location / { proxy_pass http://%s; }
  location /small { client_max_body_size 10; proxy_pass http://%s; }
}`, addr, be.Addr, be.Addr), addr)

	parts := []string{"hello ", strings.Repeat("x", 100000), " world"}
	var req strings.Builder
	req.WriteString("POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
	for _, p := range parts {
		fmt.Fprintf(&req, "%x\r\n%s\r\n", len(p), p)
	}
	req.WriteString("0\r\nX-Trailer: t\r\n\r\n")
	wantClosedResponse(t, addr, req.String(), http.StatusOK)
	got := be.last(t)
	want := strings.Join(parts, "")
	if got.Proto != "HTTP/1.0" || got.ContentLength != int64(len(want)) || len(got.TE) != 0 || got.Body != want {
		t.Fatalf("upstream saw %s, Content-Length %d, TE %v, body of %d bytes; want HTTP/1.0 with Content-Length %d",
			got.Proto, got.ContentLength, got.TE, len(got.Body), len(want))
	}

	n := be.count()
	wantClosedResponse(t, addr, "POST /small HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n12345\r\n6\r\n123456\r\n0\r\n\r\n", http.StatusRequestEntityTooLarge)
	if be.count() != n {
		t.Fatal("a body over client_max_body_size reached the upstream")
	}
}
