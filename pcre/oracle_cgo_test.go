//go:build cgo

package pcre

import (
	"testing"

	"github.com/numaproxy/numaproxy/pcre/internal/pcre2"
)

// oracle compiles with the system's PCRE2, the library nginx links; tests skip the
// comparison when it is missing.
func oracle(t testing.TB, pattern string, caseless bool) (oracleCode, error, bool) {
	if err := pcre2.Load(); err != nil {
		return nil, nil, false
	}
	c, err := pcre2.Compile(pattern, caseless)
	if err != nil {
		return nil, err, true
	}
	return c, nil, true
}
