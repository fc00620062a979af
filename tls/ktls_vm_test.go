package tls

// kTLS tests. The host that builds this project has no kTLS (CONFIG_TLS off), so
// they run in the two-node QEMU guest of integration/vm (NUMAPROXY_IN_VM=1, with
// the tls module loaded: `make test-numa`) and skip elsewhere. They also guard
// the Go toolchain: kTLS depends on crypto/tls's key log and on how many session
// tickets it sends, and a change there fails these tests loudly.

import (
	"bytes"
	stdtls "crypto/tls"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
)

// inVM skips outside the guest and fails if the guest's kernel has no kTLS.
func inVM(t *testing.T) *Support {
	t.Helper()
	if os.Getenv("NUMAPROXY_IN_VM") != "1" {
		t.Skip("needs the QEMU guest with the tls module (NUMAPROXY_IN_VM=1)")
	}
	s := Probe()
	t.Log(s)
	if !s.Any() {
		t.Fatalf("the guest's kernel has no kTLS: %v", s.Err)
	}
	return s
}

func TestProbeHost(t *testing.T) {
	t.Log(Probe())
}

// kernelEcho echoes and records how each connection was handed over.
type kernelEcho struct {
	*funcHandler
	raw  chan bool   // per OnOpen: the inner handler got the kernel conn with its TLS state (kTLS)
	ulp  chan string // per OnOpen: the socket's TCP_ULP
	errs chan error  // per OnClose
}

func newKernelEcho() *kernelEcho {
	k := &kernelEcho{raw: make(chan bool, 64), ulp: make(chan string, 64), errs: make(chan error, 64)}
	k.funcHandler = echoHandler()
	k.open = func(c eventloop.Conn) {
		_, isTLS := c.(*Conn)
		// A kernel connection carries its handshake's state ($ssl_* variables).
		info := InfoOf(c)
		k.raw <- !isTLS && info != nil && info.Version != 0 && info.Cipher != 0
		ulp, _ := unix.GetsockoptString(c.Fd(), unix.IPPROTO_TCP, unix.TCP_ULP)
		k.ulp <- ulp
	}
	k.close = func(c eventloop.Conn, err error) {
		if os.Getenv("NUMAPROXY_IN_VM") == "1" {
			println("OnClose:", errString(err))
		}
		k.errs <- err
	}
	return k
}

func (k *kernelEcho) wantKernel(t *testing.T, want bool) {
	t.Helper()
	select {
	case raw := <-k.raw:
		ulp := <-k.ulp
		if raw != want || (ulp == "tls") != want {
			t.Errorf("handed to the kernel: raw conn %v, TCP_ULP %q; want kTLS %v", raw, ulp, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no OnOpen")
	}
}

func TestVMKTLSRoundTrip(t *testing.T) {
	inVM(t)
	certs(t)
	for _, tc := range []struct {
		name    string
		version uint16
		suite   uint16
		leaf    bool // RSA
	}{
		{"TLS1.3", stdtls.VersionTLS13, 0, false},
		{"TLS1.3 RSA", stdtls.VersionTLS13, 0, true},
		{"TLS1.2 AES128GCM", stdtls.VersionTLS12, stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, false},
		{"TLS1.2 AES256GCM", stdtls.VersionTLS12, stdtls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, false},
		{"TLS1.2 CHACHA20", stdtls.VersionTLS12, stdtls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, false},
		{"TLS1.2 RSA AES128GCM", stdtls.VersionTLS12, stdtls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := leafEC
			if tc.leaf {
				leaf = leafRSA
			}
			h := newKernelEcho()
			srv := startServer(t, &staticRouter{def: serverConfig(t, leaf)}, Options{KTLS: true}, h)
			cfg := clientConfig(testCA.Pool, "a.example")
			cfg.MinVersion, cfg.MaxVersion = tc.version, tc.version
			if tc.suite != 0 {
				cfg.CipherSuites = []uint16{tc.suite}
			}
			c := dialTLS(t, srv.addr, cfg)
			defer c.Close()
			t.Logf("negotiated %s", stdtls.CipherSuiteName(c.ConnectionState().CipherSuite))
			echo(t, c, []byte("hello through the kernel"))
			h.wantKernel(t, true)
			echo(t, c, bytes.Repeat([]byte("0123456789abcdef"), 1<<16))
			echo(t, c, []byte("and again"))
			if got := srv.layer.Stats().KTLS.Load(); got != 1 {
				t.Errorf("kTLS connections %d, want 1", got)
			}
		})
	}
}

// TestVMKTLSTickets: TLS 1.3's transmit sequence counts the session tickets sent
// under the application key (one by default, none with tickets off); resumed
// TLS 1.3 goes to the kernel too, resumed TLS 1.2 (no key logged) stays in
// userspace.
func TestVMKTLSTickets(t *testing.T) {
	inVM(t)
	certs(t)
	for _, tc := range []struct {
		name      string
		version   uint16
		noTickets bool
		kernel2nd bool
	}{
		{"TLS1.3", stdtls.VersionTLS13, false, true},
		{"TLS1.3 tickets off", stdtls.VersionTLS13, true, true},
		{"TLS1.2", stdtls.VersionTLS12, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := serverConfig(t, leafEC)
			sc.TLS.SessionTicketsDisabled = tc.noTickets
			h := newKernelEcho()
			srv := startServer(t, &staticRouter{def: sc}, Options{KTLS: true}, h)
			cfg := clientConfig(testCA.Pool, "a.example")
			cfg.MinVersion, cfg.MaxVersion = tc.version, tc.version
			cfg.ClientSessionCache = stdtls.NewLRUClientSessionCache(4)
			for i := 0; i < 2; i++ {
				c := dialTLS(t, srv.addr, cfg)
				echo(t, c, []byte("x"))
				echo(t, c, bytes.Repeat([]byte("y"), 100000))
				resumed := c.ConnectionState().DidResume
				c.Close()
				if resumed != (i == 1 && !tc.noTickets) {
					t.Errorf("connection %d resumed %v", i, resumed)
				}
				h.wantKernel(t, i == 0 || tc.kernel2nd || tc.noTickets)
			}
			st := srv.layer.Stats()
			t.Logf("kTLS %d, userspace %d, fallbacks %d", st.KTLS.Load(), st.Userspace.Load(), st.KTLSFallbacks.Load())
		})
	}
}

// TestVMKTLSRequestWithFinished: records that came with the client's Finished
// are opened in userspace and the kernel continues at the next sequence number.
func TestVMKTLSRequestWithFinished(t *testing.T) {
	inVM(t)
	certs(t)
	h := newKernelEcho()
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, Options{KTLS: true}, h)
	c, hc := dialHeld(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	first, second := []byte("first request"), []byte("second request")
	c.Write(first)
	c.Write(second)
	if err := hc.flush(-1); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(first)+len(second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != string(first)+string(second) {
		t.Fatalf("read %q, %v", got, err)
	}
	h.wantKernel(t, true)
	echo(t, c, []byte("through the kernel's receive side now"))
}

// TestVMKTLSCutRecord: the first read after the handshake ends inside a record
// whose rest comes later: the connection stays in userspace (or the layer read
// the rest in time); either way nothing is lost.
func TestVMKTLSCutRecord(t *testing.T) {
	inVM(t)
	certs(t)
	h := newKernelEcho()
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, Options{KTLS: true}, h)
	c, hc := dialHeld(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	msg := bytes.Repeat([]byte("cut"), 3000)
	c.Write(msg)
	hc.mu.Lock()
	cut := len(hc.buf) - 4000 // Finished and the start of the request's record
	hc.mu.Unlock()
	if err := hc.flush(cut); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := hc.flush(-1); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	echo(t, c, []byte("more"))
	st := srv.layer.Stats()
	t.Logf("kTLS %d, userspace %d, fallbacks %d", st.KTLS.Load(), st.Userspace.Load(), st.KTLSFallbacks.Load())
	if st.KTLSFallbacks.Load() != 1 {
		t.Errorf("fallbacks %d, want 1 (the record's rest came 200ms later)", st.KTLSFallbacks.Load())
	}
}

// TestVMKTLSSendfile: a 1 MiB file sent with sendfile(2) on the raw socket is
// encrypted by the kernel.
func TestVMKTLSSendfile(t *testing.T) {
	inVM(t)
	certs(t)
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*31 + i>>8)
	}
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var off int64
	send := func(c eventloop.Conn) {
		for off < int64(len(data)) {
			n, err := unix.Sendfile(c.Fd(), int(f.Fd()), &off, len(data)-int(off))
			if err == unix.EAGAIN || n == 0 && err == nil {
				c.SetTimeout(time.Millisecond) // a test's stand-in for EPOLLOUT
				return
			}
			if err != nil {
				t.Errorf("sendfile: %v", err)
				c.Close()
				return
			}
		}
	}
	h := newKernelEcho()
	h.data = func(c eventloop.Conn, b []byte) { send(c) }
	h.timeout = send
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, Options{KTLS: true}, h)
	c := dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	c.Write([]byte("send the file"))
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	h.wantKernel(t, true)
}

// TestVMKTLSLargeResponseCost is the benchmark row the host cannot give: the
// loop's CPU time per 1 MiB file response over TLS 1.3 (AES-128-GCM), with
// userspace records (the file read with pread and sealed on the loop), with
// kTLS writing from memory (the file read into pool buffers, sendfile off) and
// with kTLS and sendfile. The guest runs under TCG (no KVM): the figures are
// slow, only their ratios within one run mean something. A client in another
// process reads the responses on one connection.
func TestVMKTLSLargeResponseCost(t *testing.T) {
	inVM(t)
	certs(t)
	const size = 1 << 20
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, bytes.Repeat([]byte("0123456789abcdef"), size/16), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := serverConfig(t, leafEC)
	sc.TLS.MinVersion, sc.TLS.CipherSuites = stdtls.VersionTLS13, nil
	sc.TLS.CurvePreferences = []stdtls.CurveID{stdtls.X25519}
	modes := []struct {
		name           string
		ktls, sendfile bool
		srv            *testServer
		run            func(string, ...any)
		cpu            []time.Duration // per response, one a round
		mbps           []float64
	}{{name: "userspace records"}, {name: "kTLS, read+write", ktls: true}, {name: "kTLS, sendfile", ktls: true, sendfile: true}}
	for i := range modes {
		m := &modes[i]
		h := &funcHandler{data: func(c eventloop.Conn, b []byte) {
			c.SetSendfile(m.sendfile, 0)
			if err := c.WriteFile(int(f.Fd()), 0, size); err != nil {
				t.Errorf("%s: WriteFile: %v", m.name, err)
				c.Close()
			}
		}}
		opts := userspace
		if m.ktls {
			opts = Options{KTLS: true}
		}
		m.srv = startServer(t, &staticRouter{def: sc}, opts, h)
		m.run = clientProcess(t, m.srv.addr)
		m.run("get 2 %d", size) // warm up: buffers, page cache
	}
	// Rounds interleave the modes, so that what else the emulator's host does
	// falls on each alike; the median round is reported.
	const rounds, n = 5, 6
	for r := 0; r < rounds; r++ {
		for i := range modes {
			m := &modes[i]
			cpu0, t0 := loopCPU(t, m.srv), time.Now()
			m.run("get %d %d", n, size)
			cpu, wall := loopCPU(t, m.srv)-cpu0, time.Since(t0)
			m.cpu = append(m.cpu, cpu/n)
			m.mbps = append(m.mbps, float64(n*size)/wall.Seconds()/1e6)
		}
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	base := median(modes[0].cpu)
	for i := range modes {
		m := &modes[i]
		st := m.srv.layer.Stats()
		if m.ktls != (st.KTLS.Load() > 0) {
			t.Fatalf("%s: kTLS connections %d, userspace %d", m.name, st.KTLS.Load(), st.Userspace.Load())
		}
		med := median(m.cpu)
		slices.Sort(m.mbps)
		t.Logf("%-18s %8.0f µs of loop CPU per 1 MiB response, median of %d rounds (%.2f× userspace; rounds %v), %5.1f MB/s to one client",
			m.name, float64(med.Microseconds()), rounds, float64(med)/float64(base), m.cpu, m.mbps[len(m.mbps)/2])
	}
}

// TestVMKTLSAlert: a close_notify reaches a kTLS socket as a record the plain
// read(2) cannot return (EIO): the connection ends. The server's own close ends
// the client's reads cleanly.
func TestVMKTLSAlert(t *testing.T) {
	inVM(t)
	certs(t)
	h := newKernelEcho()
	srv := startServer(t, &staticRouter{def: serverConfig(t, leafEC)}, Options{KTLS: true}, h)
	c := dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	echo(t, c, []byte("x"))
	h.wantKernel(t, true)
	c.Close() // close_notify, then FIN
	select {
	case err := <-h.errs:
		t.Logf("OnClose after the client's close_notify: %v", err)
		if err != nil && !errors.Is(err, unix.EIO) && err != io.EOF {
			t.Errorf("OnClose error %v, want EIO (an alert record) or EOF", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no OnClose")
	}

	h.data = func(c eventloop.Conn, b []byte) { c.Write(b); c.Close() }
	c = dialTLS(t, srv.addr, clientConfig(testCA.Pool, "a.example"))
	defer c.Close()
	c.Write([]byte("last"))
	got, err := io.ReadAll(c)
	if string(got) != "last" {
		t.Fatalf("read %q, %v", got, err)
	}
	t.Logf("client's read after the server's close: %v", err)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
