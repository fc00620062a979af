package proxyproto

import (
	"errors"
	"net/netip"
	"strconv"
	"unsafe"
)

const (
	// MaxV1Header is the longest version 1 header, CRLF included (the spec's bound).
	MaxV1Header = 107
	// DefaultMaxHeader bounds a version 2 header, TLVs included: nginx's
	// NGX_PROXY_PROTOCOL_MAX_HEADER since 1.23.3.
	DefaultMaxHeader = 4096
)

// sigV2 starts every version 2 header.
const sigV2 = "\r\n\r\n\x00\r\nQUIT\n"

// Errors of Parse. The texts of ErrBroken, ErrVersion and ErrTooLarge are
// nginx's log messages (see Describe for the lines with their details).
var (
	// ErrIncomplete: the input is a proper prefix of what may still be a valid header.
	ErrIncomplete = errors.New("proxyproto: incomplete header")
	// ErrBroken: the input is not a PROXY protocol header.
	ErrBroken = errors.New("broken header")
	// ErrVersion: a version 2 signature with another version.
	ErrVersion = errors.New("unknown PROXY protocol version")
	// ErrTooLarge: a version 2 header longer than the bound.
	ErrTooLarge = errors.New("header is too large")
)

// Parse reads the header at the start of b and returns it with its length.
// ErrIncomplete means b is a proper prefix of a header that may still be valid
// (feed it more); any other error means no continuation makes one. max bounds a
// version 2 header (<= 0: DefaultMaxHeader); a version 1 header is at most
// MaxV1Header bytes. The header's TLVs and UNIX addresses alias b. It does not
// allocate.
//
// What is taken follows nginx: a version 2 header with a command other than
// PROXY, a transport other than STREAM or a family other than INET/INET6 is
// accepted and its addresses ignored (HasAddrs false); its TLVs are kept raw
// and checked only when read. Unlike nginx, version 1 addresses must be valid
// IP addresses of the family named (nginx only checks their characters).
func Parse(b []byte, max int) (h Header, n int, err error) {
	if len(b) == 0 {
		return h, 0, ErrIncomplete
	}
	switch b[0] {
	case 'P':
		return parseV1(b)
	case '\r':
		if max <= 0 {
			max = DefaultMaxHeader
		}
		return parseV2(b, max)
	}
	return h, 0, ErrBroken
}

// parseV1 reads "PROXY TCP4|TCP6 src dst sport dport\r\n" or "PROXY UNKNOWN...\r\n".
func parseV1(b []byte) (h Header, n int, err error) {
	if len(b) > MaxV1Header {
		b = b[:MaxV1Header]
	}
	h, n, err = parseV1Line(b)
	if err == ErrIncomplete && len(b) == MaxV1Header {
		err = ErrBroken // no CRLF within the bound
	}
	return h, n, err
}

func parseV1Line(b []byte) (h Header, n int, err error) {
	h.Version, h.Command = 1, Proxy
	i, err := literal(b, 0, "PROXY ")
	if err != nil {
		return h, 0, err
	}
	if i == len(b) {
		return h, 0, ErrIncomplete
	}
	if b[i] == 'U' {
		if i, err = literal(b, i, "UNKNOWN"); err != nil {
			return h, 0, err
		}
		// Anything may come before the CRLF (nginx and the spec ignore it).
		for ; i+1 < len(b); i++ {
			if b[i] == '\r' && b[i+1] == '\n' {
				return h, i + 2, nil
			}
		}
		return h, 0, ErrIncomplete
	}
	if i, err = literal(b, i, "TCP"); err != nil {
		return h, 0, err
	}
	if i == len(b) {
		return h, 0, ErrIncomplete
	}
	switch b[i] {
	case '4':
		h.Family = Inet
	case '6':
		h.Family = Inet6
	default:
		return h, 0, ErrBroken
	}
	h.Transport = Stream
	if i, err = literal(b, i+1, " "); err != nil {
		return h, 0, err
	}
	var src, dst netip.Addr
	var sport, dport uint16
	if src, i, err = v1Addr(b, i, h.Family); err != nil {
		return h, 0, err
	}
	if dst, i, err = v1Addr(b, i, h.Family); err != nil {
		return h, 0, err
	}
	if sport, i, err = v1Port(b, i, ' '); err != nil {
		return h, 0, err
	}
	if dport, i, err = v1Port(b, i, '\r'); err != nil {
		return h, 0, err
	}
	if i, err = literal(b, i, "\n"); err != nil {
		return h, 0, err
	}
	h.Source, h.Destination = netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport)
	h.addrs = true
	return h, i, nil
}

// literal matches s at b[i:], which may end inside it.
func literal(b []byte, i int, s string) (int, error) {
	for k := 0; k < len(s); k++ {
		if i+k == len(b) {
			return 0, ErrIncomplete
		}
		if b[i+k] != s[k] {
			return 0, ErrBroken
		}
	}
	return i + len(s), nil
}

// v1Addr reads an address ending with a space: nginx's characters (hex digits,
// '.', ':'), and an IP address of family f.
func v1Addr(b []byte, i int, f Family) (netip.Addr, int, error) {
	start := i
	for ; i < len(b) && b[i] != ' '; i++ {
		if c := b[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '.' || c == ':') {
			return netip.Addr{}, 0, ErrBroken
		}
	}
	if i == len(b) {
		return netip.Addr{}, 0, ErrIncomplete
	}
	if i == start {
		return netip.Addr{}, 0, ErrBroken
	}
	// The string is only looked at, never kept: no copy of the bytes.
	a, err := netip.ParseAddr(unsafe.String(&b[start], i-start))
	if err != nil || f == Inet && !a.Is4() || f == Inet6 && !a.Is6() {
		return netip.Addr{}, 0, ErrBroken
	}
	return a, i + 1, nil
}

// v1Port reads a decimal port ending with sep (leading zeros allowed, as nginx does).
func v1Port(b []byte, i int, sep byte) (uint16, int, error) {
	start, v := i, 0
	for ; i < len(b) && b[i] != sep; i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, 0, ErrBroken
		}
		if v = v*10 + int(c-'0'); v > 65535 {
			return 0, 0, ErrBroken
		}
	}
	if i == len(b) {
		return 0, 0, ErrIncomplete
	}
	if i == start {
		return 0, 0, ErrBroken
	}
	return uint16(v), i + 1, nil
}

// parseV2 reads the binary header: signature, version and command,
// family and transport, length, then addresses and TLVs.
func parseV2(b []byte, max int) (h Header, n int, err error) {
	if k := min(len(b), len(sigV2)); string(b[:k]) != sigV2[:k] {
		return h, 0, ErrBroken
	}
	if len(b) <= len(sigV2) {
		return h, 0, ErrIncomplete
	}
	if b[12]>>4 != 2 {
		return h, 0, ErrVersion
	}
	if len(b) < v2FixedLen {
		return h, 0, ErrIncomplete
	}
	n = v2FixedLen + (int(b[14])<<8 | int(b[15]))
	if n > max {
		return h, 0, ErrTooLarge
	}
	if len(b) < n {
		return h, 0, ErrIncomplete
	}
	b = b[:n]
	h.Version, h.Command = 2, Command(b[12]&0x0f)
	h.Family, h.Transport = Family(b[13]>>4), Transport(b[13]&0x0f)
	var alen int
	switch h.Family {
	case Inet:
		alen = v2Inet4Len
	case Inet6:
		alen = v2Inet6Len
	case Unix:
		alen = v2UnixLen
	}
	if h.Command == Proxy && h.Transport == Stream && (h.Family == Inet || h.Family == Inet6) {
		if n-v2FixedLen < alen {
			return h, 0, ErrBroken
		}
		a := b[v2FixedLen:]
		if h.Family == Inet {
			h.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[0:4])), uint16(a[8])<<8|uint16(a[9]))
			h.Destination = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[4:8])), uint16(a[10])<<8|uint16(a[11]))
		} else {
			h.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[0:16])), uint16(a[32])<<8|uint16(a[33]))
			h.Destination = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[16:32])), uint16(a[34])<<8|uint16(a[35]))
		}
		h.addrs = true
	}
	h.b, h.tlvOff = b, min(v2FixedLen+alen, n)
	return h, n, nil
}

// retained reports whether h still needs the bytes it was parsed from.
func (h *Header) retained() bool {
	return len(h.b) > h.tlvOff || h.Family == Unix && len(h.b) >= v2FixedLen+v2UnixLen
}

// Clone returns h with its own copy of the bytes its TLVs and UNIX addresses
// alias (Parse's input is often a buffer that is about to be reused).
func (h Header) Clone() Header {
	if h.retained() {
		h.b = append([]byte(nil), h.b...)
	} else {
		h.b = nil
	}
	return h
}

// Describe is the log line of a header Parse refused in b, in nginx's words:
// `broken header: "<first line of b>"` (a version 2 header's first 64 bytes),
// `unknown PROXY protocol version: 3`, `header is too large`.
func Describe(err error, b []byte) string {
	switch err {
	case ErrVersion:
		v := 0
		if len(b) > 12 {
			v = int(b[12] >> 4)
		}
		return "unknown PROXY protocol version: " + strconv.Itoa(v)
	case ErrTooLarge:
		return err.Error()
	}
	line := b
	if len(b) > 0 && b[0] == '\r' {
		line = b[:min(len(b), 64)] // binary: its first bytes (nginx logs nothing)
	} else {
		for i, c := range b {
			if c == '\r' || c == '\n' {
				line = b[:i]
				break
			}
		}
	}
	out := make([]byte, 0, len(ErrBroken.Error())+4+len(line))
	out = append(out, ErrBroken.Error()...)
	out = append(out, ": \""...)
	out = appendEscaped(out, line)
	return string(append(out, '"'))
}

// appendEscaped appends p with bytes outside printable ASCII as \xHH, so a
// client's bytes cannot forge log lines.
func appendEscaped(dst, p []byte) []byte {
	const hex = "0123456789abcdef"
	for _, c := range p {
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '"' {
			dst = append(dst, '\\', 'x', hex[c>>4], hex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
