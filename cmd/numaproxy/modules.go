package main

import (
	"github.com/numaproxy/numaproxy/accesslog"
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/headers"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/rewrite"
	"github.com/numaproxy/numaproxy/tls"
	"github.com/numaproxy/numaproxy/upstream"
)

// registry lists the modules this binary is built with, like nginx's ngx_modules[].
// Each package declares its own directives (and an HTTP module its variables, phase
// handlers and filters, see httpcore.Hooks); adding a package here makes them known.
// The order is nginx's: the HTTP core first, then the modules; a filter added later
// runs earlier.
var registry = conf.MustRegistry(domains.Module, upstream.Module,
	httpcore.Module, rewrite.Module, proxy.Module, headers.Module, accesslog.Module, tls.Module)
