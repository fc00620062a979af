package httpcore

import "testing"

// TestReason: nginx's phrases by code; none for a code nginx has none for, out of
// the table's range included.
func TestReason(t *testing.T) {
	for code, want := range map[int]string{200: "OK", 302: "Moved Temporarily", 494: "Request Header Or Cookie Too Large",
		507: "Insufficient Storage", 299: "", 599: "", 600: "", 999: "", 0: "", -1: ""} {
		if got := reason(code); got != want {
			t.Errorf("reason(%d) = %q, want %q", code, got, want)
		}
	}
}

func BenchmarkReason(b *testing.B) {
	n := 0
	for i := range b.N {
		n += len(reason(200 + i&7))
	}
	_ = n
}
