package eventloop

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// toSockaddr converts addr for bind/connect, with the socket family to use.
func toSockaddr(addr netip.AddrPort) (unix.Sockaddr, int) {
	ip := addr.Addr()
	if ip.Is4() || ip.Is4In6() {
		return &unix.SockaddrInet4{Port: int(addr.Port()), Addr: ip.Unmap().As4()}, unix.AF_INET
	}
	return &unix.SockaddrInet6{Port: int(addr.Port()), Addr: ip.As16(), ZoneId: zoneID(ip.Zone())}, unix.AF_INET6
}

func zoneID(z string) uint32 {
	if z == "" {
		return 0
	}
	if ifi, err := net.InterfaceByName(z); err == nil {
		return uint32(ifi.Index)
	} else if n, err := strconv.Atoi(z); err == nil {
		return uint32(n)
	}
	return 0
}

// inetFamily is the socket family toSockaddr and connectInet use for addr.
func inetFamily(addr netip.AddrPort) int {
	if ip := addr.Addr(); ip.Is4() || ip.Is4In6() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// connectInet is connect(2) to addr from a kernel address on the stack:
// unix.Connect takes a Sockaddr interface, an allocation per upstream connection.
func connectInet(fd int, addr netip.AddrPort) error {
	ip := addr.Addr()
	var rsa unix.RawSockaddrAny
	var n uintptr
	if inetFamily(addr) == unix.AF_INET {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa))
		sa.Family, sa.Addr = unix.AF_INET, ip.Unmap().As4()
		putPort(&sa.Port, addr.Port())
		n = unix.SizeofSockaddrInet4
	} else {
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa))
		sa.Family, sa.Addr, sa.Scope_id = unix.AF_INET6, ip.As16(), zoneID(ip.Zone())
		putPort(&sa.Port, addr.Port())
		n = unix.SizeofSockaddrInet6
	}
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), n)
	return rawErr(e)
}

// putPort stores a port in network byte order.
func putPort(p *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(port>>8), byte(port)
}

// x/sys's Accept4 and Getsockname ask the kernel for SO_PROTOCOL and allocate a
// Sockaddr for every address they return; a connection's life makes these calls
// once or twice, so they are made here directly into a stack buffer and decoded
// without allocating.

// accept4 accepts one connection, non-blocking and close-on-exec, with its peer.
func accept4(fd int) (int, netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	n := uint32(unix.SizeofSockaddrAny)
	nfd, _, errno := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), uintptr(unsafe.Pointer(&rsa)),
		uintptr(unsafe.Pointer(&n)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if errno != 0 {
		return -1, netip.AddrPort{}, errno
	}
	return int(nfd), rawAddrPort(&rsa), nil
}

// localAddr is getsockname(2) as a netip.AddrPort.
func localAddr(fd int) (netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	n := uint32(unix.SizeofSockaddrAny)
	_, _, errno := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&n)))
	if errno != 0 {
		return netip.AddrPort{}, fmt.Errorf("getsockname: %w", errno)
	}
	return rawAddrPort(&rsa), nil
}

// rawAddrPort decodes an IPv4 or IPv6 kernel address; others give the zero value.
func rawAddrPort(rsa *unix.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(p[0])<<8|uint16(p[1]))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(rsa))
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(p[0])<<8|uint16(p[1]))
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
