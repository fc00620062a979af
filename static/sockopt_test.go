package static

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/internal/testport"
)

// serverFd finds, among this process's descriptors, the server side of the client
// connection c (the loop runs in the test's process).
func serverFd(t *testing.T, c net.Conn) int {
	t.Helper()
	// The loop accepts the connection in its own time: look until it has.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if fd := findServerFd(t, c); fd >= 0 {
			return fd
		}
	}
	t.Fatal("no server-side descriptor for the connection")
	return -1
}

// findServerFd is one look through /proc/self/fd for serverFd; -1 if none.
func findServerFd(t *testing.T, c net.Conn) int {
	local := c.LocalAddr().(*net.TCPAddr)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sa, err := unix.Getpeername(fd)
		if err != nil {
			continue
		}
		if in4, ok := sa.(*unix.SockaddrInet4); ok && in4.Port == local.Port && net.IP(in4.Addr[:]).Equal(local.IP) {
			return fd
		}
	}
	return -1
}

// TestTCPOptions: tcp_nodelay off clears TCP_NODELAY before the response, on sets
// it back; tcp_nopush leaves no TCP_CORK behind once a file went out with
// sendfile.
func TestTCPOptions(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 100<<10)
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(testport.Free(t))
	startWorker(t, addr, `
  server {
    listen `+addr+`;
    root `+dir+`;
    location / { sendfile on; tcp_nopush on; }
    location /nd/ { alias `+dir+`/; tcp_nodelay off; }
  }`)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := &keepAliveConn{c: c, buf: make([]byte, 256<<10)}
	get := func(path string) {
		t.Helper()
		if st := k.roundTrip(t, []byte("GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")); st != 200 {
			t.Fatalf("%s: %d", path, st)
		}
	}
	fd := serverFd(t, c)
	opt := func(name int) int {
		v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	get("/big.bin")
	if opt(unix.TCP_CORK) != 0 || opt(unix.TCP_NODELAY) == 0 {
		t.Errorf("after a file with tcp_nopush: TCP_CORK %d, TCP_NODELAY %d", opt(unix.TCP_CORK), opt(unix.TCP_NODELAY))
	}
	get("/nd/big.bin")
	if opt(unix.TCP_NODELAY) != 0 {
		t.Error("tcp_nodelay off: TCP_NODELAY still set")
	}
	get("/big.bin")
	if opt(unix.TCP_NODELAY) == 0 {
		t.Error("tcp_nodelay on after off: TCP_NODELAY not set again")
	}
}
