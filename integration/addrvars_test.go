package integration

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAddressVariablesLikeNginx: $remote_addr, $server_addr, $server_port and
// $remote_port on IPv4 and IPv6 listeners, bound or wildcard, as nginx gives them (connections keep
// their addresses packed). (Not here: listen ... ipv6only=off and unix-domain
// listeners, which numaproxy refuses.)
func TestAddressVariablesLikeNginx(t *testing.T) {
	type lst struct{ listen, dialNet, dialAddr string }
	mk := func() []lst {
		p4, p6, w4, w6 := freePort(t), freePort(t), freePort(t), freePort(t)
		return []lst{
			{"127.0.0.1:" + strconv.Itoa(p4), "tcp", "127.0.0.1:" + strconv.Itoa(p4)},
			{"[::1]:" + strconv.Itoa(p6), "tcp6", "[::1]:" + strconv.Itoa(p6)},
			// Wildcards: the local address comes from getsockname.
			{"*:" + strconv.Itoa(w4), "tcp", "127.0.0.1:" + strconv.Itoa(w4)},
			{"[::]:" + strconv.Itoa(w6), "tcp6", "[::1]:" + strconv.Itoa(w6)},
		}
	}
	conf := func(ls []lst) string {
		var sb strings.Builder
		sb.WriteString("server {\n")
		for _, l := range ls {
			sb.WriteString("listen " + l.listen + ";\n")
		}
		sb.WriteString(`location / { return 200 "ra=$remote_addr sa=$server_addr sp=$server_port rpset=${remote_port}x"; } }`)
		return sb.String()
	}
	np, ng := mk(), mk()
	startHTTP(t, conf(np), np[0].listen)
	startNginx(t, conf(ng), ng[0].listen)
	get := func(l lst) string {
		var c net.Conn
		var err error
		for range 50 {
			if c, err = net.DialTimeout(l.dialNet, l.dialAddr, ioTimeout); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(ioTimeout))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		b, _ := io.ReadAll(c)
		s := string(b)
		if i := strings.Index(s, "\r\n\r\n"); i >= 0 {
			s = s[i+4:]
		}
		if _, port, ok := strings.Cut(c.LocalAddr().String(), "]:"); ok {
			s = strings.Replace(s, "rpset="+port+"x", "rpset=PORTx", 1)
		} else if _, port, ok := strings.Cut(c.LocalAddr().String(), ":"); ok {
			s = strings.Replace(s, "rpset="+port+"x", "rpset=PORTx", 1)
		}
		return s
	}
	for i := range np {
		a, b := get(np[i]), get(ng[i])
		// The ports differ between the two servers: mask them.
		for _, l := range []lst{np[i], ng[i]} {
			if _, port, ok := strings.Cut(l.dialAddr, "]:"); ok {
				a, b = strings.ReplaceAll(a, "sp="+port, "sp=P"), strings.ReplaceAll(b, "sp="+port, "sp=P")
			} else if _, port, ok := strings.Cut(l.dialAddr, ":"); ok {
				a, b = strings.ReplaceAll(a, "sp="+port, "sp=P"), strings.ReplaceAll(b, "sp="+port, "sp=P")
			}
		}
		t.Logf("%s: numaproxy %q nginx %q", np[i].listen, a, b)
		if a != b {
			t.Errorf("%s: numaproxy %q, nginx %q", np[i].listen, a, b)
		}
	}
}
