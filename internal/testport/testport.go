// Package testport hands tests TCP ports on 127.0.0.1 for servers they start in
// another process (numaproxy, nginx, HAProxy), which bind them a moment later.
//
// Ports come from below the kernel's ephemeral range: a port picked from inside it
// (as listening on port 0 does) may be taken in that moment by an outgoing
// connection of any test running in parallel, and the server then fails with
// EADDRINUSE. Ports are random, checked free by binding, and never handed out twice
// by one process.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is where the range starts: above the well-known and most registered
// service ports a machine may run.
const lowest = 20000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Free returns a port on 127.0.0.1 that nothing listens on now.
func Free(t testing.TB) int {
	t.Helper()
	return FreeOn(t, "127.0.0.1")
}

// FreeOn is Free for another loopback address ("127.0.0.1" or "::1").
func FreeOn(t testing.TB, host string) int {
	t.Helper()
	top := ephemeralStart()
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := lowest + rand.IntN(top-lowest)
		if handed[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		handed[p] = true
		return p
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}

// ephemeralStart is the first port of net.ipv4.ip_local_port_range (Linux's
// default 32768 when it cannot be read or leaves too little room below).
func ephemeralStart() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > lowest+1000 {
				return n
			}
		}
	}
	return 32768
}
