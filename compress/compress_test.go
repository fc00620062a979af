package compress

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/numaproxy/numaproxy/httpcore"
)

// TestGzipAccepted is nginx's reading of Accept-Encoding for gzip, quirks included
// (the differential integration test checks the same against nginx itself).
func TestGzipAccepted(t *testing.T) {
	for ae, want := range map[string]bool{
		"gzip": true, "gzip,": true, "gzip, deflate": true, "deflate, gzip": true, "deflate,gzip": true,
		"GZIP": true, "x-gzip": false, "gzipx": false, "gzip;q=0": false, "gzip; q=0.000": false,
		"gzip;q=0.5": true, "gzip;q=1": true, "gzip;q=1.0": true, "gzip;q=1.5": false, "gzip;q=0.0001": false,
		"gzip;q=": false, "gzip;level=1": false, "gzip ;q=0": false, "gzip ; q=0.2": true, "gzip;  q=0.2": true,
		"*": false, "": false, "deflateq=5gzipgzip": true, "x-gzipgzip": true, "x-gzip,gzip": true, "gzi": false, "deflate, x-gzip, gzip": true, "gzip;Q=0.1": true,
	} {
		if got := gzipAccepted([]byte(ae)); got != want {
			t.Errorf("gzipAccepted(%q) = %v, want %v", ae, got, want)
		}
	}
}

func TestQuality(t *testing.T) {
	for _, c := range []struct {
		ae, coding string
		want       int
	}{
		{"br", "br", 1000}, {"gzip, br;q=0.8", "br", 800}, {"br;q=0", "br", 0}, {"BR ; Q=0.25", "br", 250},
		{"gzip", "br", -1}, {"*", "br", -1}, {"br;q=1.1", "br", 0}, {"br;q=0.1234", "br", 0},
		{"zstd;q=0.9,br", "zstd", 900}, {"br;foo=1;q=0.5", "br", 500},
	} {
		if got := quality([]byte(c.ae), c.coding); got != c.want {
			t.Errorf("quality(%q, %s) = %d, want %d", c.ae, c.coding, got, c.want)
		}
	}
}

func TestContentTypeMatch(t *testing.T) {
	types := Types{names: map[string]bool{"text/html": true, "text/plain": true}}
	for ct, want := range map[string]bool{
		"text/html": true, "TEXT/HTML": true, "text/plain; charset=utf-8": true, "text/plain;charset=utf-8": true,
		"text/plain; foo=bar": false, "text/plain ;charset=utf-8": false, "text/plainx": false, "": false,
		"text/plain; foo=bar; charset=x": false, // the type ends at the ; before charset
	} {
		if got := types.match([]byte(ct)); got != want {
			t.Errorf("match(%q) = %v, want %v", ct, got, want)
		}
	}
	if !(&Types{Any: true}).match(nil) {
		t.Error("* does not match a response without a type")
	}
}

func TestMSIE6(t *testing.T) {
	for ua, want := range map[string]bool{
		"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)":      true,
		"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)": false,
		"Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)":          true,
		"Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)":      false,
		"Opera/9.0 (compatible; MSIE 5.0)":                        false,
		"MSIE 6.":                                                 false, // too short
	} {
		if got := isMSIE6([]byte(ua)); got != want {
			t.Errorf("isMSIE6(%q) = %v, want %v", ua, got, want)
		}
	}
}

// TestRatio is $gzip_ratio's arithmetic, nginx's rounding included.
func TestRatio(t *testing.T) {
	for _, c := range []struct {
		in, out int64
		want    string
	}{
		{1000, 100, "10.00"}, {2125, 1000, "2.13"}, {2124, 1000, "2.12"}, {1999, 1000, "2.00"}, {10, 20, "0.50"}, {1, 3, "0.33"},
	} {
		if got := string(appendRatio(nil, c.in, c.out)); got != c.want {
			t.Errorf("ratio %d/%d = %s, want %s", c.in, c.out, got, c.want)
		}
	}
}

// stream runs body through the encode (or gunzip) body filter in pieces cut at
// random points, with flushes in between, and returns what came out.
func stream(t testing.TB, l *loopState, m mode, e Encoding, level int, body []byte, rng *rand.Rand) []byte {
	var out bytes.Buffer
	lastSeen := false
	ctx := &reqCtx{mode: m, enc: e, level: level, limit: 4096, loop: l}
	ctx.next = func(_ *httpcore.Request, o *httpcore.Out) {
		if lastSeen {
			t.Fatal("output after the last piece")
		}
		out.Write(o.Data)
		lastSeen = o.Last
	}
	for len(body) > 0 {
		n := min(len(body), 1+rng.IntN(1+min(len(body), 1<<17)))
		o := &httpcore.Out{Data: body[:n], Flush: rng.IntN(8) == 0}
		body = body[n:]
		if m == encoding {
			ctx.encode(o)
		} else {
			ctx.gunzip(o)
		}
	}
	if m == encoding {
		ctx.encode(&httpcore.Out{Last: true})
	} else {
		ctx.gunzip(&httpcore.Out{Last: true})
	}
	if !lastSeen {
		t.Fatal("no last piece")
	}
	ctx.release()
	return out.Bytes()
}

func decode(t testing.TB, e Encoding, p []byte) []byte {
	var r io.Reader
	switch e {
	case Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case Brotli:
		r = brotli.NewReader(bytes.NewReader(p))
	case Zstd:
		zr, err := zstd.NewReader(bytes.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	d, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", e, err)
	}
	return d
}

func text(n int, rng *rand.Rand) []byte {
	words := []string{"<div>", "numaproxy ", "gzip ", "</div>\n", "stream ", "x", "0123"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(50) == 0 {
			b.WriteByte(byte(rng.Uint32()))
		}
	}
	return b.Bytes()[:n]
}

// TestStreamRoundTrip: bodies from 0 bytes to 10 MiB, cut at random points, encode
// to what decodes to them with each coding, and a gzip body gunzips to its origin,
// with encoders and inflaters reused across bodies.
func TestStreamRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	l := newLoop(nil).(*loopState)
	sizes := []int{0, 1, 19, 100, 4095, 4096, 65537, 1 << 20, 10 << 20}
	for _, n := range sizes {
		body := text(n, rng)
		for e := range numEncodings {
			if n == 10<<20 && e == Brotli && testing.Short() {
				continue
			}
			level := defaultLevel[e]
			if got := decode(t, e, stream(t, l, encoding, e, level, body, rng)); !bytes.Equal(got, body) {
				t.Fatalf("%s of %d bytes decodes to %d bytes unlike the input", e, n, len(got))
			}
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(body)
		zw.Close()
		if got := stream(t, l, gunzipping, 0, 0, gz.Bytes(), rng); !bytes.Equal(got, body) {
			t.Fatalf("gunzip of %d bytes gives %d bytes unlike the input", n, len(got))
		}
	}
}

// FuzzStream: any body, any cut, any coding round-trips.
func FuzzStream(f *testing.F) {
	f.Add([]byte("hello, hello, hello"), uint64(1), uint8(0))
	f.Add(bytes.Repeat([]byte("abc"), 5000), uint64(2), uint8(1))
	f.Add([]byte{}, uint64(3), uint8(2))
	l := newLoop(nil).(*loopState) // encoders reused across inputs, as on a loop
	f.Fuzz(func(t *testing.T, body []byte, seed uint64, coding uint8) {
		rng := rand.New(rand.NewPCG(seed, seed))
		e := Encoding(coding % uint8(numEncodings))
		if got := decode(t, e, stream(t, l, encoding, e, defaultLevel[e], body, rng)); !bytes.Equal(got, body) {
			t.Fatalf("%s round trip of %d bytes gives %d", e, len(body), len(got))
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(body)
		zw.Close()
		if got := stream(t, l, gunzipping, 0, 0, gz.Bytes(), rng); !bytes.Equal(got, body) {
			t.Fatalf("gunzip of %d bytes gives %d", len(body), len(got))
		}
	})
}

// TestEncodeAllocs: once a loop's pool holds an encoder, compressing a response
// allocates nothing with gzip and brotli; klauspost's zstd encoder allocates its
// frame header and checksum buffers (they escape through io.Writer), 2 a response.
func TestEncodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	body := text(64<<10, rand.New(rand.NewPCG(1, 1)))
	l := newLoop(nil).(*loopState)
	for e := range numEncodings {
		ctx := &reqCtx{mode: encoding, enc: e, level: defaultLevel[e], limit: 128 << 10, loop: l}
		ctx.next = func(*httpcore.Request, *httpcore.Out) {}
		in := &httpcore.Out{}
		run := func() {
			ctx.finished = false
			for p := body; len(p) > 0; p = p[min(len(p), 8192):] {
				*in = httpcore.Out{Data: p[:min(len(p), 8192)]}
				ctx.encode(in)
			}
			*in = httpcore.Out{Last: true}
			ctx.encode(in)
		}
		run() // the pool gets its encoder
		if n := testing.AllocsPerRun(20, run); n > map[Encoding]float64{Zstd: 2}[e] {
			t.Errorf("%s: %.1f allocations per response", e, n)
		}
	}
}
