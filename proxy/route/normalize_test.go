package route

import "testing"

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"/a/b/", "/a/b/"},
		{"//a///b//", "/a/b/"},
		{"/a/./b", "/a/b"},
		{"/a/.", "/a/"},
		{"/a/..", "/"},
		{"/a/b/../c", "/a/c"},
		{"/a/b/../../c", "/c"},
		{"/./", "/"},
		{"/.", "/"},
		{"/..a/.b/c..", "/..a/.b/c.."},
		{"/%61dmin", "/admin"},
		{"/%7Euser/%2d", "/~user/-"},
		{"/a/%2e%2E/b", "/b"},
		{"/a/%2e/b", "/a/b"},
		{"/a%2Fb", "/a%2Fb"},
		{"/a%2fb", "/a%2Fb"},
		{"/sp%20ace", "/sp%20ace"},
		{"/%00", "/%00"},
		{"/a//../b", "/b"},
		{"/a/b/c/./../../d", "/a/d"},
	}
	for _, tt := range tests {
		got, err := Normalize(nil, []byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "a", "/..", "/../a", "/a/../..", "/%", "/%4", "/%zz", "/%2e%2e", "/a/%2E%2E/%2e%2e/b"} {
		if got, err := Normalize(nil, []byte(bad)); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", bad, got)
		}
	}
}

func TestNormalizeAppends(t *testing.T) {
	got, err := Normalize([]byte("keep:"), []byte("/a/../b"))
	if err != nil || string(got) != "keep:/b" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func BenchmarkNormalize(b *testing.B) {
	path := []byte("/static//img/../css/%61pp.css")
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Normalize(buf[:0], path); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"/", "/a/../b", "//x/./y/", "/%2e%2e/", "/%41%2F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Normalize(nil, []byte(in))
		if err != nil {
			return
		}
		// A normalised path is stable, starts with "/" and has no "//", "/./" or "/../".
		again, err := Normalize(nil, out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		s := string(out) + "/" // so a last "." or ".." segment shows as "/./" or "/../"
		if len(out) == 0 || out[0] != '/' || contains(string(out), "//") || contains(s, "/./") || contains(s, "/../") {
			t.Fatalf("%q normalised to %q", in, out)
		}
	})
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
