package server

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/proxyproto"
	"github.com/numaproxy/numaproxy/tls"
)

// tlsRouter tells the loops' TLS layers which addresses speak TLS and with which
// server's configuration: the address's default server's at first, then the
// server the client names (SNI), by the same server_name rules as Host. Like the
// worker, it keeps the previous snapshot for the addresses a reload removed,
// whose listeners still empty their accept queues. It is read-only.
type tlsRouter struct {
	snap    *httpcore.Snapshot
	configs map[*conf.Server]*tls.ServerConfig
	prev    *tlsRouter
}

func newTLSRouter(snap *httpcore.Snapshot, prev *tlsRouter) *tlsRouter {
	r := &tlsRouter{snap: snap, configs: map[*conf.Server]*tls.ServerConfig{}}
	if prev != nil {
		r.prev = &tlsRouter{snap: prev.snap, configs: prev.configs}
	}
	if snap.Config.HTTP == nil {
		return r
	}
	for _, srv := range snap.Config.HTTP.Servers {
		tc := tls.ConfOf(srv)
		if tc == nil || tc.Built == nil {
			continue
		}
		sc := *tc.Built
		// nginx times the handshake with the default server's client_header_timeout.
		sc.HandshakeTimeout = httpcore.ServerConf(srv).ClientHeaderTimeout
		r.configs[srv] = &sc
	}
	return r
}

// routesFor is the router whose snapshot serves local, as Worker.addrServers.
func (r *tlsRouter) routesFor(local netip.AddrPort) *tlsRouter {
	if r.snap.Routes.Addr(local) == nil && r.prev != nil && r.prev.snap.Routes.Addr(local) != nil {
		return r.prev
	}
	return r
}

// Default implements tls.Router.
func (r *tlsRouter) Default(local netip.AddrPort) *tls.ServerConfig {
	r = r.routesFor(local)
	a := r.snap.Routes.Addr(local)
	if a == nil || !a.SSL {
		return nil
	}
	return r.configs[a.Default]
}

// ByName implements tls.Router.
func (r *tlsRouter) ByName(local netip.AddrPort, name string) *tls.ServerConfig {
	r = r.routesFor(local)
	a := r.snap.Routes.Addr(local)
	if a == nil {
		return nil
	}
	return r.configs[a.Server([]byte(name))]
}

// usesTLS reports whether some address of snap speaks TLS.
func usesTLS(snap *httpcore.Snapshot) bool {
	for _, a := range snap.Routes.Addrs() {
		if a.SSL {
			return true
		}
	}
	return false
}

// logTLSStats writes the loops' handshake counters, summed, to the error log.
func logTLSStats(log *slog.Logger, loops []*tls.Stats) {
	var ktls, user, fallbacks, resumed, failures, timeouts uint64
	for _, st := range loops {
		ktls, user, fallbacks = ktls+st.KTLS.Load(), user+st.Userspace.Load(), fallbacks+st.KTLSFallbacks.Load()
		resumed, failures, timeouts = resumed+st.Resumed.Load(), failures+st.Failures.Load(), timeouts+st.Timeouts.Load()
	}
	if ktls+user+failures == 0 {
		return
	}
	log.Log(nil, errorlog.LevelNotice, fmt.Sprintf("TLS handshakes: %d kTLS, %d userspace (%d kTLS-capable kept in userspace), %d resumed, %d failed (%d timed out)",
		ktls, user, fallbacks, resumed, failures, timeouts))
}

// ppGate tells a loop's PROXY protocol layer which addresses expect a header and
// how long it may take, by the loop's current routes (set on the loop with its
// TLS router).
type ppGate struct{ r *tlsRouter }

func (g *ppGate) expect(local netip.AddrPort) bool {
	a := g.r.routesFor(local).snap.Routes.Addr(local)
	return a != nil && a.ProxyProtocol
}

func (g *ppGate) timeout(local netip.AddrPort) time.Duration {
	if a := g.r.routesFor(local).snap.Routes.Addr(local); a != nil {
		return proxyproto.TimeoutOf(a.Default)
	}
	return 0
}
