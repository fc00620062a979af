package static_test

import (
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/numa/domains"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/static"
	"github.com/numaproxy/numaproxy/upstream"
)

// The module's directives clash with none of the binary's, so wiring it in is adding
// it to the registry.
func TestRegistersWithTheBinarysModules(t *testing.T) {
	if _, err := conf.NewRegistry(domains.Module, upstream.Module, proxy.Module, static.Module); err != nil {
		t.Fatal(err)
	}
}
