package main

import "github.com/numaproxy/numaproxy/conf"

// registry lists the modules this binary is built with, like nginx's ngx_modules[].
// Each package declares its own directives; adding a package here makes them known.
var registry = conf.MustRegistry()
