package http1

import (
	"bytes"
	"testing"
)

func BenchmarkRequestHead(b *testing.B) {
	head := []byte(browserHead)
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	var r Request
	for b.Loop() {
		r.Reset()
		if _, err := r.Parse(head); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestHeadSplit feeds the same head in 64-byte reads.
func BenchmarkRequestHeadSplit(b *testing.B) {
	head := []byte(browserHead)
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	var r Request
	for b.Loop() {
		r.Reset()
		for end := 64; ; end += 64 {
			if end > len(head) {
				end = len(head)
			}
			_, err := r.Parse(head[:end])
			if err == nil {
				break
			}
			if err != ErrNeedMore {
				b.Fatal(err)
			}
		}
	}
}

var benchResponseHead = []byte("HTTP/1.1 200 OK\r\n" +
	"Server: nginx/1.26.2\r\n" +
	"Date: Sat, 29 Nov 2025 21:44:00 GMT\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"Content-Length: 16384\r\n" +
	"Connection: keep-alive\r\n" +
	"Last-Modified: Fri, 28 Nov 2025 10:00:00 GMT\r\n" +
	"ETag: \"6749a3c0-4000\"\r\n" +
	"Cache-Control: max-age=3600\r\n" +
	"Accept-Ranges: bytes\r\n" +
	"\r\n")

func BenchmarkResponseHead(b *testing.B) {
	b.SetBytes(int64(len(benchResponseHead)))
	b.ReportAllocs()
	var r Response
	for b.Loop() {
		r.Reset()
		if _, err := r.Parse(benchResponseHead); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChunkedDecode(b *testing.B) {
	var body []byte
	chunk := bytes.Repeat([]byte("x"), 4096)
	for range 16 {
		body = AppendChunk(body, chunk)
	}
	body = AppendLastChunk(body, nil)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var d ChunkedDecoder
	for b.Loop() {
		d.Reset()
		p := body
		for len(p) > 0 && !d.Done() {
			n, _, err := d.Decode(p)
			if err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
	}
}

func BenchmarkChunkedEncode(b *testing.B) {
	chunk := bytes.Repeat([]byte("x"), 4096)
	dst := make([]byte, 0, 80<<10)
	b.SetBytes(16 * 4096)
	b.ReportAllocs()
	for b.Loop() {
		dst = dst[:0]
		for range 16 {
			dst = AppendChunk(dst, chunk)
		}
		dst = AppendLastChunk(dst, nil)
	}
}

func BenchmarkHeadersGet(b *testing.B) {
	var r Request
	if _, err := r.Parse([]byte(browserHead)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Get("sec-fetch-dest"); !ok {
			b.Fatal("missing")
		}
	}
}
