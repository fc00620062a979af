package proxyproto

import (
	"bytes"
	"net/netip"
	"testing"
)

func TestAppendV1(t *testing.T) {
	for _, c := range []struct {
		src, dst netip.AddrPort
		want     string
	}{
		{ap("192.0.2.1:56324"), ap("198.51.100.2:443"), "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"},
		{ap("[2001:db8::1]:1"), ap("[2001:db8::2]:65535"), "PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n"},
		{ap("192.0.2.1:1"), ap("[2001:db8::2]:2"), "PROXY TCP6 ::ffff:192.0.2.1 2001:db8::2 1 2\r\n"},
		{ap("[fe80::1%eth0]:1"), ap("[fe80::2]:2"), "PROXY TCP6 fe80::1 fe80::2 1 2\r\n"},
		{netip.AddrPort{}, ap("192.0.2.1:1"), "PROXY UNKNOWN\r\n"},
	} {
		got := AppendV1([]byte("x"), c.src, c.dst)
		if string(got) != "x"+c.want {
			t.Errorf("%v %v: %q, want %q", c.src, c.dst, got, c.want)
		}
	}
}

func TestAppendV2(t *testing.T) {
	got, err := AppendV2(nil, ap("192.0.2.1:56324"), ap("198.51.100.2:443"), nil)
	if err != nil || !bytes.Equal(got, v2(0x21, 0x11, inet4Addrs)) {
		t.Fatalf("tcp4: %x %v", got, err)
	}
	area, _ := AppendTLV(nil, TypeALPN, []byte("h2"))
	got, err = AppendV2(nil, ap("[2001:db8::1]:1"), ap("[2001:db8::2]:65535"), area)
	if err != nil || !bytes.Equal(got, v2(0x21, 0x21, inet6Addrs, tlv(TypeALPN, "h2"))) {
		t.Fatalf("tcp6: %x %v", got, err)
	}
	got, _ = AppendV2(nil, netip.AddrPort{}, ap("192.0.2.1:1"), nil)
	if !bytes.Equal(got, v2(0x21, 0x00)) {
		t.Fatalf("unspec: %x", got)
	}
	got, _ = AppendV2Local(nil, nil)
	if !bytes.Equal(got, v2(0x20, 0x00)) {
		t.Fatalf("local: %x", got)
	}
	if _, err := AppendV2(nil, ap("[::1]:1"), ap("[::1]:2"), make([]byte, 0xffff-35)); err != ErrTLVsTooLong {
		t.Fatalf("oversize TLVs: %v", err)
	}
	if _, err := AppendTLV(nil, 1, make([]byte, 0x10000)); err != ErrTLVsTooLong {
		t.Fatalf("oversize TLV: %v", err)
	}
}

// TestAppendRoundTrip: what is written parses back to the same addresses.
func TestAppendRoundTrip(t *testing.T) {
	pairs := [][2]netip.AddrPort{
		{ap("192.0.2.1:56324"), ap("198.51.100.2:443")},
		{ap("[2001:db8::1]:1"), ap("[2001:db8::2]:65535")},
		{ap("[::ffff:192.0.2.1]:0"), ap("[::]:80")},
	}
	for _, p := range pairs {
		h, n, err := Parse(AppendV1(nil, p[0], p[1]), 0)
		if err != nil || h.Source != p[0] || h.Destination != p[1] || n == 0 {
			t.Errorf("v1 %v: %v %v %v", p, h.Source, h.Destination, err)
		}
		b, _ := AppendV2(nil, p[0], p[1], nil)
		h, _, err = Parse(b, 0)
		if err != nil || h.Source != p[0] || h.Destination != p[1] {
			t.Errorf("v2 %v: %v %v %v", p, h.Source, h.Destination, err)
		}
	}
}

func TestAppendAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	src, dst := ap("[2001:db8::1]:1"), ap("[2001:db8::2]:65535")
	area, _ := AppendTLV(nil, TypeAuthority, []byte("example.com"))
	if a := testing.AllocsPerRun(100, func() {
		buf = AppendV1(buf[:0], src, dst)
		buf, _ = AppendV2(buf[:0], src, dst, area)
		buf, _ = AppendV2Local(buf[:0], nil)
		buf, _ = AppendTLV(buf[:0], TypeALPN, []byte("h2"))
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}
