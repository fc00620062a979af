package geo

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
)

// benchGeo is a geo block of n networks (IPv4 /24s and IPv6 /48s).
func benchGeo(b *testing.B, n int, ranges bool) *Geo {
	g := &Geo{}
	bl := &builder{g: g, valueOf: map[string]int32{}, nets4: map[netip.Prefix]int32{}, nets6: map[netip.Prefix]int32{},
		chunks: map[uint32][]rng{}, dflt: -1}
	g.Ranges = ranges
	c := &conf.Cursor{}
	for i := range n {
		v := bl.value(fmt.Sprint("v", i%50))
		a := uint32(0x0a000000 + i*0x100)
		if ranges {
			if err := bl.addRange(c, &conf.Stmt{}, "", a, a+0x7f, v); err != nil {
				b.Fatal(err)
			}
			continue
		}
		bl.nets4[netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), 0}), 24)] = v
		bl.nets6[netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/48", i))] = v
	}
	bl.finish()
	return g
}

func benchLookup(b *testing.B, g *Geo, addr string) {
	a := netip.MustParseAddr(addr)
	b.ReportAllocs()
	for b.Loop() {
		if g.Lookup(a) < 0 {
			b.Fatal()
		}
	}
}

// Lookups allocate nothing: a binary search over one slice.
func BenchmarkLookup4(b *testing.B)      { benchLookup(b, benchGeo(b, 10000, false), "10.0.77.5") }
func BenchmarkLookup6(b *testing.B)      { benchLookup(b, benchGeo(b, 10000, false), "2001:db8:77::5") }
func BenchmarkLookupRanges(b *testing.B) { benchLookup(b, benchGeo(b, 10000, true), "10.0.77.5") }

func BenchmarkParseAddr(b *testing.B) {
	in := []byte("2001:db8:77::5")
	b.ReportAllocs()
	for b.Loop() {
		if !ParseAddr(in).IsValid() {
			b.Fatal()
		}
	}
}

func BenchmarkForwardedAddr(b *testing.B) {
	g := &Geo{Proxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ProxyRecursive: true}
	client := netip.MustParseAddr("127.0.0.1")
	xff := [][]byte{[]byte("9.9.9.9, 127.0.0.5")}
	b.ReportAllocs()
	for b.Loop() {
		if g.Addr(client, xff) != netip.AddrFrom4([4]byte{9, 9, 9, 9}) {
			b.Fatal()
		}
	}
}
