package http1

import (
	"math/rand/v2"
	"strings"
	"testing"
)

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
		// Every length to 17 (short, one word, words with an overlapping last one)
		// and every position.
		for n := 1; n <= 17; n++ {
			for pos := 0; pos < n; pos++ {
				v := []byte("abcdefghijklmnopq"[:n])
				v[pos] = byte(c)
				if got := validFieldValue(v); got != want {
					t.Fatalf("byte %#x at %d of %d: %v", c, pos, n, got)
				}
			}
		}
	}
}

// hostRules is a NameRulesByHost that allows underscores for hosts starting with
// "u." only.
type hostRules struct{ asked []string }

func (h *hostRules) NameRulesFor(host []byte) NameRules {
	h.asked = append(h.asked, string(host))
	return NameRules{IgnoreInvalid: true, AllowUnderscores: len(host) > 2 && string(host[:2]) == "u."}
}

func fieldNames(r *Request) []string {
	var names []string
	for name := range r.All() {
		names = append(names, string(name))
	}
	return names
}

func TestNameRules(t *testing.T) {
	head := "GET / HTTP/1.1\r\nX_Before: 1\r\nX.Dot: 1\r\nHost: HOST\r\nX_Forwarded_For: 6.6.6.6\r\nX~Tilde: 1\r\nX-Ok_: 1\r\n_: 1\r\nX-OK-9: 1\r\n\r\n"
	for _, tc := range []struct {
		rules  NameRules
		byHost bool
		host   string
		want   string
	}{
		{NameRules{}, false, "a", "X_Before X.Dot Host X_Forwarded_For X~Tilde X-Ok_ _ X-OK-9"},
		{NameRules{AllowUnderscores: true}, false, "a", "X_Before X.Dot Host X_Forwarded_For X~Tilde X-Ok_ _ X-OK-9"},
		{NameRules{IgnoreInvalid: true}, false, "a", "Host X-OK-9"},
		{NameRules{IgnoreInvalid: true, AllowUnderscores: true}, false, "a", "X_Before Host X_Forwarded_For X-Ok_ _ X-OK-9"},
		// From Host on, the rules of the server the host selects.
		{NameRules{IgnoreInvalid: true}, true, "u.test", "Host X_Forwarded_For X-Ok_ _ X-OK-9"},
		{NameRules{IgnoreInvalid: true, AllowUnderscores: true}, true, "d.test", "X_Before Host X-OK-9"},
	} {
		input := []byte(strings.Replace(head, "HOST", tc.host, 1))
		for _, cuts := range splits(len(input), rand.New(rand.NewPCG(1, 2))) {
			var r Request
			r.Names = tc.rules
			var hr hostRules
			if tc.byHost {
				r.NamesByHost = &hr
			}
			if _, err := feed(&r, input, cuts); err != nil {
				t.Fatalf("%+v: %v", tc.rules, err)
			}
			if got := strings.Join(fieldNames(&r), " "); got != tc.want {
				t.Errorf("%+v by host %q: fields %q, want %q", tc.rules, tc.host, got, tc.want)
			}
			if tc.byHost && (len(hr.asked) != 1 || hr.asked[0] != tc.host) {
				t.Errorf("asked for %q", hr.asked)
			}
			if h := r.Host(); string(h) != tc.host {
				t.Errorf("Host %q", h)
			}
		}
	}
	// An absolute-form target selects the server: its rules apply from the start.
	var r Request
	var hr hostRules
	r.Names, r.NamesByHost = NameRules{IgnoreInvalid: true}, &hr
	if _, err := r.Parse([]byte("GET http://u.abs/ HTTP/1.1\r\nX_A: 1\r\nHost: d.test\r\nX_B: 1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fieldNames(&r), " "); got != "X_A Host X_B" || len(hr.asked) != 1 || hr.asked[0] != "u.abs" {
		t.Errorf("absolute form: %q, asked %q", got, hr.asked)
	}
	// Names that are not tokens stay a 400 whatever the rules (nginx drops some).
	for _, bad := range []string{"X(Y: 1", "X/Y: 1", "X@Y: 1", "X\x80Y: 1"} {
		r.Reset()
		if _, err := r.Parse([]byte("GET / HTTP/1.1\r\nHost: a\r\n" + bad + "\r\n\r\n")); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Dropped fields do not count against MaxHeaders.
	r.Reset()
	r.NamesByHost = nil
	many := "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X_Y: 1\r\n", MaxHeaderFields+5) + "\r\n"
	if _, err := r.Parse([]byte(many)); err != nil || r.Len() != 1 {
		t.Errorf("many dropped fields: %v, %d kept", err, r.Len())
	}
}
