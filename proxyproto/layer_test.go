package proxyproto

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

const request = "GET / HTTP/1.0\r\nHost: x\r\n\r\n"

// TestLayerAddresses: real TCP clients send a header and a request, in one
// write, or split byte by byte across reads, or with the header's end and the
// request in the same read; the inner handler sees the header's source as the
// remote address (the real one for LOCAL, UNKNOWN and UNIX), the listener's
// address as the local one, and the request whole.
func TestLayerAddresses(t *testing.T) {
	srv := startServer(t, reporter(), Options{}, 1)
	listen := srv.addrs[0]
	ssl := cat([]byte{TypeSSL, 0, 5 + 3 + 7, 0x01, 0, 0, 0, 0}, tlv(TypeSSLVersion, "TLSv1.3"))
	cases := []struct {
		name   string
		header []byte
		remote string // "" for the client's real address
		want   string
	}{
		{"v1 tcp4", []byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"), "192.0.2.1:56324",
			"v1 cmd=1 fam=1 src=192.0.2.1:56324 dst=198.51.100.2:443"},
		{"v1 tcp6", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n"), "[2001:db8::1]:1",
			"v1 cmd=1 fam=2 src=[2001:db8::1]:1 dst=[2001:db8::2]:65535"},
		{"v1 unknown", []byte("PROXY UNKNOWN 1.2.3.4\r\n"), "", "v1 cmd=1 fam=0 req="},
		{"v2 tcp4", v2(0x21, 0x11, inet4Addrs), "192.0.2.1:56324", "v2 cmd=1 fam=1 src=192.0.2.1:56324 dst=198.51.100.2:443 req="},
		{"v2 tcp6 with TLVs", v2(0x21, 0x21, inet6Addrs, tlv(TypeALPN, "h2"), tlv(TypeAuthority, "example.com"), ssl),
			"[2001:db8::1]:1", `v2 cmd=1 fam=2 src=[2001:db8::1]:1 dst=[2001:db8::2]:65535 tlv01="h2" tlv02="example.com" tlv20="\x01\x00\x00\x00\x00!\x00\aTLSv1.3" req=`},
		{"v2 local", v2(0x20, 0x00), "", "v2 cmd=0 fam=0 req="},
		{"v2 local with addresses", v2(0x20, 0x11, inet4Addrs), "", "v2 cmd=0 fam=1 req="},
		{"v2 unix", v2(0x21, 0x31, unixAddrs("/run/c.sock", "/run/s.sock")), "", `v2 cmd=1 fam=3 unix="/run/c.sock"->"/run/s.sock" req=`},
	}
	for _, tc := range cases {
		for _, mode := range []string{"one write", "byte by byte", "header end with request"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				var parts [][]byte
				pause := time.Duration(0)
				switch mode {
				case "one write":
					parts = [][]byte{cat(tc.header, []byte(request))}
				case "byte by byte":
					parts, pause = append(bytewise(tc.header), []byte(request)), 2*time.Millisecond
				default:
					k := len(tc.header) - 3
					parts, pause = [][]byte{tc.header[:k], cat(tc.header[k:], []byte(request))}, 20*time.Millisecond
				}
				out, c := exchange(t, listen, pause, parts...)
				remote := tc.remote
				if remote == "" {
					remote = c.LocalAddr().String()
				}
				want := fmt.Sprintf("remote=%s local=%s %s", remote, listen, tc.want)
				if !strings.Contains(out, want) || !strings.HasSuffix(out, "req=GET / HTTP/1.0") {
					t.Fatalf("got  %q\nwant %q ... req=GET / HTTP/1.0", out, want)
				}
			})
		}
	}
}

// TestLayerRefuses: a connection without a valid header is closed before the
// inner handler sees it, and nginx's message is logged.
func TestLayerRefuses(t *testing.T) {
	var opened atomic.Int32
	inner := reporter()
	open := inner.open
	inner.open = func(c eventloop.Conn) { opened.Add(1); open(c) }
	srv := startServer(t, inner, Options{}, 1)
	cases := []struct {
		name  string
		parts [][]byte
		log   string
	}{
		{"http request", [][]byte{[]byte(request)}, `broken header: "GET / HTTP/1.0"`},
		{"garbage after a valid start", [][]byte{[]byte("PROXY TCP4 1.2.3.4 "), []byte("x.6.7.8 1 2\r\n" + request)},
			`broken header: "PROXY TCP4 1.2.3.4 x.6.7.8 1 2"`},
		{"v1 too long", [][]byte{[]byte("PROXY UNKNOWN " + strings.Repeat("y", 100) + "\r\n" + request)}, `broken header: "PROXY UNKNOWN yyyy`},
		{"v1 invalid address", [][]byte{[]byte("PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n" + request)}, `broken header: "PROXY TCP4 1.2.3.256`},
		{"v2 version 3", [][]byte{v2(0x31, 0x11, inet4Addrs)}, "unknown PROXY protocol version: 3"},
		{"v2 too large", [][]byte{v2(0x21, 0x11, inet4Addrs, make([]byte, DefaultMaxHeader))}, "header is too large"},
		{"v2 short addresses", [][]byte{v2(0x21, 0x21, inet4Addrs)}, `broken header: "\x0d`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := exchange(t, srv.addrs[0], 20*time.Millisecond, tc.parts...)
			if out != "" {
				t.Fatalf("answered %q", out)
			}
			waitFor(t, "the log line "+tc.log+" in\n"+srv.log.String(), func() bool { return srv.log.has(tc.log) })
		})
	}

	// Truncated: the client stops sending inside the header.
	t.Run("truncated", func(t *testing.T) {
		c := dial(t, srv.addrs[0])
		c.Write([]byte("PROXY TCP4 192.0.2.9 198"))
		c.CloseWrite()
		if out, _ := io.ReadAll(c); len(out) != 0 {
			t.Fatalf("answered %q", out)
		}
		waitFor(t, "the log line", func() bool { return srv.log.has(`broken header: "PROXY TCP4 192.0.2.9 198"`) })
	})
	if n := opened.Load(); n != 0 {
		t.Fatalf("inner handler opened %d connections", n)
	}
}

// TestLayerTimeout: a client that sends no header, or part of one, is closed
// after the timeout (proxy_protocol_timeout), unseen by the inner handler.
func TestLayerTimeout(t *testing.T) {
	var opened atomic.Int32
	inner := reporter()
	inner.open = func(eventloop.Conn) { opened.Add(1) }
	const timeout = 300 * time.Millisecond
	srv := startServer(t, inner, Options{Timeout: timeout}, 1)
	for _, sent := range []string{"", "PROXY TCP4 1.2.3.4"} {
		c := dial(t, srv.addrs[0])
		start := time.Now()
		c.Write([]byte(sent))
		out, err := io.ReadAll(c)
		took := time.Since(start)
		if len(out) != 0 || err != nil && !isReset(err) {
			t.Fatalf("%q: %q %v", sent, out, err)
		}
		if took < timeout/2 {
			t.Fatalf("%q: closed after %v, timeout %v", sent, took, timeout)
		}
	}
	waitFor(t, "the timeout log line", func() bool {
		return srv.log.has("client timed out (110: Connection timed out) while reading PROXY protocol")
	})
	if opened.Load() != 0 {
		t.Fatal("inner handler saw a connection")
	}
	if l := NewLayer(inner, Options{}); l.opts.Timeout != 30*time.Second || l.opts.MaxHeader != DefaultMaxHeader {
		t.Fatalf("defaults %+v", l.opts)
	}
}

// TestLayerExpect: only connections to addresses Expect names read a header;
// the others reach the inner handler as they are.
func TestLayerExpect(t *testing.T) {
	var port atomic.Uint32
	srv := startServer(t, reporter(), Options{Expect: func(local netip.AddrPort) bool { return uint32(local.Port()) == port.Load() }}, 2)
	port.Store(uint32(netip.MustParseAddrPort(srv.addrs[0]).Port()))
	out, _ := exchange(t, srv.addrs[0], 0, cat([]byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"), []byte(request)))
	if !strings.Contains(out, "remote=192.0.2.1:56324") {
		t.Fatalf("listener with proxy_protocol: %q", out)
	}
	out, c := exchange(t, srv.addrs[1], 0, []byte(request))
	if !strings.Contains(out, "remote="+c.LocalAddr().String()+" local="+srv.addrs[1]+" no-header req=GET") {
		t.Fatalf("listener without: %q", out)
	}
}

// TestLayerPauseInOpen: an inner handler that pauses reading in OnOpen gets
// what came with the header only after it resumes, not from inside its
// ResumeRead, and before anything read later.
func TestLayerPauseInOpen(t *testing.T) {
	type state struct {
		resume   eventloop.Timer
		inResume bool
		got      []byte
	}
	var fails atomic.Value
	inner := &funcHandler{
		open: func(c eventloop.Conn) {
			st := &state{}
			c.SetContext(st)
			c.PauseRead()
			c.Loop().InitTimer(&st.resume, func(*eventloop.Timer) {
				st.inResume = true
				c.ResumeRead()
				st.inResume = false
			})
			st.resume.Reset(50 * time.Millisecond)
		},
		data: func(c eventloop.Conn, b []byte) {
			st := c.Context().(*state)
			if st.inResume {
				fails.Store("OnData from inside ResumeRead")
			}
			st.got = append(st.got, b...)
			if bytes.HasSuffix(st.got, []byte("END")) {
				c.Write(st.got)
				c.Close()
			}
		},
	}
	srv := startServer(t, inner, Options{}, 1)
	out, _ := exchange(t, srv.addrs[0], 100*time.Millisecond, []byte("PROXY UNKNOWN\r\nfirst "), []byte("second END"))
	if out != "first second END" {
		t.Fatalf("%q", out)
	}
	if f := fails.Load(); f != nil {
		t.Fatal(f)
	}
}

// TestLayerCloseInOpen: what came with the header is not delivered to an
// inner handler that closed in OnOpen.
func TestLayerCloseInOpen(t *testing.T) {
	var data atomic.Int32
	inner := &funcHandler{
		open: func(c eventloop.Conn) { c.Write([]byte("bye")); c.Close() },
		data: func(eventloop.Conn, []byte) { data.Add(1) },
	}
	srv := startServer(t, inner, Options{}, 1)
	out, _ := exchange(t, srv.addrs[0], 0, []byte("PROXY UNKNOWN\r\nhello"))
	if out != "bye" || data.Load() != 0 {
		t.Fatalf("%q, %d OnData", out, data.Load())
	}
}

// TestLayerClose: the inner handler's OnClose gets its Conn and the reason.
func TestLayerClose(t *testing.T) {
	closed := make(chan error, 1)
	inner := &funcHandler{close: func(c eventloop.Conn, err error) {
		if _, ok := c.(*Conn); !ok {
			err = fmt.Errorf("OnClose with %T", c)
		}
		closed <- err
	}}
	srv := startServer(t, inner, Options{}, 1)
	c := dial(t, srv.addrs[0])
	c.Write([]byte("PROXY UNKNOWN\r\n"))
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-closed:
		if err != io.EOF {
			t.Fatalf("OnClose: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no OnClose")
	}
}

// TestLayerKeepPeerAddr: with KeepPeerAddr the remote address stays the real
// peer's (nginx without realip) and the header's source is in the header.
func TestLayerKeepPeerAddr(t *testing.T) {
	srv := startServer(t, reporter(), Options{KeepPeerAddr: true}, 1)
	out, c := exchange(t, srv.addrs[0], 0, cat([]byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"), []byte(request)))
	want := "remote=" + c.LocalAddr().String() + " local=" + srv.addrs[0] + " v1 cmd=1 fam=1 src=192.0.2.1:56324 dst=198.51.100.2:443"
	if !strings.Contains(out, want) {
		t.Fatalf("got  %q\nwant %q", out, want)
	}
}
