package proxyproto

import (
	"errors"
	"net/netip"
	"strconv"
)

// The sending side, for "proxy_protocol on" towards upstreams: headers are
// appended to the caller's buffer, without allocating when it has room.

// ErrTLVsTooLong: the TLV area does not fit a version 2 header's 16-bit length.
var ErrTLVsTooLong = errors.New("proxyproto: TLVs longer than a version 2 header holds")

// pair returns the addresses to send as one family: both IPv4, or both IPv6
// with an IPv4 one mapped (as HAProxy does for mixed families); ok is false
// when either is not a valid address.
func pair(src, dst netip.AddrPort) (s, d netip.Addr, f Family, ok bool) {
	s, d = src.Addr(), dst.Addr()
	if !s.IsValid() || !d.IsValid() {
		return s, d, Unspec, false
	}
	s, d = s.WithZone(""), d.WithZone("")
	if s.Is4() && d.Is4() {
		return s, d, Inet, true
	}
	if s.Is4() {
		s = netip.AddrFrom16(s.As16())
	}
	if d.Is4() {
		d = netip.AddrFrom16(d.As16())
	}
	return s, d, Inet6, true
}

// AppendV1 appends a version 1 header for a connection from src to dst:
// "PROXY TCP4 ..." or "PROXY TCP6 ...", or "PROXY UNKNOWN\r\n" when either
// address is not valid.
func AppendV1(b []byte, src, dst netip.AddrPort) []byte {
	s, d, f, ok := pair(src, dst)
	if !ok {
		return append(b, "PROXY UNKNOWN\r\n"...)
	}
	if f == Inet {
		b = append(b, "PROXY TCP4 "...)
	} else {
		b = append(b, "PROXY TCP6 "...)
	}
	b = s.AppendTo(b)
	b = append(b, ' ')
	b = d.AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(src.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(dst.Port()), 10)
	return append(b, '\r', '\n')
}

// AppendV2 appends a version 2 PROXY header for a connection from src to dst
// (TCP over IPv4 or IPv6; the PROXY command with AF_UNSPEC when either address
// is not valid) followed by tlvs, a TLV area built with AppendTLV.
func AppendV2(b []byte, src, dst netip.AddrPort, tlvs []byte) ([]byte, error) {
	s, d, f, ok := pair(src, dst)
	alen := 0
	switch {
	case !ok:
	case f == Inet:
		alen = v2Inet4Len
	default:
		alen = v2Inet6Len
	}
	n := alen + len(tlvs)
	if n > 0xffff {
		return b, ErrTLVsTooLong
	}
	b = append(b, sigV2...)
	b = append(b, 0x20|byte(Proxy))
	if !ok {
		b = append(b, byte(Unspec)<<4|byte(TransportUnspec))
	} else {
		b = append(b, byte(f)<<4|byte(Stream))
	}
	b = append(b, byte(n>>8), byte(n))
	if ok {
		if f == Inet {
			s4, d4 := s.As4(), d.As4()
			b = append(b, s4[:]...)
			b = append(b, d4[:]...)
		} else {
			s16, d16 := s.As16(), d.As16()
			b = append(b, s16[:]...)
			b = append(b, d16[:]...)
		}
		b = append(b, byte(src.Port()>>8), byte(src.Port()), byte(dst.Port()>>8), byte(dst.Port()))
	}
	return append(b, tlvs...), nil
}

// AppendV2Local appends a version 2 LOCAL header (a connection of the proxy's
// own, such as a health check) followed by tlvs.
func AppendV2Local(b []byte, tlvs []byte) ([]byte, error) {
	if len(tlvs) > 0xffff {
		return b, ErrTLVsTooLong
	}
	b = append(b, sigV2...)
	b = append(b, 0x20|byte(Local), byte(Unspec)<<4|byte(TransportUnspec), byte(len(tlvs)>>8), byte(len(tlvs)))
	return append(b, tlvs...), nil
}

// AppendTLV appends one TLV to a TLV area; a value longer than 65535 bytes is
// ErrTLVsTooLong.
func AppendTLV(area []byte, typ byte, value []byte) ([]byte, error) {
	if len(value) > 0xffff {
		return area, ErrTLVsTooLong
	}
	area = append(area, typ, byte(len(value)>>8), byte(len(value)))
	return append(area, value...), nil
}
