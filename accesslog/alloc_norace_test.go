//go:build !race

package accesslog

import "testing"

func TestLoggedRequestAllocs(t *testing.T) { testLoggedRequestAllocs(t) }
