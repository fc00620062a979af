package proxyproto

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
)

// Command is a version 2 header's command; version 1 headers are Proxy.
type Command uint8

const (
	// Local: the connection was made by the proxy itself (a health check);
	// the real connection's addresses stand.
	Local Command = 0
	// Proxy: the connection is relayed for the client the header names.
	Proxy Command = 1
)

// Family is the address family of a header (v2's high nibble of byte 13;
// v1's TCP4, TCP6 and UNKNOWN are Inet, Inet6 and Unspec).
type Family uint8

const (
	Unspec Family = 0
	Inet   Family = 1
	Inet6  Family = 2
	Unix   Family = 3
)

// Transport is a header's transport protocol (v2's low nibble of byte 13).
type Transport uint8

const (
	TransportUnspec Transport = 0
	Stream          Transport = 1
	Dgram           Transport = 2
)

// TLV types of the spec (PP2_TYPE_*).
const (
	TypeALPN       = 0x01
	TypeAuthority  = 0x02
	TypeCRC32C     = 0x03
	TypeNoop       = 0x04
	TypeUniqueID   = 0x05
	TypeSSL        = 0x20
	TypeSSLVersion = 0x21
	TypeSSLCN      = 0x22
	TypeSSLCipher  = 0x23
	TypeSSLSigAlg  = 0x24
	TypeSSLKeyAlg  = 0x25
	TypeNetNS      = 0x30
)

// Address block sizes of version 2 by family.
const (
	v2FixedLen  = 16
	v2Inet4Len  = 12
	v2Inet6Len  = 36
	v2UnixLen   = 216
	unixPathLen = 108
)

// ErrBrokenTLV is a TLV whose length runs past the end of its area (nginx's wording).
var ErrBrokenTLV = errors.New("broken PROXY protocol TLV")

// Header is a received PROXY protocol header. Source and Destination hold the
// client's address and the address it connected to when HasAddrs reports so;
// otherwise (v1 UNKNOWN, v2 LOCAL, or a family, transport or command nginx does
// not take addresses from) the real connection's addresses stand, as in nginx.
type Header struct {
	Version   uint8 // 1 or 2
	Command   Command
	Family    Family
	Transport Transport
	// Source is the client's address, Destination the one it connected to
	// (nginx's $proxy_protocol_addr/_port and $proxy_protocol_server_addr/_port).
	Source, Destination netip.AddrPort

	addrs  bool
	b      []byte // a v2 header's bytes when TLVs or UNIX addresses are to be read from them
	tlvOff int    // where the TLV area starts in b
}

// HasAddrs reports whether the header carries the client's TCP addresses (nginx
// sets $proxy_protocol_addr and its TLV variables only then).
func (h *Header) HasAddrs() bool { return h.addrs }

// TLVs returns the raw TLV area of a version 2 header (empty for v1).
func (h *Header) TLVs() []byte {
	if h.tlvOff >= len(h.b) {
		return nil
	}
	return h.b[h.tlvOff:]
}

// UnixSource and UnixDestination return the socket paths of an AF_UNIX
// version 2 header (up to the first NUL; abstract names start with one), nil
// for other families.
func (h *Header) UnixSource() []byte { return h.unixPath(v2FixedLen) }

// UnixDestination: see UnixSource.
func (h *Header) UnixDestination() []byte { return h.unixPath(v2FixedLen + unixPathLen) }

func (h *Header) unixPath(off int) []byte {
	if h.Family != Unix || len(h.b) < v2FixedLen+v2UnixLen {
		return nil
	}
	p := h.b[off : off+unixPathLen]
	if i := bytes.IndexByte(p[1:], 0); i >= 0 { // p[0] == 0: an abstract name
		p = p[:i+1]
	}
	if len(p) == 1 && p[0] == 0 {
		return nil
	}
	return p
}

// Var names one of nginx's address variables of the PROXY protocol.
type Var uint8

const (
	VarAddr       Var = iota // $proxy_protocol_addr
	VarPort                  // $proxy_protocol_port
	VarServerAddr            // $proxy_protocol_server_addr
	VarServerPort            // $proxy_protocol_server_port
)

// AppendVar appends the value of an address variable as nginx has it, with ok
// false where nginx's is not found: no addresses in the header, or a port 0.
func (h *Header) AppendVar(dst []byte, v Var) ([]byte, bool) {
	if h == nil || !h.addrs {
		return dst, false
	}
	a := h.Source
	if v == VarServerAddr || v == VarServerPort {
		a = h.Destination
	}
	if v == VarAddr || v == VarServerAddr {
		return a.Addr().AppendTo(dst), true
	}
	if a.Port() == 0 {
		return dst, false
	}
	return strconv.AppendUint(dst, uint64(a.Port()), 10), true
}

// TLV returns the value of the header's first TLV of type typ.
func (h *Header) TLV(typ byte) (value []byte, ok bool, err error) {
	return LookupTLV(h.TLVs(), typ)
}

// NextTLV splits the first TLV off a TLV area: its type and value and the rest
// of the area. An area too short for the TLV it starts is ErrBrokenTLV.
func NextTLV(area []byte) (typ byte, value, rest []byte, err error) {
	if len(area) < 3 {
		return 0, nil, nil, ErrBrokenTLV
	}
	n := int(area[1])<<8 | int(area[2])
	if len(area)-3 < n {
		return 0, nil, nil, ErrBrokenTLV
	}
	return area[0], area[3 : 3+n], area[3+n:], nil
}

// LookupTLV returns the value of the first TLV of type typ in area, walking it
// as nginx does: a broken TLV before the one sought is an error.
func LookupTLV(area []byte, typ byte) (value []byte, ok bool, err error) {
	for len(area) > 0 {
		t, v, rest, err := NextTLV(area)
		if err != nil {
			return nil, false, err
		}
		if t == typ {
			return v, true, nil
		}
		area = rest
	}
	return nil, false, nil
}

// TLVName is a compiled nginx TLV variable name, the NAME of
// $proxy_protocol_tlv_NAME: alpn, authority, unique_id, ssl, netns, 0xHH, and
// for the sub-TLVs of ssl ssl_version, ssl_cn, ssl_cipher, ssl_sig_alg,
// ssl_key_alg, ssl_0xHH, and ssl_verify (the verify field, in decimal).
type TLVName struct {
	typ    byte
	ssl    bool // a sub-TLV of PP2_TYPE_SSL
	verify bool // the SSL TLV's verify field
}

var tlvNames = map[string]byte{
	"alpn": TypeALPN, "authority": TypeAuthority, "unique_id": TypeUniqueID,
	"ssl": TypeSSL, "netns": TypeNetNS,
}

var sslTLVNames = map[string]byte{
	"version": TypeSSLVersion, "cn": TypeSSLCN, "cipher": TypeSSLCipher,
	"sig_alg": TypeSSLSigAlg, "key_alg": TypeSSLKeyAlg,
}

// ParseTLVName compiles the NAME of $proxy_protocol_tlv_NAME (nginx 1.23.2's names).
func ParseTLVName(name string) (TLVName, error) {
	var n TLVName
	s, names := name, tlvNames
	if len(s) >= 4 && s[:4] == "ssl_" {
		n.ssl, s, names = true, s[4:], sslTLVNames
		if s == "verify" {
			n.verify = true
			return n, nil
		}
	}
	if len(s) > 2 && s[:2] == "0x" {
		v, err := strconv.ParseUint(s[2:], 16, 8)
		if err != nil {
			return n, errors.New("invalid PROXY protocol TLV \"" + name + "\"")
		}
		n.typ = byte(v)
		return n, nil
	}
	t, ok := names[s]
	if !ok {
		return n, errors.New("unknown PROXY protocol TLV \"" + name + "\"")
	}
	n.typ = t
	return n, nil
}

// AppendTLVVar appends the value of $proxy_protocol_tlv_NAME to dst, with ok
// false where nginx's variable is not found (no header addresses, no such TLV,
// a broken TLV area, an SSL TLV shorter than its fixed part).
func (h *Header) AppendTLVVar(dst []byte, name TLVName) ([]byte, bool) {
	if !h.addrs {
		return dst, false
	}
	area := h.TLVs()
	if name.ssl {
		v, ok, err := LookupTLV(area, TypeSSL)
		if !ok || err != nil || len(v) < 5 {
			return dst, false
		}
		if name.verify {
			verify := uint32(v[1])<<24 | uint32(v[2])<<16 | uint32(v[3])<<8 | uint32(v[4])
			return strconv.AppendUint(dst, uint64(verify), 10), true
		}
		area = v[5:]
	}
	v, ok, err := LookupTLV(area, name.typ)
	if !ok || err != nil {
		return dst, false
	}
	return append(dst, v...), true
}
