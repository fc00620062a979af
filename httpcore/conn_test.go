package httpcore

import (
	"testing"
	"unsafe"
)

// TestIdleConnSize: an idle keep-alive connection holds this struct (and the
// loop's); it stays within the 160-byte size class (proxy's
// TestIdleConnectionBytes measures the whole).
func TestIdleConnSize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 160 {
		t.Fatalf("conn is %d bytes, want at most 160 (the size class an idle connection pays)", n)
	}
}
