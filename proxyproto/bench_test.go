package proxyproto

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
)

func echo() *funcHandler {
	return &funcHandler{data: func(c eventloop.Conn, b []byte) { _, _ = c.Write(b) }}
}

// BenchmarkEcho is a 64-byte round trip through a loop from a blocking socket,
// with the echo handler as the loop's handler ("raw") or under a Layer after a
// header ("layer"): what the layer adds per read once the header is read.
// Allocations count the whole process, loop included. Compare the two in one
// run; this machine is shared and noisy.
func BenchmarkEcho(b *testing.B) {
	for _, mode := range []string{"raw", "layer"} {
		b.Run(mode, func(b *testing.B) {
			var addr string
			if mode == "raw" {
				addr = startRaw(b, echo())
			} else {
				addr = startServer(b, echo(), Options{}, 1).addrs[0]
			}
			fd := connect(b, addr)
			defer unix.Close(fd)
			if mode == "layer" {
				roundTrip(b, fd, []byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nx"), 1)
			}
			msg := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				roundTrip(b, fd, msg, len(msg))
			}
		})
	}
}

// BenchmarkConnection is a whole connection: connect, a header (for "layer"),
// a 64-byte round trip, close; the layer's cost per connection.
func BenchmarkConnection(b *testing.B) {
	for _, mode := range []string{"raw", "layer-v1", "layer-v2", "layer-v2-tlvs"} {
		b.Run(mode, func(b *testing.B) {
			var addr string
			var hdr []byte
			switch mode {
			case "raw":
				addr = startRaw(b, echo())
			case "layer-v1":
				hdr = []byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n")
			case "layer-v2":
				hdr = v2(0x21, 0x11, inet4Addrs)
			default:
				hdr = v2(0x21, 0x11, inet4Addrs, tlv(TypeUniqueID, "abcdefgh"), tlv(0xEA, "\x01vpce-0123456789abcdef0"))
			}
			if addr == "" {
				addr = startServer(b, echo(), Options{}, 1).addrs[0]
			}
			msg := append(hdr, make([]byte, 64)...)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				fd := connect(b, addr)
				roundTrip(b, fd, msg, 64)
				unix.Close(fd)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"v1-tcp4", []byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n")},
		{"v1-tcp6", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n")},
		{"v2-tcp4", v2(0x21, 0x11, inet4Addrs)},
		{"v2-tcp6-tlvs", v2(0x21, 0x21, inet6Addrs, tlv(TypeALPN, "h2"), tlv(TypeAuthority, "example.com"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, _, err := Parse(c.in, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// startRaw runs a loop with h as its handler, without the layer.
func startRaw(b *testing.B, h eventloop.Handler) string {
	l, err := eventloop.New(eventloop.Config{CPU: -1, Handler: h})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := eventloop.Listen("127.0.0.1:0", 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.AddListener(ln); err != nil {
		b.Fatal(err)
	}
	if err := l.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Stop(); <-l.Done() })
	return ln.Addr().String()
}

func connect(b *testing.B, addr string) int {
	ap := netip.MustParseAddrPort(addr)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		b.Fatal(err)
	}
	return fd
}

// roundTrip writes msg and reads want bytes back.
func roundTrip(b *testing.B, fd int, msg []byte, want int) {
	if _, err := unix.Write(fd, msg); err != nil {
		b.Fatal(err)
	}
	var buf [256]byte
	for got := 0; got < want; {
		n, err := unix.Read(fd, buf[:want-got])
		if err != nil || n == 0 {
			b.Fatalf("read: %d %v", n, err)
		}
		got += n
	}
}

// BenchmarkDispatch measures the layer's cost per read without sockets: on the
// loop's thread, the layer's OnData for a connection whose header is read
// ("layer") against calling the inner handler directly ("direct").
func BenchmarkDispatch(b *testing.B) {
	var n int
	inner := &funcHandler{data: func(c eventloop.Conn, d []byte) { n += len(d) }}
	opened := make(chan *Conn, 1)
	inner.open = func(c eventloop.Conn) { opened <- c.(*Conn) }
	srv := startServer(b, inner, Options{}, 1)
	fd := connect(b, srv.addrs[0])
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("PROXY UNKNOWN\r\n")); err != nil {
		b.Fatal(err)
	}
	c := <-opened
	layer := NewLayer(inner, Options{})
	data := make([]byte, 64)
	for _, mode := range []string{"direct", "layer"} {
		b.Run(mode, func(b *testing.B) {
			done := make(chan struct{})
			b.ReportAllocs()
			b.ResetTimer()
			srv.loop.Run(func() {
				defer close(done)
				if mode == "direct" {
					for range b.N {
						inner.OnData(c, data)
					}
					return
				}
				for range b.N {
					layer.OnData(c.raw, data)
				}
			})
			<-done
		})
	}
}
