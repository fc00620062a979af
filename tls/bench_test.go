package tls

import (
	stdtls "crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The echo client of the steady-state benchmarks runs in a child process (this
// test binary again), so that the benchmark's allocation count is the server's.
const (
	childAddrEnv = "NUMAPROXY_TLS_BENCH_ADDR"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(childAddrEnv); addr != "" {
		os.Exit(echoClientChild(addr))
	}
	os.Exit(m.Run())
}

// echoClientChild serves commands read on stdin, one a line, answering "ok"
// on stdout after each:
//
//	echo N SIZE                  N round trips of SIZE bytes on one connection
//	get N SIZE                   N times "GET", then SIZE bytes read, on one connection
//	hs N VERSION CURVE RESUME    N connections: handshake, 3-byte echo, close
func echoClientChild(addr string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	cfg := &stdtls.Config{ServerName: "a.example", InsecureSkipVerify: true}
	var echoConn *stdtls.Conn
	for {
		var cmd string
		var n int
		if _, err := fmt.Fscan(os.Stdin, &cmd, &n); err != nil {
			return 0
		}
		switch cmd {
		case "echo":
			var size int
			fmt.Fscan(os.Stdin, &size)
			if echoConn == nil {
				c, err := stdtls.Dial("tcp", addr, cfg)
				if err != nil {
					return fail(err)
				}
				echoConn = c
			}
			msg, buf := make([]byte, size), make([]byte, size)
			for i := 0; i < n; i++ {
				if _, err := echoConn.Write(msg); err != nil {
					return fail(err)
				}
				if _, err := io.ReadFull(echoConn, buf); err != nil {
					return fail(err)
				}
			}
		case "get":
			var size int
			fmt.Fscan(os.Stdin, &size)
			c, err := stdtls.Dial("tcp", addr, cfg)
			if err != nil {
				return fail(err)
			}
			buf := make([]byte, size)
			for i := 0; i < n; i++ {
				if _, err := c.Write([]byte("GET")); err != nil {
					return fail(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					return fail(err)
				}
			}
			c.Close()
		case "hs":
			var version, curve, resume int
			fmt.Fscan(os.Stdin, &version, &curve, &resume)
			hcfg := cfg.Clone()
			hcfg.MinVersion, hcfg.MaxVersion = uint16(version), uint16(version)
			if curve != 0 {
				hcfg.CurvePreferences = []stdtls.CurveID{stdtls.CurveID(curve)}
			}
			if resume != 0 {
				hcfg.ClientSessionCache = stdtls.NewLRUClientSessionCache(1)
			}
			buf := make([]byte, 3)
			for i := 0; i < n; i++ {
				c, err := stdtls.Dial("tcp", addr, hcfg)
				if err != nil {
					return fail(err)
				}
				c.Write([]byte("GET"))
				if _, err := io.ReadFull(c, buf); err != nil {
					return fail(err)
				}
				if resume != 0 && i > 0 && !c.ConnectionState().DidResume {
					return fail(fmt.Errorf("handshake %d did not resume", i))
				}
				c.Close()
			}
		}
		fmt.Println("ok")
	}
}

// clientProcess starts the child client against addr; run sends it a command
// and waits for it to finish.
func clientProcess(tb testing.TB, addr string) (run func(format string, args ...any)) {
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childAddrEnv+"="+addr)
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); child.Wait() })
	return func(format string, args ...any) {
		fmt.Fprintf(stdin, format+"\n", args...)
		var ok string
		if _, err := fmt.Fscan(stdout, &ok); err != nil || ok != "ok" {
			tb.Fatalf("client: %q %v", ok, err)
		}
	}
}

// loopCPU is the loop thread's CPU time so far (schedstat: ns on CPU).
func loopCPU(tb testing.TB, srv *testServer) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", srv.loop.Tid()))
	if err != nil {
		tb.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ns)
}

// BenchmarkUserspaceEcho: records opened and sealed by crypto/tls on the loop;
// the client is another process. allocs/op is the server's per round trip.
func BenchmarkUserspaceEcho(b *testing.B) {
	certs(b)
	srv := startServer(b, &staticRouter{def: serverConfig(b, leafEC)}, userspace, echoHandler())
	run := clientProcess(b, srv.addr)
	for _, size := range []int{100, 1 << 10, 16 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			run("echo 200 %d", size) // warm up: buffers grown, records sized
			b.ReportAllocs()
			b.SetBytes(int64(2 * size))
			cpu0 := loopCPU(b, srv)
			b.ResetTimer()
			run("echo %d %d", b.N, size)
			b.StopTimer()
			b.ReportMetric(float64(loopCPU(b, srv)-cpu0)/float64(b.N)/1e3, "loop-µs/op")
		})
	}
}

// BenchmarkHandshake: full and resumed handshakes by a client in another
// process (handshake, a 3-byte echo, close); loop-µs/handshake is the loop
// thread's CPU time per connection, the whole connection included.
func BenchmarkHandshake(b *testing.B) {
	certs(b)
	x25519 := int(stdtls.X25519)
	for _, tc := range []struct {
		name   string
		rsa    bool
		ver    uint16
		curve  int
		resume bool
	}{
		{"ECDSA/TLS1.3/X25519/full", false, stdtls.VersionTLS13, x25519, false},
		{"ECDSA/TLS1.3/X25519/resumed", false, stdtls.VersionTLS13, x25519, true},
		{"ECDSA/TLS1.3/X25519MLKEM768/full", false, stdtls.VersionTLS13, 0, false},
		{"ECDSA/TLS1.2/X25519/full", false, stdtls.VersionTLS12, x25519, false},
		{"RSA/TLS1.3/X25519/full", true, stdtls.VersionTLS13, x25519, false},
		{"RSA/TLS1.3/X25519/resumed", true, stdtls.VersionTLS13, x25519, true},
		{"RSA/TLS1.2/X25519/full", true, stdtls.VersionTLS12, x25519, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			leaf := leafEC
			if tc.rsa {
				leaf = leafRSA
			}
			srv := startServer(b, &staticRouter{def: serverConfig(b, leaf)}, userspace, echoHandler())
			run := clientProcess(b, srv.addr)
			resume := 0
			if tc.resume {
				resume = 1
			}
			run("hs 20 %d %d %d", tc.ver, tc.curve, resume)
			b.ReportAllocs()
			cpu0 := loopCPU(b, srv)
			b.ResetTimer()
			run("hs %d %d %d %d", b.N, tc.ver, tc.curve, resume)
			b.StopTimer()
			b.ReportMetric(float64(loopCPU(b, srv)-cpu0)/float64(b.N)/1e3, "loop-µs/handshake")
		})
	}
}

// BenchmarkEchoDuringRSAHandshakes measures what RSA handshakes computed inline
// do to the other connections of the loop: the round-trip latency of an
// established connection while other clients run full RSA-2048 handshakes back
// to back, against the same without them.
func BenchmarkEchoDuringRSAHandshakes(b *testing.B) {
	certs(b)
	for _, load := range []int{0, 4} {
		b.Run(fmt.Sprintf("handshakers=%d", load), func(b *testing.B) {
			srv := startServer(b, &staticRouter{def: serverConfig(b, leafRSA)}, userspace, echoHandler())
			cfg := clientConfig(testCA.Pool, "a.example")
			cfg.MinVersion, cfg.CurvePreferences = stdtls.VersionTLS13, []stdtls.CurveID{stdtls.X25519}
			c := dialTLS(b, srv.addr, cfg)
			defer c.Close()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var handshakes atomic.Int64
			for i := 0; i < load; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						raw, err := net.Dial("tcp", srv.addr)
						if err != nil {
							return
						}
						hc := stdtls.Client(raw, cfg)
						if hc.Handshake() == nil {
							handshakes.Add(1)
						}
						hc.Close()
					}
				}()
			}
			time.Sleep(50 * time.Millisecond)
			lat := make([]time.Duration, 0, b.N)
			buf := make([]byte, 3)
			b.ResetTimer()
			t0 := time.Now()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				c.Write([]byte("GET"))
				io.ReadFull(c, buf)
				lat = append(lat, time.Since(start))
				time.Sleep(200 * time.Microsecond) // sample, do not saturate
			}
			elapsed := time.Since(t0)
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e3 }
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)-1])/1e3, "max-µs")
			b.ReportMetric(float64(handshakes.Load())/elapsed.Seconds(), "handshakes/s")
		})
	}
}
