package main

import (
	"github.com/numaproxy/numaproxy/access"
	"github.com/numaproxy/numaproxy/accesslog"
	"github.com/numaproxy/numaproxy/authbasic"
	"github.com/numaproxy/numaproxy/authrequest"
	"github.com/numaproxy/numaproxy/compress"
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/geo"
	"github.com/numaproxy/numaproxy/headers"
	"github.com/numaproxy/numaproxy/healthcheck"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/limit"
	"github.com/numaproxy/numaproxy/metrics"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/proxyproto"
	"github.com/numaproxy/numaproxy/realip"
	"github.com/numaproxy/numaproxy/resolver"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/splitclients"
	"github.com/numaproxy/numaproxy/static"
	"github.com/numaproxy/numaproxy/tls"
	"github.com/numaproxy/numaproxy/upstream"
	"github.com/numaproxy/numaproxy/varmap"
)

// registry lists the modules this binary is built with, like nginx's ngx_modules[].
// Each package declares its own directives (and an HTTP module its variables, phase
// handlers and filters, see httpcore.Hooks); adding a package here makes them known.
// The order is nginx's: the HTTP core first, then the modules; a filter added later
// runs earlier (static's expires before headers' add_header, as nginx's headers
// filter).
var registry = conf.MustRegistry(domains.Module, upstream.Module,
	httpcore.Module, resolver.Module, realip.Module, rewrite.Module, access.Module, authbasic.Module,
	authrequest.Module, limit.Module, proxy.Module, healthcheck.Module, compress.Module, headers.Module,
	static.Module, accesslog.Module, tls.Module, proxyproto.Module, varmap.Module, geo.Module,
	splitclients.Module, metrics.Module)
