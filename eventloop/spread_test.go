package eventloop

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa"
)

func TestConnectionsSpreadOverLoops(t *testing.T) {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpus := allowed.CPUs()
	if len(cpus) < 2 {
		t.Skip("needs 2 CPUs")
	}
	var mu sync.Mutex
	perLoop := map[int]int{}
	incoming := map[string]int{} // client address -> SO_INCOMING_CPU seen by the server
	h := &funcHandler{
		open: func(c Conn) {
			cpu, err := unix.GetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
			mu.Lock()
			perLoop[c.Loop().CPU()]++
			if err == nil {
				incoming[c.RemoteAddr().String()] = cpu
			}
			mu.Unlock()
		},
		data: func(c Conn, b []byte) { _, _ = c.Write(b) },
	}
	cfg := Config{Handler: h}
	cfg.Logger, _ = newLogger()
	g, err := NewGroup(cpus, cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := g.Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Stop(); waitDone(t, g.Done()) }()

	// Clients on threads pinned to each CPU in turn: on loopback the SYN is
	// processed on the client's CPU, which SO_INCOMING_CPU reports.
	const perCPU = 100
	clientCPU := map[string]int{}
	for _, cpu := range cpus {
		addrs := make(chan []string, 1)
		go func() {
			runtime.LockOSThread() // exits locked: the pinned thread dies with it
			if err := numa.PinThread(cpu); err != nil {
				t.Error(err)
				addrs <- nil
				return
			}
			var out []string
			for range perCPU {
				c := dial(t, addr.String())
				if roundTrip(t, c, "x") != "x" {
					t.Error("echo")
				}
				out = append(out, c.LocalAddr().String())
				_ = c.Close()
			}
			addrs <- out
		}()
		for _, a := range recv(t, addrs) {
			clientCPU[a] = cpu
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, cpu := range cpus {
		if perLoop[cpu] == 0 {
			t.Errorf("loop on cpu %d got no connection: %v", cpu, perLoop)
		}
	}
	mismatch := 0
	for a, cpu := range clientCPU {
		if incoming[a] != cpu {
			mismatch++
		}
	}
	if mismatch > 0 {
		t.Errorf("%d of %d connections had SO_INCOMING_CPU != client cpu", mismatch, len(clientCPU))
	}
	t.Logf("connections per loop cpu: %v", perLoop)
}
