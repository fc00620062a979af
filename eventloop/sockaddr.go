package eventloop

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// toSockaddr converts addr for bind/connect, with the socket family to use.
func toSockaddr(addr netip.AddrPort) (unix.Sockaddr, int) {
	ip := addr.Addr()
	if ip.Is4() || ip.Is4In6() {
		return &unix.SockaddrInet4{Port: int(addr.Port()), Addr: ip.Unmap().As4()}, unix.AF_INET
	}
	sa := &unix.SockaddrInet6{Port: int(addr.Port()), Addr: ip.As16()}
	if z := ip.Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		} else if n, err := strconv.Atoi(z); err == nil {
			sa.ZoneId = uint32(n)
		}
	}
	return sa, unix.AF_INET6
}

// fromSockaddr converts a kernel address; other families give the zero AddrPort.
func fromSockaddr(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// ParseListenAddr parses an nginx-style listen address: "host:port",
// "[v6]:port", "*:port", or a bare port (all IPv4 addresses). The host must be
// an IP literal or "localhost".
func ParseListenAddr(s string) (netip.AddrPort, error) {
	if p, err := strconv.ParseUint(s, 10, 16); err == nil {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("listen address %q: %w", s, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("listen address %q: bad port", s)
	}
	var ip netip.Addr
	switch host {
	case "", "*":
		ip = netip.IPv4Unspecified()
	case "localhost":
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	default:
		if ip, err = netip.ParseAddr(host); err != nil {
			return netip.AddrPort{}, fmt.Errorf("listen address %q: host must be an IP address", s)
		}
	}
	return netip.AddrPortFrom(ip, uint16(p)), nil
}
