// Package cidr reads addresses and networks as nginx's ngx_ptocidr and
// ngx_parse_addr_port do and matches client addresses against them as
// ngx_cidr_match, for set_real_ip_from, allow and deny.
package cidr

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// ErrInvalid is an address or network nginx would not read.
var ErrInvalid = errors.New("invalid address")

// Parse reads "addr" or "addr/bits" (IPv4 or IPv6), as ngx_ptocidr. masked reports
// host bits set beyond the prefix, which nginx clears with the warning "low
// address bits of ... are meaningless".
func Parse(s string) (p netip.Prefix, masked bool, err error) {
	addr, bitsText, hasBits := strings.Cut(s, "/")
	a, ok := ParseAddr(addr)
	if !ok {
		return p, false, ErrInvalid
	}
	bits := a.BitLen()
	if hasBits {
		n, err := strconv.Atoi(bitsText)
		if err != nil || n < 0 || n > a.BitLen() || bitsText == "" || bitsText[0] == '+' || bitsText[0] == '-' {
			return p, false, ErrInvalid
		}
		bits = n
	}
	p = netip.PrefixFrom(a, bits)
	m := p.Masked()
	return m, m.Addr() != a, nil
}

// ParseAddr reads an IPv4 address as ngx_inet_addr (four decimal octets; an empty
// one is 0; 255.255.255.255 is refused as INADDR_NONE) or an IPv6 address without
// a zone.
func ParseAddr(s string) (netip.Addr, bool) {
	if v4, ok := parseInet(s); ok {
		return v4, true
	}
	if strings.IndexByte(s, ':') < 0 || strings.IndexByte(s, '%') >= 0 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return netip.Addr{}, false
	}
	return a, true
}

func parseInet(s string) (netip.Addr, bool) {
	var addr uint32
	octet, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			if octet = octet*10 + int(c-'0'); octet > 255 {
				return netip.Addr{}, false
			}
		case c == '.':
			addr, octet = addr<<8+uint32(octet), 0
			dots++
		default:
			return netip.Addr{}, false
		}
	}
	if dots != 3 {
		return netip.Addr{}, false
	}
	addr = addr<<8 + uint32(octet)
	if addr == 0xffffffff {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(addr >> 24), byte(addr >> 16), byte(addr >> 8), byte(addr)}), true
}

// ParseAddrPort reads an address with an optional port ("1.2.3.4", "1.2.3.4:80",
// "::1", "[::1]:80") as ngx_parse_addr_port; without a port the port is 0.
func ParseAddrPort(b []byte) (netip.AddrPort, bool) {
	if a, ok := parseAddrBytes(b); ok {
		return netip.AddrPortFrom(a, 0), true
	}
	var host, port []byte
	if len(b) > 0 && b[0] == '[' {
		end := indexByte(b, ']')
		if end < 0 || end == len(b)-1 || b[end+1] != ':' {
			return netip.AddrPort{}, false
		}
		host, port = b[1:end], b[end+2:]
	} else {
		i := indexByte(b, ':')
		if i < 0 {
			return netip.AddrPort{}, false
		}
		host, port = b[:i], b[i+1:]
	}
	n := 0
	for _, c := range port {
		if c < '0' || c > '9' {
			return netip.AddrPort{}, false
		}
		if n = n*10 + int(c-'0'); n > 65535 {
			return netip.AddrPort{}, false
		}
	}
	if len(port) == 0 || n < 1 {
		return netip.AddrPort{}, false
	}
	a, ok := parseAddrBytes(host)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, uint16(n)), true
}

// parseAddrBytes is ParseAddr on bytes, without a copy: the parse keeps nothing of
// them (a zone, which netip would keep, is refused first).
func parseAddrBytes(b []byte) (netip.Addr, bool) {
	if len(b) == 0 {
		return netip.Addr{}, false
	}
	return ParseAddr(unsafeString(b))
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// Set is a list of networks, with whether unix-domain peers are in it ("unix:").
type Set struct {
	Nets []netip.Prefix
	Unix bool
}

// Contains reports a client address in the set, as ngx_cidr_match: an IPv4-mapped
// IPv6 address matches as IPv4; an address that is not an IP address (a
// unix-domain peer) matches "unix:".
func (s *Set) Contains(a netip.Addr) bool {
	if !a.IsValid() {
		return s.Unix
	}
	a = a.Unmap()
	for _, p := range s.Nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
