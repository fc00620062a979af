package http1_test

import (
	"fmt"

	"github.com/numaproxy/numaproxy/httpcore/http1"
)

func Example() {
	// Bytes arrive in pieces; the buffer only grows until the head is parsed.
	pieces := []string{"POST /upload?x=1 HTTP/1.1\r\nHo", "st: example.com\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", "lo\r\n0\r\n\r\n"}
	var buf []byte
	var req http1.Request
	var dec http1.ChunkedDecoder
	for _, piece := range pieces {
		buf = append(buf, piece...)
		if !req.Done() {
			n, err := req.Parse(buf)
			if err == http1.ErrNeedMore {
				continue
			}
			if err != nil {
				fmt.Println("answer", err.(*http1.ParseError).Status)
				return
			}
			fmt.Printf("%s %s host=%s framing=%v\n", req.Method(), req.Path(), req.Host(), req.Framing())
			buf = buf[n:] // a real server keeps the head until it is done with it
		}
		for len(buf) > 0 && !dec.Done() {
			n, data, err := dec.Decode(buf)
			if err != nil {
				fmt.Println("answer", err.(*http1.ParseError).Status)
				return
			}
			if len(data) > 0 {
				fmt.Printf("data %q\n", data)
			}
			buf = buf[n:]
		}
	}
	fmt.Println("done", dec.Done())
	// Output:
	// POST /upload host=example.com framing=chunked
	// data "hel"
	// data "lo"
	// done true
}

func ExampleResponse() {
	var resp http1.Response
	resp.HeadRequest = false // true when answering a HEAD request
	n, err := resp.Parse([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
	fmt.Println(n, err, resp.StatusCode(), resp.Framing(), resp.ContentLength(), resp.KeepAlive())
	// Output: 57 <nil> 200 content-length 2 false
}

func ExampleAppendChunk() {
	out := http1.AppendChunk(nil, []byte("hello"))
	out = http1.AppendLastChunk(out, nil)
	fmt.Printf("%q\n", out)
	// Output: "5\r\nhello\r\n0\r\n\r\n"
}
