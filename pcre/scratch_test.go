//go:build cgo

package pcre

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/pcre/internal/pcre2"
)

func TestScratch(t *testing.T) {
	for _, line := range strings.Split(os.Getenv("PATS"), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, "\t", 2)
		c, err := pcre2.Compile(parts[0], false)
		if err != nil {
			t.Logf("%q: PCRE2 error %v", parts[0], err)
			continue
		}
		if len(parts) > 1 && strings.HasPrefix(parts[1], `"`) {
			parts[1], _ = strconv.Unquote(parts[1])
		}
		if len(parts) > 1 {
			m, _ := c.Match([]byte(parts[1]))
			t.Logf("%q on %q: %v", parts[0], parts[1], m)
		} else {
			t.Logf("%q: ok, %d captures", parts[0], c.NumCaptures())
		}
	}
}
