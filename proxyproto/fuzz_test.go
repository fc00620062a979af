package proxyproto

import (
	"bytes"
	"testing"
)

// FuzzParse checks the parser on any input: no panic, a length within the
// input, every proper prefix of a header incomplete, the same header from the
// header's bytes alone, and a header whose addresses, written back, read back.
// The table of TestParse seeds it, so `go test` runs those.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases() {
		f.Add(tc.in, 0)
	}
	f.Add([]byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), 40)
	f.Add(v2(0x21, 0x11, inet4Addrs, tlv(TypeALPN, "h2")), 30)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		max %= 70000
		h, n, err := Parse(in, max)
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with n %d", err, n)
			}
			if err == ErrIncomplete && len(in) >= MaxV1Header && in[0] == 'P' {
				t.Fatalf("v1 incomplete after %d bytes", len(in))
			}
			return
		}
		if n <= 0 || n > len(in) {
			t.Fatalf("n %d of %d", n, len(in))
		}
		if h.Version == 1 && n > MaxV1Header || h.Version == 2 && max > 0 && n > max {
			t.Fatalf("v%d header of %d bytes (max %d)", h.Version, n, max)
		}
		for k := 0; k < n; k++ {
			if _, _, err := Parse(in[:k], max); err != ErrIncomplete {
				t.Fatalf("prefix of %d of %d: %v", k, n, err)
			}
		}
		h2, n2, err := Parse(in[:n], max)
		if err != nil || n2 != n || h2.Source != h.Source || h2.Destination != h.Destination ||
			!bytes.Equal(h2.TLVs(), h.TLVs()) || h2.HasAddrs() != h.HasAddrs() {
			t.Fatalf("header alone: %v %d", err, n2)
		}
		c := h.Clone()
		if !bytes.Equal(c.TLVs(), h.TLVs()) || !bytes.Equal(c.UnixSource(), h.UnixSource()) ||
			!bytes.Equal(c.UnixDestination(), h.UnixDestination()) {
			t.Fatal("clone differs")
		}
		for area := h.TLVs(); len(area) > 0; {
			_, _, rest, err := NextTLV(area)
			if err != nil {
				break
			}
			if len(rest) >= len(area) {
				t.Fatal("NextTLV did not advance")
			}
			area = rest
		}
		if h.HasAddrs() {
			w, _, err := Parse(AppendV1(nil, h.Source, h.Destination), 0)
			if err != nil || w.Source != h.Source || w.Destination != h.Destination {
				t.Fatalf("v1 round trip of %v %v: %v %v %v", h.Source, h.Destination, w.Source, w.Destination, err)
			}
			b, _ := AppendV2(nil, h.Source, h.Destination, nil)
			w, _, err = Parse(b, 0)
			if err != nil || w.Source != h.Source || w.Destination != h.Destination {
				t.Fatalf("v2 round trip of %v %v: %v", h.Source, h.Destination, err)
			}
		}
	})
}
