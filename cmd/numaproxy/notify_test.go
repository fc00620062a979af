package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/errorlog"
)

func listenNotify(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readNotify(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 512)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

// TestNotifierAbstractSocket: an abstract NOTIFY_SOCKET (@name) works, and a socket
// that systemd replaced (a daemon-reexec) is connected again.
func TestNotifierAbstractSocket(t *testing.T) {
	name := "@numaproxy-notify-test-" + strconv.Itoa(os.Getpid())
	defer func(saved string) { notifySocket = saved }(notifySocket)
	notifySocket = name
	c := listenNotify(t, name)
	n := newNotifier(errorlog.Stderr(errorlog.LevelWarn).Logger())
	if n == nil {
		t.Fatal("no notifier")
	}
	n.reloading()
	if got := readNotify(t, c); !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Fatalf("got %q", got)
	}
	n.ready()
	if got, want := readNotify(t, c), "READY=1\nMAINPID="+strconv.Itoa(os.Getpid()); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	c.Close()
	c = listenNotify(t, name)
	defer c.Close()
	n.stopping()
	if got := readNotify(t, c); got != "STOPPING=1" {
		t.Fatalf("after the socket was replaced: got %q", got)
	}
}

func TestNotifierNotUnix(t *testing.T) {
	defer func(saved string) { notifySocket = saved }(notifySocket)
	notifySocket = "vsock:2:1234"
	if n := newNotifier(errorlog.Stderr(errorlog.LevelEmerg).Logger()); n != nil {
		t.Fatal("a vsock address is not supported")
	}
	var n *notifier
	n.ready() // nil: no NOTIFY_SOCKET, nothing sent
}
