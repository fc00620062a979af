package integration

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// listenerOptions reads the socket options of a listening socket of pid bound to
// addr, through a copy of its descriptor (pidfd_getfd), and its backlog from ss.
func listenerOptions(t *testing.T, pid int, addr string) map[string]int {
	t.Helper()
	want := netip.MustParseAddrPort(addr)
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	defer unix.Close(pidfd)
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if !strings.HasPrefix(target, "socket:") {
			continue
		}
		n, _ := strconv.Atoi(e.Name())
		fd, err := unix.PidfdGetfd(pidfd, n, 0)
		if err != nil {
			continue
		}
		sa, err := unix.Getsockname(fd)
		in4, ok := sa.(*unix.SockaddrInet4)
		listening, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		if err != nil || !ok || netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)) != want || listening != 1 {
			unix.Close(fd)
			continue
		}
		opts := map[string]int{}
		for name, o := range map[string][2]int{
			"rcvbuf": {unix.SOL_SOCKET, unix.SO_RCVBUF}, "sndbuf": {unix.SOL_SOCKET, unix.SO_SNDBUF},
			"keepalive": {unix.SOL_SOCKET, unix.SO_KEEPALIVE}, "keepidle": {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			"keepintvl": {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL}, "keepcnt": {unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
			"defer_accept": {unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT}, "fastopen": {unix.IPPROTO_TCP, unix.TCP_FASTOPEN},
		} {
			v, err := unix.GetsockoptInt(fd, o[0], o[1])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			opts[name] = v
		}
		unix.Close(fd)
		out, err := exec.Command("ss", "-Hltn", "src", addr).Output()
		if err != nil {
			t.Fatalf("ss: %v", err)
		}
		if f := strings.Fields(string(out)); len(f) > 2 {
			opts["backlog"], _ = strconv.Atoi(f[2]) // Send-Q of a listener is its backlog
		}
		return opts
	}
	t.Fatalf("no listening socket of %d on %s", pid, addr)
	return nil
}

// TestListenSocketOptions: listen's socket parameters reach the listening sockets as
// nginx sets them (compared option by option with nginx on the same line), and a
// reload changes them on the sockets it keeps.
func TestListenSocketOptions(t *testing.T) {
	params := "backlog=64 rcvbuf=64k sndbuf=128k so_keepalive=30s:10s:3 deferred fastopen=16 bind"
	body := func(addr, params string) string {
		return "client_header_timeout 20s;\nserver { listen " + addr + " " + params + "; location / { return 200 ok; } }"
	}
	addr := addrFor(t)
	in := startHTTP(t, body(addr, params), addr)
	got := listenerOptions(t, in.cmd.Process.Pid, addr)

	ngAddr := addrFor(t)
	ng := startNginx(t, body(ngAddr, params), ngAddr)
	want := listenerOptions(t, ng.cmd.Process.Pid, ngAddr)
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s: numaproxy %d, nginx %d", name, got[name], v)
		}
	}
	t.Logf("numaproxy %v\nnginx     %v", got, want)
	if got["backlog"] != 64 || got["keepidle"] != 30 || got["fastopen"] != 16 || got["defer_accept"] == 0 {
		t.Errorf("options not set: %v", got)
	}

	// A reload applies new values to the sockets the address keeps, and turns
	// deferred off when the new line has none.
	if err := os.WriteFile(in.path("conf/numaproxy.conf"), []byte("error_log logs/error.log info;\nworker_processes 1;\nevents { }\nhttp {\n"+
		body(addr, "backlog=32 rcvbuf=32k")+"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.signal("reload")
	in.waitLog("configuration reloaded")
	after := listenerOptions(t, in.cmd.Process.Pid, addr)
	if after["backlog"] != 32 || after["rcvbuf"] != 2*32<<10 || after["defer_accept"] != 0 {
		t.Errorf("after reload: %v", after)
	}
	if raw, err := roundTripRaw(t, addr, "GET / HTTP/1.0\r\n\r\n"); err != nil || !strings.HasSuffix(raw, "ok") {
		t.Fatalf("%q %v", raw, err)
	}
}

// TestListenParametersRefused: FreeBSD's listen parameters and malformed values are
// errors naming file:line.
func TestListenParametersRefused(t *testing.T) {
	for _, tc := range []struct{ param, want string }{
		{"setfib=1", `the "setfib" parameter of "listen" is FreeBSD's`},
		{"accept_filter=httpready", `the "accept_filter" parameter of "listen" is FreeBSD's`},
		{"so_keepalive=maybe", `invalid so_keepalive value: "maybe"`},
		{"rcvbuf=lots", `invalid rcvbuf "lots"`},
		{"fastopen=0", `invalid fastopen "0"`},
	} {
		dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "events { }\nhttp {\n server { listen 127.0.0.1:8080 " + tc.param + "; }\n}\n"})
		r := run(t, "-p", dir, "-t")
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "numaproxy.conf:3") {
			t.Errorf("%s: code %d stderr %q", tc.param, r.code, r.stderr)
		}
	}
}
