package metrics

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs only the InVM tests in the two-node guest of integration/vm: the
// others count requests and loops of this host's one-domain layout, which the guest's
// two nodes change.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("NUMAPROXY_IN_VM") == "1" && flag.Lookup("test.run").Value.String() == "" {
		flag.Set("test.run", "InVM")
	}
	os.Exit(m.Run())
}
