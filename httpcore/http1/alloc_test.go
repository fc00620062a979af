package http1

import "testing"

// The data path must not allocate: parse, look up, iterate, decode, encode.
func TestZeroAllocs(t *testing.T) {
	head := []byte(browserHead)
	var req Request
	var resp Response
	body := AppendLastChunk(AppendChunk(nil, []byte("hello")), []byte("X-Sum: 1\r\n"))
	var d ChunkedDecoder
	dst := make([]byte, 0, 64)
	bad := []byte("GET / HTTP/1.1\r\n\r\n")
	dropping := Request{Names: NameRules{IgnoreInvalid: true}, NamesByHost: allowUnderscores{}}
	underscored := []byte("GET / HTTP/1.1\r\nX_A: 1\r\nHost: u.test\r\nX_B: 1\r\nX.C: 1\r\n\r\n")
	for name, fn := range map[string]func(){
		"request": func() {
			req.Reset()
			if _, err := req.Parse(head); err != nil {
				t.Fatal(err)
			}
		},
		"request split": func() {
			req.Reset()
			req.Parse(head[:100])
			if _, err := req.Parse(head); err != nil {
				t.Fatal(err)
			}
		},
		"request dropping fields": func() {
			dropping.Reset()
			if _, err := dropping.Parse(underscored); err != nil || dropping.Len() != 2 {
				t.Fatal(err, dropping.Len())
			}
		},
		"request error": func() {
			req.Reset()
			if _, err := req.Parse(bad); err == nil {
				t.Fatal("no error")
			}
		},
		"response": func() {
			resp.Reset()
			if _, err := resp.Parse(benchResponseHead); err != nil {
				t.Fatal(err)
			}
		},
		"lookups": func() {
			req.Get("cookie")
			req.Host()
			req.Query()
			for i := 0; i < req.Len(); i++ {
				req.IsHopByHop(i)
			}
			req.ListedInConnection([]byte("A-Field-Name-Longer-Than-Thirty-Two-Bytes"))
			for name, value := range req.All() {
				_, _ = name, value
			}
		},
		"chunked": func() {
			d.Reset()
			p := body
			for len(p) > 0 && !d.Done() {
				n, _, err := d.Decode(p)
				if err != nil {
					t.Fatal(err)
				}
				p = p[n:]
			}
		},
		"encode": func() {
			dst = AppendLastChunk(AppendChunk(dst[:0], head[:10]), nil)
		},
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs", name, n)
		}
	}
}

// allowUnderscores is a NameRulesByHost that allows underscores for every host.
type allowUnderscores struct{}

func (allowUnderscores) NameRulesFor([]byte) NameRules {
	return NameRules{IgnoreInvalid: true, AllowUnderscores: true}
}
