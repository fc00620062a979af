package tls

import (
	"bytes"
	stdtls "crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/tls/tlstest"
)

// userspace forces the userspace path even where the kernel has kTLS.
var userspace = Options{}

func TestHandshakeAndEcho(t *testing.T) {
	certs(t)
	for _, tc := range []struct {
		name    string
		leaf    *tlstest.Leaf
		version uint16
	}{
		{"ECDSA TLS1.3", leafEC, stdtls.VersionTLS13},
		{"ECDSA TLS1.2", leafEC, stdtls.VersionTLS12},
		{"RSA TLS1.3", leafRSA, stdtls.VersionTLS13},
		{"RSA TLS1.2", leafRSA, stdtls.VersionTLS12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, &staticRouter{def: serverConfig(t, tc.leaf)}, userspace, echoHandler())
			cfg := clientConfig(testCA.Pool, "a.example")
			cfg.MinVersion, cfg.MaxVersion = tc.version, tc.version
			c := dialTLS(t, srv.addr, cfg)
			defer c.Close()
			if v := c.ConnectionState().Version; v != tc.version {
				t.Fatalf("version %x", v)
			}
			echo(t, c, []byte("hello over TLS"))
			big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB both ways
			echo(t, c, big)
			if got := srv.layer.Stats().Userspace.Load(); got != 1 {
				t.Errorf("userspace connections %d, want 1", got)
			}
		})
	}
}

// TestRequestWithFinished: a request in the same segment as the client's
// Finished must reach the handler (the handshake reads whole records only).
func TestRequestWithFinished(t *testing.T) {
	certs(t)
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, userspace, echoHandler())
	c, hc := dialHeld(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	msg := []byte("request after Finished")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := hc.flush(-1); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("echo of the request sent with Finished: %v", err)
	}
}

func TestCloseNotifyBothWays(t *testing.T) {
	certs(t)
	closed := make(chan error, 4)
	h := echoHandler()
	h.data = func(c eventloop.Conn, b []byte) {
		if string(b) == "bye" {
			c.Write([]byte("ok"))
			c.Close()
			return
		}
		c.Write(b)
	}
	h.close = func(c eventloop.Conn, err error) { closed <- err }
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, userspace, h)

	// The server closes: the client reads its close_notify (io.EOF, not an
	// unexpected EOF).
	c := dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	c.Write([]byte("bye"))
	got, err := io.ReadAll(c)
	if string(got) != "ok" || err != nil {
		t.Fatalf("read %q, %v; want ok and a clean end", got, err)
	}
	if err := <-closed; err != nil {
		t.Errorf("server Close: OnClose error %v, want nil", err)
	}
	c.Close()

	// The client closes: the handler sees io.EOF.
	c = dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	echo(t, c, []byte("x"))
	c.Close()
	select {
	case err := <-closed:
		if err != io.EOF {
			t.Errorf("client close_notify: OnClose error %v, want io.EOF", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no OnClose")
	}
}

// TestPauseResume: input that crypto/tls holds when the handler pauses is
// delivered after ResumeRead, in order.
func TestPauseResume(t *testing.T) {
	certs(t)
	var got bytes.Buffer
	var conn eventloop.Conn
	pauses := 0
	h := &funcHandler{
		open: func(c eventloop.Conn) { conn = c },
		data: func(c eventloop.Conn, b []byte) {
			got.Write(b)
			if got.Len() >= 3<<20 {
				c.Write([]byte("done"))
				return
			}
			pauses++
			c.PauseRead()
			c.SetTimeout(time.Millisecond)
		},
		timeout: func(c eventloop.Conn) { c.ResumeRead() },
	}
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, userspace, h)
	c := dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	want := make([]byte, 3<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	// Many small records so one socket read holds several.
	go func() {
		for i := 0; i < len(want); i += 1000 {
			c.Write(want[i:min(i+1000, len(want))])
		}
	}()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "done" {
		t.Fatalf("read %q, %v", buf, err)
	}
	srv.onLoop(t, func() {
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("received %d bytes, differ from the %d sent", got.Len(), len(want))
		}
		_ = conn
	})
	t.Logf("%d pauses", pauses)
}

// TestBackpressure: the raw conn's watermarks reach the handler through the
// TLS conn.
func TestBackpressure(t *testing.T) {
	certs(t)
	var blocked, writable atomic.Int32
	blockedOnce := make(chan struct{})
	chunk := bytes.Repeat([]byte("z"), 64<<10)
	sent := 0
	const total = 4 << 20
	var pump func(c eventloop.Conn)
	pump = func(c eventloop.Conn) {
		for sent < total && c.Queued() <= 256<<10 {
			c.Write(chunk)
			sent += len(chunk)
		}
	}
	h := &funcHandler{
		open: func(c eventloop.Conn) {
			// Small socket buffers, so the loop's queue fills.
			unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 32<<10)
		},
		data: func(c eventloop.Conn, b []byte) { pump(c) },
		blocked: func(c eventloop.Conn) {
			if blocked.Add(1) == 1 {
				close(blockedOnce)
			}
		},
		writable: func(c eventloop.Conn) { writable.Add(1); pump(c) },
	}
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, userspace, h)
	raw, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.(*net.TCPConn).SetReadBuffer(32 << 10)
	c := stdtls.Client(raw, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	c.Write([]byte("go"))
	select {
	case <-blockedOnce:
	case <-time.After(20 * time.Second):
		t.Fatal("no OnWriteBlocked")
	}
	n, err := io.CopyN(io.Discard, c, total)
	if err != nil || n != total {
		t.Fatalf("read %d, %v", n, err)
	}
	if writable.Load() == 0 {
		t.Errorf("OnWriteBlocked %d, OnWritable %d; want both", blocked.Load(), writable.Load())
	}
}

func TestWritevRecords(t *testing.T) {
	certs(t)
	h := &funcHandler{data: func(c eventloop.Conn, b []byte) {
		// A head, a body in pieces around the record size, a tail.
		parts := [][]byte{[]byte("HTTP/1.1 200 OK\r\n\r\n"), bytes.Repeat([]byte("a"), 20000),
			bytes.Repeat([]byte("b"), 40000), []byte("end")}
		c.Writev(parts)
	}}
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, userspace, h)
	c := dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	c.Write([]byte("x"))
	want := "HTTP/1.1 200 OK\r\n\r\n" + string(bytes.Repeat([]byte("a"), 20000)) + string(bytes.Repeat([]byte("b"), 40000)) + "end"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
}

func TestSNI(t *testing.T) {
	certs(t)
	a, b := serverConfig(t, leafEC), serverConfig(t, leafB)
	srv := startServer(t, &staticRouter{def: a, byName: map[string]*ServerConfig{"b.example": b}}, userspace, echoHandler())
	for _, name := range []string{"a.example", "b.example", "c.example"} {
		cfg := clientConfig(testCA.Pool, name)
		cfg.InsecureSkipVerify = name == "c.example" // the default server's certificate does not name it
		c := dialTLS(t, srv.addr, cfg)
		leaf := c.ConnectionState().PeerCertificates[0]
		want := "a.example"
		if name == "b.example" {
			want = "b.example"
		}
		if leaf.Subject.CommonName != want {
			t.Errorf("SNI %s: certificate %s, want %s", name, leaf.Subject.CommonName, want)
		}
		echo(t, c, []byte(name))
		c.Close()
	}
}

func TestResumption(t *testing.T) {
	certs(t)
	for _, version := range []uint16{stdtls.VersionTLS13, stdtls.VersionTLS12} {
		t.Run(fmt.Sprintf("%x", version), func(t *testing.T) {
			sc := serverConfig(t, leafEC)
			srv := startServer(t, &staticRouter{def: sc}, userspace, echoHandler())
			cfg := clientConfig(testCA.Pool, "a.example")
			cfg.MinVersion, cfg.MaxVersion = version, version
			cfg.ClientSessionCache = stdtls.NewLRUClientSessionCache(4)
			for i := 0; i < 3; i++ {
				c := dialTLS(t, srv.addr, cfg)
				echo(t, c, []byte("x")) // TLS 1.3 tickets arrive after the handshake
				if got := c.ConnectionState().DidResume; got != (i > 0) {
					t.Errorf("connection %d resumed %v", i, got)
				}
				c.Close()
			}
			if got := srv.layer.Stats().Resumed.Load(); got != 2 {
				t.Errorf("resumed %d, want 2", got)
			}
		})
	}
}

// TestSessionTimeout: a ticket older than ssl_session_timeout does not resume.
func TestSessionTimeout(t *testing.T) {
	certs(t)
	sc := serverConfig(t, leafEC)
	// Seconds of margin both ways: the slow two-node guest (TCG) takes a good part
	// of a second between the first handshake and the second.
	sc.SessionTimeout = 3 * time.Second
	srv := startServer(t, &staticRouter{def: sc}, userspace, echoHandler())
	cfg := clientConfig(testCA.Pool, "a.example")
	cfg.ClientSessionCache = stdtls.NewLRUClientSessionCache(4)
	c := dialTLS(t, srv.addr, cfg)
	echo(t, c, []byte("x"))
	c.Close()
	c = dialTLS(t, srv.addr, cfg)
	echo(t, c, []byte("x"))
	if !c.ConnectionState().DidResume {
		t.Fatal("a fresh ticket did not resume")
	}
	c.Close()
	time.Sleep(4100 * time.Millisecond) // stamps have one-second resolution
	c = dialTLS(t, srv.addr, cfg)
	echo(t, c, []byte("x"))
	if c.ConnectionState().DidResume {
		t.Error("a ticket older than the session timeout resumed")
	}
	c.Close()
}

// TestBadClientsLeaveOthersAlone: garbage, a truncated ClientHello and an
// oversized handshake fail alone; a client on the same loop keeps being answered.
func TestBadClientsLeaveOthersAlone(t *testing.T) {
	certs(t)
	opts := Options{HandshakeTimeout: 300 * time.Millisecond, MaxHandshakeBytes: 4096}
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, opts, echoHandler())
	good := dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer good.Close()

	stop := make(chan struct{})
	answered := make(chan int)
	go func() {
		n := 0
		defer func() { answered <- n }()
		buf := make([]byte, 4)
		for {
			select {
			case <-stop:
				return
			default:
			}
			good.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := good.Write([]byte("ping")); err != nil {
				return
			}
			if _, err := io.ReadFull(good, buf); err != nil {
				return
			}
			n++
		}
	}()

	bad := func(payload []byte, wantClose time.Duration) {
		c, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(payload)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		io.Copy(io.Discard, c) // until the server closes
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("payload %.10q: closed after %v", payload, d)
		}
	}
	bad([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0)
	// A ClientHello record header promising more than ever comes: the timeout.
	bad([]byte{22, 3, 1, 0x02, 0x00, 1, 0, 1, 0xfc, 3, 3}, opts.HandshakeTimeout)
	// Handshake records past MaxHandshakeBytes.
	big := append([]byte{22, 3, 1, 0x3f, 0xff}, make([]byte, 0x3fff)...)
	bad(big, 0)
	// Random bytes.
	bad(bytes.Repeat([]byte{0x16, 0xff}, 100), 0)

	close(stop)
	if n := <-answered; n == 0 {
		t.Error("the good client got no answer while bad ones were served")
	} else {
		t.Logf("good client answered %d times meanwhile", n)
	}
	st := srv.layer.Stats()
	waitFor(t, "failure counters", func() bool { return st.Failures.Load() == 4 })
	if st.Timeouts.Load() != 1 {
		t.Errorf("timeouts %d, want 1", st.Timeouts.Load())
	}
	echo(t, good, []byte("still here"))
}

// TestStopDuringHandshake: a loop stopping with a handshake suspended ends its
// coroutine cleanly.
func TestStopDuringHandshake(t *testing.T) {
	certs(t)
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, userspace, echoHandler())
	c, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{22, 3, 1, 0x02, 0x00, 1}) // the start of a ClientHello
	time.Sleep(50 * time.Millisecond)
	srv.loop.Stop()
	<-srv.loop.Done()
	if f := srv.layer.Stats().Failures.Load(); f != 1 {
		t.Errorf("failures %d, want 1", f)
	}
}

// TestPlainAddressPassesThrough: an address without TLS goes straight to the inner handler.
func TestPlainAddressPassesThrough(t *testing.T) {
	srv := startServer(t, &staticRouter{}, userspace, echoHandler())
	c, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo(t, c, []byte("plain"))
}

func TestCloseErrorOfTLSFailure(t *testing.T) {
	certs(t)
	closed := make(chan error, 1)
	h := echoHandler()
	h.close = func(c eventloop.Conn, err error) { closed <- err }
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, userspace, h)
	c := dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	echo(t, c, []byte("x"))
	// A record that does not authenticate.
	c.NetConn().Write([]byte{23, 3, 3, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	select {
	case err := <-closed:
		if err == nil || err == io.EOF || !errors.Is(err, err) {
			t.Errorf("OnClose error %v, want the TLS error", err)
		}
		t.Logf("OnClose: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no OnClose")
	}
}

// TestHeldBytesBeforeEnd: what WritevMore held back goes out before the
// close_notify of a Close or CloseWrite, and before a later Write's bytes;
// records fill to ssl_buffer_size across writes.
func TestHeldBytesBeforeEnd(t *testing.T) {
	certs(t)
	h := &funcHandler{data: func(c eventloop.Conn, b []byte) {
		tc := c.(*Conn)
		switch string(b) {
		case "close":
			tc.WritevMore([][]byte{[]byte("held "), []byte("then closed")})
			tc.Close()
		case "closewrite":
			tc.WritevMore([][]byte{[]byte("held then shut")})
			tc.CloseWrite()
		case "write":
			tc.WritevMore([][]byte{[]byte("held, ")})
			tc.Write([]byte("then written"))
		case "fill":
			for i := 0; i < 10; i++ {
				tc.WritevMore([][]byte{bytes.Repeat([]byte{'x'}, 300)})
			}
			tc.FlushHeld()
		}
	}}
	sc := serverConfig(t, leafEC)
	sc.RecordSize = 1024
	srv := startServer(t, &staticRouter{def: sc}, userspace, h)
	cfg := clientConfig(testCA.Pool, "a.example")
	for _, tc := range []struct{ cmd, want string }{
		{"close", "held then closed"},
		{"closewrite", "held then shut"},
	} {
		c := dialTLS(t, srv.addr, cfg)
		c.Write([]byte(tc.cmd))
		got, err := io.ReadAll(c)
		c.Close()
		if string(got) != tc.want || err != nil {
			t.Errorf("%s: read %q, %v; want %q and close_notify", tc.cmd, got, err, tc.want)
		}
	}
	c := dialTLS(t, srv.addr, cfg)
	defer c.Close()
	c.Write([]byte("write"))
	got := make([]byte, len("held, then written"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held, then written" {
		t.Errorf("write: read %q, %v", got, err)
	}
	raw, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	tap := &recordLens{Conn: raw}
	cfg12 := cfg.Clone()
	cfg12.MaxVersion, cfg12.CipherSuites = stdtls.VersionTLS12, []uint16{stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	fc := stdtls.Client(tap, cfg12)
	fc.SetDeadline(time.Now().Add(20 * time.Second))
	defer fc.Close()
	fc.Write([]byte("fill"))
	if _, err := io.ReadFull(fc, make([]byte, 3000)); err != nil {
		t.Fatal(err)
	}
	if got, want := tap.appData(), []int{1024, 1024, 952}; !slices.Equal(got, want) {
		t.Errorf("fill: records of %v bytes of plaintext, want %v", got, want)
	}
}

// recordLens keeps what a TLS 1.2 client read, to list its records.
type recordLens struct {
	net.Conn
	buf bytes.Buffer
}

func (r *recordLens) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

// appData is the plaintext sizes of the application data records, sealed
// with TLS 1.2's AES-GCM (8 bytes of explicit nonce and 16 of tag each).
func (r *recordLens) appData() []int {
	var lens []int
	for b := r.buf.Bytes(); len(b) >= 5; {
		n := int(b[3])<<8 | int(b[4])
		if b[0] == 23 {
			lens = append(lens, n-24)
		}
		if len(b) < 5+n {
			break
		}
		b = b[5+n:]
	}
	return lens
}
