package http1

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"
)

// The oracles parse the same head, for a side-by-side figure in one run.

func BenchmarkOracleFastHTTPRequestHead(b *testing.B) {
	head := []byte(browserHead)
	rd := bytes.NewReader(head)
	br := bufio.NewReaderSize(rd, 4096)
	var h fasthttp.RequestHeader
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(head)
		br.Reset(rd)
		h.Reset()
		if err := h.Read(br); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOracleNetHTTPRequestHead(b *testing.B) {
	head := []byte(browserHead)
	rd := bytes.NewReader(head)
	br := bufio.NewReaderSize(rd, 4096)
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(head)
		br.Reset(rd)
		if _, err := http.ReadRequest(br); err != nil {
			b.Fatal(err)
		}
	}
}
