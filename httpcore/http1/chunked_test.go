package http1

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// decodeChunked runs d over input fed in pieces cut at cuts and returns the
// decoded data, how many bytes the body took, and the error.
func decodeChunked(d *ChunkedDecoder, input []byte, cuts []int) ([]byte, int, error) {
	var out []byte
	used, prev := 0, 0
	for _, c := range append(cuts, len(input)) {
		p := input[prev:c]
		prev = c
		for len(p) > 0 && !d.Done() {
			n, data, err := d.Decode(p)
			out = append(out, data...)
			used += n
			if err != nil {
				return out, used, err
			}
			p = p[n:]
		}
		if d.Done() {
			break
		}
	}
	return out, used, nil
}

var chunkedCases = []struct {
	name   string
	body   string
	data   string // decoded data
	fail   bool
	reason string
}{
	{name: "one chunk", body: "5\r\nhello\r\n0\r\n\r\n", data: "hello"},
	{name: "two chunks", body: "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", data: "hello world"},
	{name: "hex upper and lower", body: "A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n", data: "0123456789abcdefghij"},
	{name: "leading zeros", body: "0005\r\nhello\r\n000\r\n\r\n", data: "hello"},
	{name: "empty body", body: "0\r\n\r\n"},
	{name: "extension", body: "5;name=value\r\nhello\r\n0;last\r\n\r\n", data: "hello"},
	{name: "extensions with bws", body: "5; a = b ;c\r\nhello\r\n0\r\n\r\n", data: "hello"},
	{name: "bws before extension", body: "5 ;a\r\nhello\r\n0\r\n\r\n", fail: true},
	{name: "quoted extension", body: "5;a=\"q; \\\"x\\\" y\"\r\nhello\r\n0\r\n\r\n", data: "hello"},
	{name: "trailers", body: "5\r\nhello\r\n0\r\nExpires: never\r\nX-Sum:abc\r\n\r\n", data: "hello"},
	{name: "15 digits", body: "000000000000005\r\nhello\r\n0\r\n\r\n", data: "hello"},

	{name: "empty size", body: "\r\nhello\r\n0\r\n\r\n", fail: true, reason: "invalid chunk size"},
	{name: "non-hex size", body: "g\r\n", fail: true},
	{name: "negative size", body: "-5\r\nhello\r\n", fail: true},
	{name: "plus size", body: "+5\r\nhello\r\n", fail: true},
	{name: "0x prefix", body: "0x5\r\nhello\r\n", fail: true},
	{name: "space before size", body: " 5\r\nhello\r\n", fail: true},
	{name: "whitespace before crlf", body: "5 \r\nhello\r\n0\r\n\r\n", fail: true, reason: "invalid chunk size"},
	{name: "bare lf after size", body: "5\nhello\r\n0\r\n\r\n", fail: true},
	{name: "bare cr after size", body: "5\rhello\r\n0\r\n\r\n", fail: true, reason: "CR not followed by LF"},
	{name: "data too long", body: "5\r\nhelloX\r\n0\r\n\r\n", fail: true, reason: "chunk data not followed by CRLF"},
	{name: "bare lf after data", body: "5\r\nhello\n0\r\n\r\n", fail: true},
	{name: "16 digits", body: "0000000000000005\r\nhello\r\n", fail: true, reason: "chunk size too large"},
	{name: "overflow", body: "8000000000000000\r\n", fail: true},
	{name: "empty ext name", body: "5;\r\nhello\r\n0\r\n\r\n", fail: true},
	{name: "empty ext value", body: "5;a=\r\nhello\r\n0\r\n\r\n", fail: true},
	{name: "unterminated quote", body: "5;a=\"x\r\nhello\r\n0\r\n\r\n", fail: true},
	{name: "ctl in quote", body: "5;a=\"\x01\"\r\nhello\r\n0\r\n\r\n", fail: true},
	{name: "space then crlf after ext", body: "5;a \r\nhello\r\n0\r\n\r\n", fail: true},
	{name: "ext line too long", body: "5;a=" + strings.Repeat("b", 5000) + "\r\nhello\r\n0\r\n\r\n", fail: true, reason: "chunk size line too long"},
	{name: "forbidden trailer", body: "0\r\nContent-Length: 5\r\n\r\n", fail: true, reason: "field not allowed in a trailer"},
	{name: "forbidden trailer case", body: "0\r\nTRANSFER-encoding: chunked\r\n\r\n", fail: true},
	{name: "forbidden trailer prefix", body: "0\r\nX-Forwarded-For-Something-Quite-Long: 1\r\n\r\n", fail: true},
	{name: "allowed trailer like forbidden", body: "0\r\nContent-Lengthy: 5\r\nHosts: a\r\nProxy-Authorization-X: 1\r\n\r\n"},
	{name: "trailer obs-fold", body: "0\r\nX: y\r\n z\r\n\r\n", fail: true, reason: "invalid trailer field"},
	{name: "trailer space before colon", body: "0\r\nX : y\r\n\r\n", fail: true},
	{name: "trailer bare lf", body: "0\r\nX: y\n\r\n", fail: true},
	{name: "trailer no colon", body: "0\r\nX\r\n\r\n", fail: true},
	{name: "trailer ctl", body: "0\r\nX: \x00\r\n\r\n", fail: true},
	{name: "final bare lf", body: "0\r\n\n", fail: true},
	{name: "trailer too large", body: "0\r\nX: " + strings.Repeat("v", 9000) + "\r\n\r\n", fail: true, reason: "trailer section too large"},
}

func TestChunkedTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const next = "GET / HTTP/1.1\r\n"
	for _, tc := range chunkedCases {
		t.Run(tc.name, func(t *testing.T) {
			input := []byte(tc.body + next)
			var whole ChunkedDecoder
			data, used, err := decodeChunked(&whole, input, nil)
			for _, cuts := range splits(len(input), rng) {
				var d ChunkedDecoder
				data2, used2, err2 := decodeChunked(&d, input, cuts)
				if !bytes.Equal(data2, data) || used2 != used || err2 != err {
					t.Fatalf("fed in %d pieces: (%q, %d, %v), whole: (%q, %d, %v)", len(cuts)+1, data2, used2, err2, data, used, err)
				}
			}
			if tc.fail {
				if statusOf(err) != 400 {
					t.Fatalf("got (%q, %v), want a 400", data, err)
				}
				if tc.reason != "" && err.(*ParseError).Reason != tc.reason {
					t.Errorf("reason %q, want %q", err.(*ParseError).Reason, tc.reason)
				}
				return
			}
			if err != nil || !whole.Done() || used != len(tc.body) || string(data) != tc.data {
				t.Fatalf("got (%q, used %d, %v, done %v), want %q used %d", data, used, err, whole.Done(), tc.data, len(tc.body))
			}
		})
	}
}

func TestChunkedUpstreamStatus(t *testing.T) {
	d := ChunkedDecoder{Upstream: true}
	if _, _, err := d.Decode([]byte("x\r\n")); statusOf(err) != 502 {
		t.Fatalf("got %v, want a 502", err)
	}
	d.Reset()
	if !d.Upstream || d.Done() {
		t.Fatal("Reset must keep settings and clear state")
	}
}

func TestChunkedIncompleteIsNotDone(t *testing.T) {
	for _, body := range []string{"", "5", "5\r", "5\r\nhel", "5\r\nhello\r\n", "5\r\nhello\r\n0\r\n", "5\r\nhello\r\n0\r\nX: y\r\n"} {
		var d ChunkedDecoder
		if _, used, err := decodeChunked(&d, []byte(body), nil); err != nil || d.Done() || used != len(body) {
			t.Errorf("%q: used %d err %v done %v", body, used, err, d.Done())
		}
	}
}

func TestChunkedEncodeRoundTrip(t *testing.T) {
	var enc []byte
	var want []byte
	for _, size := range []int{1, 15, 16, 255, 4096, 70000} {
		chunk := bytes.Repeat([]byte{byte('a' + size%26)}, size)
		enc = AppendChunk(enc, chunk)
		want = append(want, chunk...)
	}
	enc = AppendChunk(enc, nil) // no-op: an empty chunk would end the body
	enc = AppendChunkHeader(enc, 3)
	enc = append(enc, "xyz"...)
	enc = AppendChunkEnd(enc)
	want = append(want, "xyz"...)
	enc = AppendLastChunk(enc, []byte("X-Checksum: 1\r\n"))
	var d ChunkedDecoder
	got, used, err := decodeChunked(&d, enc, nil)
	if err != nil || !d.Done() || used != len(enc) || !bytes.Equal(got, want) {
		t.Fatalf("round trip: err %v done %v used %d/%d equal %v", err, d.Done(), used, len(enc), bytes.Equal(got, want))
	}
	if s := string(AppendChunkHeader(nil, 0x1a2b)); s != "1a2b\r\n" {
		t.Errorf("header %q", s)
	}
	if s := string(AppendLastChunk(nil, nil)); s != "0\r\n\r\n" {
		t.Errorf("last chunk %q", s)
	}
}

func TestChunkedMaxOverhead(t *testing.T) {
	ext := ";a=" + strings.Repeat("b", 97) // 100 extension bytes
	cases := []struct {
		name string
		body string
		fail bool
	}{
		{"extensions at the bound", strings.Repeat("1"+ext+"\r\nx\r\n", 3) + "0\r\n\r\n", false},
		{"extensions past the bound", strings.Repeat("1"+ext+"\r\nx\r\n", 4) + "0\r\n\r\n", true},
		{"on the last chunk", strings.Repeat("1"+ext+"\r\nx\r\n", 3) + "0;z\r\n\r\n", true},
		{"trailers count too", strings.Repeat("1"+ext+"\r\nx\r\n", 2) + "0\r\nX: " + strings.Repeat("v", 97) + "\r\n\r\n", true},
		{"trailers alone", "1\r\nx\r\n0\r\nX: " + strings.Repeat("v", 400) + "\r\n\r\n", true},
		{"plain chunks are not overhead", strings.Repeat("1\r\nx\r\n", 1000) + "0\r\n\r\n", false},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			input := []byte(tc.body)
			for _, cuts := range append(splits(len(input), rng), nil) {
				d := ChunkedDecoder{MaxOverhead: 300}
				_, _, err := decodeChunked(&d, input, cuts)
				if tc.fail {
					if pe, ok := err.(*ParseError); !ok || pe.Status != 400 || pe.Reason != "too many chunk extension and trailer bytes" {
						t.Fatalf("got %v, want the overhead error", err)
					}
					continue
				}
				if err != nil || !d.Done() {
					t.Fatalf("got %v (done %v)", err, d.Done())
				}
			}
		})
	}
	d := ChunkedDecoder{MaxOverhead: 300}
	d.Reset()
	if d.MaxOverhead != 300 {
		t.Fatal("Reset must keep MaxOverhead")
	}
}
