package main

import (
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/upstream"
)

// registry lists the modules this binary is built with, like nginx's ngx_modules[].
// Each package declares its own directives; adding a package here makes them known.
var registry = conf.MustRegistry(domains.Module, upstream.Module, httpcore.Module, proxy.Module)
