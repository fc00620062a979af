package resolver

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/numaproxy/numaproxy/internal/dnstest"
)

// TestInteropMiekgServer: the client against another implementation's server
// (github.com/miekg/dns) than the package's own test server: A and AAAA answers,
// the TTL, a name moved after it, NXDOMAIN and a server failure with nginx's texts.
func TestInteropMiekgServer(t *testing.T) {
	ns := dnstest.Start(t)
	ns.Set("www.test", 1, "10.0.0.1", "fd00::1")
	ns.Fail("gone.test", dns.RcodeNameError)
	ns.Fail("bad.test", dns.RcodeServerFailure)
	l := startLoop(t)
	r := newResolver(t, l, Config{Servers: []netip.AddrPort{netip.MustParseAddrPort(ns.Addr())}})

	res := resolve(t, l, r, "WWW.test.")
	if res.err != nil || !sameSet(res.addrs, addrs("10.0.0.1", "fd00::1")) || res.addrs[0] != netip.MustParseAddr("10.0.0.1") || res.ttl > time.Second {
		t.Fatalf("%+v", res)
	}
	ns.Set("www.test", 1, "10.0.0.2")
	if res := resolve(t, l, r, "www.test"); !sameSet(res.addrs, addrs("10.0.0.1", "fd00::1")) {
		t.Errorf("within the TTL: %v", res.addrs)
	}
	time.Sleep(1100 * time.Millisecond)
	if res := resolve(t, l, r, "www.test"); res.err != nil || !sameSet(res.addrs, addrs("10.0.0.2")) {
		t.Errorf("after the TTL: %+v", res)
	}
	for name, want := range map[string]string{
		"gone.test": "gone.test could not be resolved (3: Host not found)",
		"bad.test":  "bad.test could not be resolved (2: Server failure)",
	} {
		res := resolve(t, l, r, name)
		var e *Error
		if !errors.As(res.err, &e) || e.Error() != want {
			t.Errorf("%s: %v, want %s", name, res.err, want)
		}
	}
}
