package cidr

import "unsafe"

// unsafeString views b as a string for a parse that does not keep it.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
