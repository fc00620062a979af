package steering

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
)

// TestRefuseKeepsQueued: with Refuse on, new connections are refused at once while
// the connections already in the accept queue stay and can be accepted; off again,
// connections are taken as before.
func TestRefuseKeepsQueued(t *testing.T) {
	needCPUs(t)
	s, err := Load(simulatedConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := listen(t, 0)
	if err := s.AddListener(0, l.fd); err != nil {
		t.Fatal(err)
	}
	if err := s.Attach(l.fd); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(l.port)
	var queued []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		queued = append(queued, c)
	}
	if err := s.Refuse(true); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a new connection while refusing: %v, want ECONNREFUSED", err)
	}
	if got := acceptN(t, 3, l); len(got[0]) != 3 {
		t.Fatalf("accepted %d of the 3 queued connections", len(got[0]))
	}
	if err := s.Refuse(false); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("after Refuse(false): %v", err)
	}
	c.Close()
}
