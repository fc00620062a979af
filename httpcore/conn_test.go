package httpcore

import (
	"testing"
	"unsafe"
)

// TestIdleConnSize: an idle keep-alive connection holds this struct (and the
// loop's); it stays within the 176-byte size class (proxy's
// TestIdleConnectionBytes measures the whole).
func TestIdleConnSize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 176 {
		t.Fatalf("conn is %d bytes, want at most 176 (the size class an idle connection pays)", n)
	}
}
