package proxyproto

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// sig is the version 2 signature, written out byte by byte.
var sig = []byte{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A}

// v2 is a version 2 header from raw parts: version/command, family/transport,
// the 16-bit length, then the body.
func v2(verCmd, famTr byte, body ...[]byte) []byte {
	var all []byte
	for _, p := range body {
		all = append(all, p...)
	}
	b := append(append([]byte(nil), sig...), verCmd, famTr, byte(len(all)>>8), byte(len(all)))
	return append(b, all...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func tlv(t byte, v string) []byte {
	return append([]byte{t, byte(len(v) >> 8), byte(len(v))}, v...)
}

var (
	// 192.0.2.1:56324 -> 198.51.100.2:443
	inet4Addrs = []byte{192, 0, 2, 1, 198, 51, 100, 2, 0xDC, 0x04, 0x01, 0xBB}
	// [2001:db8::1]:1 -> [2001:db8::2]:65535
	inet6Addrs = []byte{
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		0x00, 0x01, 0xFF, 0xFF,
	}
)

func unixAddrs(src, dst string) []byte {
	b := make([]byte, 216)
	copy(b, src)
	copy(b[108:], dst)
	return b
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

type parseCase struct {
	name string
	in   []byte
	err  error // nil: a header of n bytes (n 0: all of in)
	n    int
	src  string // "" with err nil: HasAddrs false
	dst  string
	ver  uint8
	cmd  Command
	fam  Family
}

func parseCases() []parseCase {
	maxV6 := "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"
	unknown107 := "PROXY UNKNOWN " + strings.Repeat("x", 107-len("PROXY UNKNOWN ")-2) + "\r\n"
	return []parseCase{
		// Version 1.
		{name: "v1 tcp4", in: []byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n"), n: 45,
			src: "192.0.2.1:56324", dst: "198.51.100.2:443", ver: 1, cmd: Proxy, fam: Inet},
		{name: "v1 tcp6", in: []byte("PROXY TCP6 2001:db8::1 2001:DB8::2 1 65535\r\n"),
			src: "[2001:db8::1]:1", dst: "[2001:db8::2]:65535", ver: 1, cmd: Proxy, fam: Inet6},
		{name: "v1 tcp6 longest", in: []byte(maxV6), src: "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
			dst: "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535", ver: 1, cmd: Proxy, fam: Inet6},
		{name: "v1 tcp6 mapped", in: []byte("PROXY TCP6 ::ffff:192.0.2.1 ::1 80 81\r\n"),
			src: "[::ffff:192.0.2.1]:80", dst: "[::1]:81", ver: 1, cmd: Proxy, fam: Inet6},
		{name: "v1 ports with leading zeros (nginx takes them)", in: []byte("PROXY TCP4 1.2.3.4 5.6.7.8 0080 00\r\n"),
			src: "1.2.3.4:80", dst: "5.6.7.8:0", ver: 1, cmd: Proxy, fam: Inet},
		{name: "v1 unknown", in: []byte("PROXY UNKNOWN\r\n"), ver: 1, cmd: Proxy},
		{name: "v1 unknown with addresses", in: []byte("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\nXY"), n: 35, ver: 1, cmd: Proxy},
		{name: "v1 unknown of 107 bytes", in: []byte(unknown107), ver: 1, cmd: Proxy},
		{name: "v1 unknown of 108 bytes", in: []byte("PROXY UNKNOWN " + strings.Repeat("x", 108-len("PROXY UNKNOWN ")-2) + "\r\n"), err: ErrBroken},
		{name: "v1 oversize address", in: []byte("PROXY TCP4 " + strings.Repeat("1", 200)), err: ErrBroken},
		{name: "http request", in: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), err: ErrBroken},
		{name: "lower case", in: []byte("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), err: ErrBroken},
		{name: "v1 tcp5", in: []byte("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n"), err: ErrBroken},
		{name: "v1 udp4", in: []byte("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n"), err: ErrBroken},
		{name: "v1 no space after family", in: []byte("PROXY TCP4\r\n"), err: ErrBroken},
		{name: "v1 port too large", in: []byte("PROXY TCP4 1.2.3.4 5.6.7.8 80 65536\r\n"), err: ErrBroken},
		{name: "v1 negative port", in: []byte("PROXY TCP4 1.2.3.4 5.6.7.8 -1 80\r\n"), err: ErrBroken},
		{name: "v1 empty port", in: []byte("PROXY TCP4 1.2.3.4 5.6.7.8  80\r\n"), err: ErrBroken},
		{name: "v1 empty address", in: []byte("PROXY TCP4  5.6.7.8 1 80\r\n"), err: ErrBroken},
		{name: "v1 LF without CR", in: []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 80\n"), err: ErrBroken},
		{name: "v1 CR without LF", in: []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 80\rX"), err: ErrBroken},
		{name: "v1 extra field", in: []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 80 9\r\n"), err: ErrBroken},
		{name: "v1 ipv6 under tcp4", in: []byte("PROXY TCP4 ::1 ::1 1 80\r\n"), err: ErrBroken},
		{name: "v1 ipv4 under tcp6", in: []byte("PROXY TCP6 1.2.3.4 5.6.7.8 1 80\r\n"), err: ErrBroken},
		{name: "v1 short ipv4", in: []byte("PROXY TCP4 1.2.3 5.6.7.8 1 80\r\n"), err: ErrBroken},
		{name: "v1 zone", in: []byte("PROXY TCP6 fe80::1%eth0 ::1 1 80\r\n"), err: ErrBroken},
		{name: "v1 host name", in: []byte("PROXY TCP4 localhost 5.6.7.8 1 80\r\n"), err: ErrBroken},

		// Version 2.
		{name: "v2 tcp4", in: cat(v2(0x21, 0x11, inet4Addrs), []byte("GET")), n: 28,
			src: "192.0.2.1:56324", dst: "198.51.100.2:443", ver: 2, cmd: Proxy, fam: Inet},
		{name: "v2 tcp6", in: v2(0x21, 0x21, inet6Addrs),
			src: "[2001:db8::1]:1", dst: "[2001:db8::2]:65535", ver: 2, cmd: Proxy, fam: Inet6},
		{name: "v2 local", in: v2(0x20, 0x00), ver: 2, cmd: Local},
		{name: "v2 local with addresses", in: v2(0x20, 0x11, inet4Addrs), ver: 2, cmd: Local, fam: Inet},
		{name: "v2 local with short addresses", in: v2(0x20, 0x11, inet4Addrs[:4]), ver: 2, cmd: Local, fam: Inet},
		{name: "v2 unspec", in: v2(0x21, 0x00), ver: 2, cmd: Proxy},
		{name: "v2 unix", in: v2(0x21, 0x31, unixAddrs("/run/client.sock", "/run/haproxy.sock")), ver: 2, cmd: Proxy, fam: Unix},
		{name: "v2 unix short (nginx ignores the family)", in: v2(0x21, 0x31, []byte("/x")), ver: 2, cmd: Proxy, fam: Unix},
		{name: "v2 udp4 (nginx ignores the transport)", in: v2(0x21, 0x12, inet4Addrs), ver: 2, cmd: Proxy, fam: Inet},
		{name: "v2 unknown family", in: v2(0x21, 0x41, inet4Addrs), ver: 2, cmd: Proxy, fam: 4},
		{name: "v2 unknown command (nginx ignores it)", in: v2(0x2F, 0x11, inet4Addrs), ver: 2, cmd: 15, fam: Inet},
		{name: "v2 tcp4 with TLVs", in: v2(0x21, 0x11, inet4Addrs, tlv(TypeALPN, "h2"), tlv(TypeNoop, "\x00\x00")),
			src: "192.0.2.1:56324", dst: "198.51.100.2:443", ver: 2, cmd: Proxy, fam: Inet},
		{name: "v2 tcp4 with a broken TLV (nginx takes it)", in: v2(0x21, 0x11, inet4Addrs, []byte{TypeALPN, 0, 9, 'h'}),
			src: "192.0.2.1:56324", dst: "198.51.100.2:443", ver: 2, cmd: Proxy, fam: Inet},
		{name: "v2 tcp4 short addresses", in: v2(0x21, 0x11, inet4Addrs[:11]), err: ErrBroken},
		{name: "v2 tcp6 with tcp4 addresses", in: v2(0x21, 0x21, inet4Addrs), err: ErrBroken},
		{name: "v2 version 1", in: v2(0x11, 0x11, inet4Addrs), err: ErrVersion},
		{name: "v2 version 3", in: v2(0x31, 0x11, inet4Addrs), err: ErrVersion},
		{name: "v2 too large", in: v2(0x21, 0x11, inet4Addrs, make([]byte, 4096-16-12+1)), err: ErrTooLarge},
		{name: "v2 largest", in: v2(0x21, 0x11, inet4Addrs, make([]byte, 4096-16-12)),
			src: "192.0.2.1:56324", dst: "198.51.100.2:443", ver: 2, cmd: Proxy, fam: Inet},
		{name: "v2 length 65535", in: cat(sig, []byte{0x21, 0x11, 0xFF, 0xFF}), err: ErrTooLarge},
		{name: "v2 bad signature", in: cat(sig[:7], []byte("quit\n"), []byte{0x21, 0x11, 0, 12}, inet4Addrs), err: ErrBroken},
		{name: "nul", in: []byte{0}, err: ErrBroken},
		{name: "tls hello", in: []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, err: ErrBroken},
	}
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases() {
		t.Run(tc.name, func(t *testing.T) {
			h, n, err := Parse(tc.in, 0)
			if tc.err != nil {
				if err != tc.err {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err %v", err)
			}
			want := tc.n
			if want == 0 {
				want = len(tc.in)
			}
			if n != want {
				t.Fatalf("n %d, want %d", n, want)
			}
			if h.Version != tc.ver || h.Command != tc.cmd || h.Family != tc.fam {
				t.Fatalf("version %d command %d family %d, want %d %d %d", h.Version, h.Command, h.Family, tc.ver, tc.cmd, tc.fam)
			}
			if h.HasAddrs() != (tc.src != "") {
				t.Fatalf("HasAddrs %v", h.HasAddrs())
			}
			if tc.src != "" && (h.Source != ap(tc.src) || h.Destination != ap(tc.dst)) {
				t.Fatalf("%v -> %v, want %s -> %s", h.Source, h.Destination, tc.src, tc.dst)
			}
			if !h.HasAddrs() && (h.Source.IsValid() || h.Destination.IsValid()) {
				t.Fatalf("addresses without HasAddrs: %v %v", h.Source, h.Destination)
			}
		})
	}
}

// TestParseIncremental feeds every header of the table cut at every length:
// each proper prefix of a header is ErrIncomplete (the layer waits for more),
// and garbage is refused no later than where it could no longer be a header.
func TestParseIncremental(t *testing.T) {
	for _, tc := range parseCases() {
		h0, n0, err0 := Parse(tc.in, 0)
		for k := 0; k < len(tc.in); k++ {
			h, n, err := Parse(tc.in[:k], 0)
			switch {
			case err0 == nil && k < n0:
				if err != ErrIncomplete {
					t.Fatalf("%s: prefix of %d of a %d-byte header: %v", tc.name, k, n0, err)
				}
			case err0 == nil:
				if err != nil || n != n0 || h.Source != h0.Source || h.Destination != h0.Destination {
					t.Fatalf("%s: %d bytes: %v %d", tc.name, k, err, n)
				}
			default:
				if err != ErrIncomplete && err != err0 {
					t.Fatalf("%s: prefix of %d: %v, want %v or incomplete", tc.name, k, err, err0)
				}
			}
		}
	}
	// Refused early: garbage does not wait for more bytes.
	for _, in := range []string{"G", "PROXY X", "PROXY TCP4 1.2.3.4 x", "\r\n\r\nX", "\r\n\r\n\x00\r\nQUIT\n\x31"} {
		if _, _, err := Parse([]byte(in), 0); err == ErrIncomplete || err == nil {
			t.Errorf("%q: %v, want an error at once", in, err)
		}
	}
}

func TestParseMax(t *testing.T) {
	pad := tlv(TypeNoop, strings.Repeat("\x00", 100))
	in := v2(0x21, 0x11, inet4Addrs, pad) // 16+12+103 = 131 bytes
	if _, _, err := Parse(in, 131); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	if _, _, err := Parse(in[:20], 130); err != ErrTooLarge {
		t.Fatalf("above the bound, from its length field: %v", err)
	}
}

func TestHeaderTLVs(t *testing.T) {
	ssl := cat([]byte{0x07, 0, 0, 0, 0}, tlv(TypeSSLVersion, "TLSv1.3"), tlv(TypeSSLCN, "client.example"))
	ssl = append([]byte{TypeSSL, byte(len(ssl) >> 8), byte(len(ssl))}, ssl...)
	in := v2(0x21, 0x21, inet6Addrs, tlv(TypeALPN, "h2"), tlv(TypeAuthority, "example.com"),
		tlv(TypeUniqueID, "abc-123"), ssl, tlv(0xEA, "\x01vpce-123"))
	h, _, err := Parse(in, 0)
	if err != nil {
		t.Fatal(err)
	}
	h = h.Clone()
	clear(in) // the clone does not alias the input
	for _, c := range []struct{ name, want string }{
		{"alpn", "h2"}, {"authority", "example.com"}, {"unique_id", "abc-123"}, {"0xea", "\x01vpce-123"},
		{"0x01", "h2"}, {"ssl_version", "TLSv1.3"}, {"ssl_cn", "client.example"}, {"ssl_0x22", "client.example"},
		{"ssl_verify", "0"},
	} {
		name, err := ParseTLVName(c.name)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := h.AppendTLVVar(nil, name)
		if !ok || string(v) != c.want {
			t.Errorf("%s: %q %v, want %q", c.name, v, ok, c.want)
		}
	}
	for _, missing := range []string{"netns", "ssl_cipher", "0x99"} {
		name, _ := ParseTLVName(missing)
		if v, ok := h.AppendTLVVar(nil, name); ok {
			t.Errorf("%s: %q", missing, v)
		}
	}
	for _, bad := range []string{"nope", "0x", "0x100", "ssl_nope", "0xzz"} {
		if _, err := ParseTLVName(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	// Walking the area by hand.
	var types []byte
	for area := h.TLVs(); len(area) > 0; {
		typ, _, rest, err := NextTLV(area)
		if err != nil {
			t.Fatal(err)
		}
		types, area = append(types, typ), rest
	}
	if !bytes.Equal(types, []byte{TypeALPN, TypeAuthority, TypeUniqueID, TypeSSL, 0xEA}) {
		t.Fatalf("types %x", types)
	}

	// A broken TLV is found when read, as nginx does; the header stands.
	h, _, err = Parse(v2(0x21, 0x11, inet4Addrs, tlv(TypeALPN, "h2"), []byte{TypeAuthority, 0, 50, 'x'}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := h.TLV(TypeALPN); !ok || err != nil || string(v) != "h2" {
		t.Fatalf("alpn before the broken TLV: %q %v %v", v, ok, err)
	}
	if _, _, err := h.TLV(TypeAuthority); !errors.Is(err, ErrBrokenTLV) {
		t.Fatalf("broken TLV: %v", err)
	}

	// No TLV variable without addresses (nginx: no c->proxy_protocol).
	h, _, _ = Parse(v2(0x20, 0x11, inet4Addrs, tlv(TypeALPN, "h2")), 0)
	name, _ := ParseTLVName("alpn")
	if v, ok := h.AppendTLVVar(nil, name); ok {
		t.Fatalf("LOCAL header gave %q", v)
	}
	if v, ok, _ := h.TLV(TypeALPN); !ok || string(v) != "h2" {
		t.Fatalf("LOCAL header's raw TLVs: %q", v)
	}
}

func TestHeaderUnix(t *testing.T) {
	abstract := "\x00haproxy"
	h, _, err := Parse(v2(0x21, 0x31, unixAddrs("/run/client.sock", abstract), tlv(TypeALPN, "h2")), 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(h.UnixSource()) != "/run/client.sock" || string(h.UnixDestination()) != abstract {
		t.Fatalf("%q %q", h.UnixSource(), h.UnixDestination())
	}
	if v, ok, _ := h.TLV(TypeALPN); !ok || string(v) != "h2" {
		t.Fatalf("TLV after UNIX addresses: %q", v)
	}
	if h.HasAddrs() {
		t.Fatal("UNIX addresses are not TCP addresses")
	}
	h4, _, _ := Parse(v2(0x21, 0x11, inet4Addrs), 0)
	if h4.UnixSource() != nil {
		t.Fatal("UNIX path of an INET header")
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		err  error
		want string
	}{
		{[]byte("GET / HTTP/1.1\r\nHost: x\r\n"), ErrBroken, `broken header: "GET / HTTP/1.1"`},
		{[]byte("\x16\x03\x01\x00\"x"), ErrBroken, `broken header: "\x16\x03\x01\x00\x22x"`},
		{v2(0x21, 0x21, inet4Addrs), ErrBroken, `broken header: "\x0d\x0a\x0d\x0a\x00\x0d\x0aQUIT\x0a!!\x00\x0c\xc0\x00\x02\x01\xc63d\x02\xdc\x04\x01\xbb"`},
		{v2(0x31, 0x11), ErrVersion, "unknown PROXY protocol version: 3"},
		{v2(0xF1, 0x11), ErrVersion, "unknown PROXY protocol version: 15"},
		{nil, ErrTooLarge, "header is too large"},
	} {
		if got := Describe(c.err, c.in); got != c.want {
			t.Errorf("%q: %s, want %s", c.in, got, c.want)
		}
	}
}

func TestParseAllocs(t *testing.T) {
	ins := [][]byte{
		[]byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"),
		[]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n"),
		[]byte("PROXY UNKNOWN\r\n"),
		v2(0x21, 0x11, inet4Addrs),
		v2(0x21, 0x21, inet6Addrs, tlv(TypeALPN, "h2")),
		v2(0x20, 0x00),
	}
	for _, in := range ins {
		if a := testing.AllocsPerRun(100, func() {
			if _, _, err := Parse(in, 0); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("%q: %v allocations", in, a)
		}
	}
	garbage := []byte("GET / HTTP/1.1\r\n")
	if a := testing.AllocsPerRun(100, func() { Parse(garbage, 0) }); a != 0 {
		t.Errorf("garbage: %v allocations", a)
	}
}

func TestHeaderVars(t *testing.T) {
	get := func(h *Header, v Var) string {
		b, ok := h.AppendVar(nil, v)
		if !ok {
			return "(none)"
		}
		return string(b)
	}
	h, _, _ := Parse([]byte("PROXY TCP6 2001:db8::1 ::ffff:192.0.2.1 443 0\r\n"), 0)
	for v, want := range []string{"2001:db8::1", "443", "::ffff:192.0.2.1", "(none)"} {
		if got := get(&h, Var(v)); got != want {
			t.Errorf("var %d: %s, want %s", v, got, want)
		}
	}
	local, _, _ := Parse(v2(0x20, 0x11, inet4Addrs), 0)
	if got := get(&local, VarAddr); got != "(none)" {
		t.Errorf("LOCAL: %s", got)
	}
	if got := get(nil, VarAddr); got != "(none)" {
		t.Errorf("no header: %s", got)
	}
}
