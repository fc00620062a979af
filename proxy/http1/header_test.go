package http1

import "testing"

func TestEqualFold(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"Content-Length", "content-length", true},
		{"CONTENT-LENGTH", "Content-Length", true},
		{"Content-Lengt", "Content-Length", false},
		{"K", "\u212a", false}, // Kelvin sign folds to k in Unicode, not in HTTP
		{"a[", "A{", false},
		{"", "", true},
	} {
		if got := EqualFold([]byte(tc.a), tc.b); got != tc.want {
			t.Errorf("EqualFold(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestIsHopByHopName(t *testing.T) {
	for _, name := range []string{"Connection", "keep-alive", "TE", "Transfer-Encoding", "upgrade", "Proxy-Connection"} {
		if !IsHopByHopName([]byte(name)) {
			t.Errorf("%s should be hop-by-hop", name)
		}
	}
	for _, name := range []string{"Host", "Trailer", "Content-Length", "Te-X", "Upgrades"} {
		if IsHopByHopName([]byte(name)) {
			t.Errorf("%s should not be hop-by-hop", name)
		}
	}
}

func TestHeadersLookup(t *testing.T) {
	var r Request
	head := "GET / HTTP/1.1\r\nHost: a\r\nX-Multi: 1\r\nx-multi: 2\r\nConnection: keep-alive , X-Multi\r\n\r\n"
	if _, err := r.Parse([]byte(head)); err != nil {
		t.Fatal(err)
	}
	v, ok := r.Get("X-MULTI")
	if !ok || string(v) != "1" {
		t.Fatalf("Get = %q %v", v, ok)
	}
	var values []string
	for i := r.Index("x-multi", 0); i >= 0; i = r.Index("x-multi", i+1) {
		values = append(values, string(r.Value(i)))
	}
	if len(values) != 2 || values[1] != "2" {
		t.Fatalf("repeated values %q", values)
	}
	if _, ok := r.Get("Missing"); ok {
		t.Fatal("found a missing field")
	}
	var names []string
	for name, value := range r.All() {
		names = append(names, string(name)+"="+string(value))
	}
	if len(names) != 4 || names[3] != "Connection=keep-alive , X-Multi" {
		t.Fatalf("All = %q", names)
	}
	if !r.IsHopByHop(1) || !r.IsHopByHop(2) || !r.IsHopByHop(3) || r.IsHopByHop(0) {
		t.Fatal("X-Multi is listed in Connection")
	}
}

func TestValidFieldValue(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := c == '\t' || c >= 0x20 && c != 0x7f
		for _, pos := range []int{0, 3, 7, 8, 13, 16} {
			v := []byte("abcdefghijklmnopq")
			v[pos] = byte(c)
			if got := validFieldValue(v); got != want {
				t.Fatalf("byte %#x at %d: %v", c, pos, got)
			}
		}
	}
}
