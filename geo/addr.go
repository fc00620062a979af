package geo

import (
	"net/netip"
)

// The address parsers of nginx (ngx_inet_addr, ngx_inet6_addr, ngx_parse_addr,
// ngx_parse_addr_port, ngx_ptocidr), ported for what they accept: "1..2.3" and
// "010.0.0.1" (decimal) are IPv4 addresses to nginx, "255.255.255.255" is not (it is
// INADDR_NONE, the failure value), zones and brackets are not IPv6 addresses.

const inaddrNone = 0xffffffff

// inetAddr is ngx_inet_addr: ok is false for anything but four decimal octets,
// and for 255.255.255.255.
func inetAddr(b []byte) (uint32, bool) {
	var addr, octet uint32
	dots := 0
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			octet = octet*10 + uint32(c-'0')
			if octet > 255 {
				return 0, false
			}
		case c == '.':
			addr = addr<<8 + octet
			octet = 0
			dots++
		default:
			return 0, false
		}
	}
	if dots != 3 {
		return 0, false
	}
	addr = addr<<8 + octet
	return addr, addr != inaddrNone
}

// inet6Addr is ngx_inet6_addr.
func inet6Addr(p []byte) (a [16]byte, ok bool) {
	if len(p) == 0 {
		return a, false
	}
	zero, digit := -1, -1 // where "::" stands in a; where the last group starts in p
	nibbles, word, n, ai := 0, uint32(0), 8, 0
	i := 0
	if p[0] == ':' {
		i++
	}
	v4 := false
	for ; i < len(p); i++ {
		c := p[i]
		if c == ':' {
			if nibbles > 0 {
				digit = i + 1
				a[ai], a[ai+1] = byte(word>>8), byte(word)
				ai += 2
				n--
				if n > 0 {
					nibbles, word = 0, 0
					continue
				}
			} else if zero < 0 {
				digit = i + 1
				zero = ai
				continue
			}
			return a, false
		}
		if c == '.' && nibbles > 0 {
			if n < 2 || digit < 0 {
				return a, false
			}
			w, ok := inetAddr(p[digit:])
			if !ok {
				return a, false
			}
			word = w
			a[ai], a[ai+1] = byte(word>>24), byte(word>>16)
			ai += 2
			n--
			v4 = true
			break
		}
		nibbles++
		if nibbles > 4 {
			return a, false
		}
		switch {
		case '0' <= c && c <= '9':
			word = word*16 + uint32(c-'0')
		case 'a' <= c|0x20 && c|0x20 <= 'f':
			word = word*16 + uint32(c|0x20-'a') + 10
		default:
			return a, false
		}
	}
	if !v4 && nibbles == 0 && zero < 0 {
		return a, false
	}
	a[ai], a[ai+1] = byte(word>>8), byte(word)
	ai += 2
	n--
	if n > 0 {
		if zero < 0 {
			return a, false
		}
		// Move what follows "::" to the end and zero the gap.
		copy(a[zero+2*n:], a[zero:ai])
		for k := zero; k < zero+2*n; k++ {
			a[k] = 0
		}
		return a, true
	}
	return a, zero < 0
}

// ParseAddr is ngx_parse_addr: an IPv4 or IPv6 address as nginx reads one from a
// variable (geo $arg_ip ...) or X-Forwarded-For; the zero Addr when it is not one.
func ParseAddr(b []byte) netip.Addr {
	if v, ok := inetAddr(b); ok {
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	if a, ok := inet6Addr(b); ok {
		return netip.AddrFrom16(a)
	}
	return netip.Addr{}
}

// parseAddrPort is ngx_parse_addr_port: an address, or one with a port
// ("1.2.3.4:80", "[::1]:80"); the port is dropped.
func parseAddrPort(b []byte) netip.Addr {
	if a := ParseAddr(b); a.IsValid() {
		return a
	}
	var host []byte
	if len(b) > 0 && b[0] == '[' {
		end := indexByte(b, ']')
		if end < 0 || end == len(b)-1 || b[end+1] != ':' {
			return netip.Addr{}
		}
		host, b = b[1:end], b[end+2:]
	} else {
		colon := indexByte(b, ':')
		if colon < 0 {
			return netip.Addr{}
		}
		host, b = b[:colon], b[colon+1:]
	}
	if port, ok := atoi(b); !ok || port < 1 || port > 65535 {
		return netip.Addr{}
	}
	return ParseAddr(host)
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// atoi is ngx_atoi: decimal digits only.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' || n > (1<<62)/10 {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// parseCIDR is ngx_ptocidr (with geo's 255.255.255.255 exception): the network with
// its low bits cleared, and meaningless when the text had some set.
func parseCIDR(text string) (p netip.Prefix, meaningless bool, ok bool) {
	if text == "255.255.255.255" {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), 32), false, true
	}
	addrText, maskText, hasMask := cut(text, '/')
	var addr netip.Addr
	if v, ok := inetAddr([]byte(addrText)); ok {
		addr = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	} else if a, ok := inet6Addr([]byte(addrText)); ok {
		addr = netip.AddrFrom16(a)
	} else {
		return p, false, false
	}
	if !hasMask {
		return netip.PrefixFrom(addr, addr.BitLen()), false, true
	}
	bits, ok := atoi([]byte(maskText))
	if !ok || bits > addr.BitLen() {
		return p, false, false
	}
	p = netip.PrefixFrom(addr, bits)
	masked := p.Masked()
	return masked, masked.Addr() != addr, true
}

func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// ForwardedAddr is ngx_http_get_forwarded_addr: when addr is one of proxies, the
// address X-Forwarded-For gives, walking its headers (xff, in the order received)
// from the last; with recursive, on through every trusted address. xff values are
// the headers' own ("a, b, c").
func ForwardedAddr(addr netip.Addr, xff [][]byte, proxies []netip.Prefix, recursive bool) netip.Addr {
	for i := len(xff) - 1; i >= 0; i-- {
		var rc int
		addr, rc = forwardedAddr(addr, xff[i], proxies, recursive)
		if !recursive || rc != ok {
			break
		}
	}
	return addr
}

const (
	ok = iota
	declined
	done
)

// forwardedAddr is ngx_http_get_forwarded_addr_internal on one header's value.
func forwardedAddr(addr netip.Addr, xff []byte, proxies []netip.Prefix, recursive bool) (netip.Addr, int) {
	found := false
	n := len(xff)
	for {
		if !matchCIDR(addr, proxies) {
			if found {
				return addr, done
			}
			return addr, declined
		}
		// The last element: skip separators at the end, then back to the one before.
		p := n - 1
		for ; p > 0; p, n = p-1, n-1 {
			if xff[p] != ' ' && xff[p] != ',' {
				break
			}
		}
		for ; p > 0; p-- {
			if xff[p] == ' ' || xff[p] == ',' {
				p++
				break
			}
		}
		if p < 0 {
			p = 0
		}
		a := parseAddrPort(xff[p:max(n, p)])
		if !a.IsValid() {
			if found {
				return addr, done
			}
			return addr, declined
		}
		addr, found = a, true
		n = p - 1
		if !recursive || p <= 0 {
			return addr, ok
		}
	}
}

// matchCIDR is ngx_cidr_match: an IPv4-mapped address is IPv4, and IPv4 and IPv6
// networks only hold addresses of their own family.
func matchCIDR(addr netip.Addr, cidrs []netip.Prefix) bool {
	addr = addr.Unmap()
	for _, c := range cidrs {
		if c.Addr().Is4() == addr.Is4() && c.Contains(addr) {
			return true
		}
	}
	return false
}
