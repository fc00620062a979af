package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRelay runs the relay floor between a client and an upstream: requests on
// one keep-alive connection reach the upstream on one connection of its own,
// answers come back whole, and a client that closes closes its upstream pair.
func TestRelay(t *testing.T) {
	var opened, closed atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "up:%s", r.URL.Path)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	up.Start()
	defer up.Close()

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	errc := make(chan error, 1)
	go func() { errc <- runRelay(addr, strings.TrimPrefix(up.URL, "http://")) }()
	var c net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err = net.Dial("tcp4", addr); err == nil {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("relay: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay does not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range 3 {
		fmt.Fprintf(c, "GET /r%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if want := fmt.Sprintf("up:/r%d", i); string(body) != want {
			t.Fatalf("request %d: body %q, want %q", i, body, want)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("upstream connections: %d, want 1", n)
	}
	c.Close()
	for deadline := time.Now().Add(5 * time.Second); closed.Load() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upstream connection stayed open after its client closed")
		}
	}
}
