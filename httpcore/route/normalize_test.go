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
		{"/a%2Fb", "/a/b"}, // an encoded slash is a slash, as in nginx
		{"/a%2fb", "/a/b"},
		{"/%2Fadmin/x", "/admin/x"},
		{"/x/..%2Fadmin", "/admin"},
		{"/x/%2E%2e%2fadmin", "/admin"},
		{"/a%2F%2F%2Fb", "/a/b"},
		{"/a%5Cb", "/a\\b"}, // a backslash is no separator (nginx on Linux)
		{"/a%5C..%5Cb", "/a\\..\\b"},
		{"/a%252Fb", "/a%2Fb"}, // decoded once
		{"/a%25/..", "/"},
		{"/a;p=1/../b", "/b"}, // ";" parameters are part of the segment
		{"/sp%20ace", "/sp ace"},
		{"/%0D%0A", "/\r\n"},
		{"/%3F%23", "/?#"},
		{"/%E2%82%AC", "/\xe2\x82\xac"},
		{"", "/"}, // absolute-form without a path
		{"/a//../b", "/b"},
		{"/a/b/c/./../../d", "/a/d"},
	}
	for _, tt := range tests {
		got, err := Normalize(nil, []byte(tt.in), true)
		if err != nil || string(got) != tt.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"a", "/..", "/../a", "/a/../..", "/%", "/%4", "/%zz", "/%2e%2e", "/a/%2E%2E/%2e%2e/b",
		"/%00", "/a%00b", "/%2F..", "/a/..%2F..", "/x%2F..%2F..%2Fy"} {
		if got, err := Normalize(nil, []byte(bad), true); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", bad, got)
		}
	}
}

// TestNormalizeKeepsSlashes: with merge_slashes off runs of slashes stay, and ".."
// climbs back over one of them only, as nginx's ngx_http_parse_complex_uri.
func TestNormalizeKeepsSlashes(t *testing.T) {
	for in, want := range map[string]string{
		"//a///b//": "//a///b//",
		"/a//../b":  "/a/b",
		"/a/./b":    "/a/b",
		"/a%2F%2Fb": "/a//b",
		"/x//":      "/x//",
	} {
		if got, err := Normalize(nil, []byte(in), false); err != nil || string(got) != want {
			t.Errorf("Normalize(%q, no merge) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestNormalizeAppends(t *testing.T) {
	got, err := Normalize([]byte("keep:"), []byte("/a/../b"), true)
	if err != nil || string(got) != "keep:/b" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func BenchmarkNormalize(b *testing.B) {
	for _, path := range []string{"/static//img/../css/%61pp.css", "/static/small.html"} {
		b.Run(path, func(b *testing.B) {
			path := []byte(path)
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := Normalize(buf[:0], path, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestNormalizeFastPath: every short path over the characters that matter
// normalises through the fast path as through the general loop.
func TestNormalizeFastPath(t *testing.T) {
	const alphabet = "/.a%2ef\x00"
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		for _, keep := range []bool{false, true} {
			checkNormalized(t, prefix, keep)
		}
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			gen(prefix+alphabet[i:i+1], n-1)
		}
	}
	gen("/", 6)
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"/", "/a/../b", "//x/./y/", "/%2e%2e/", "/%41%2F", "/%252F%2F", "/a%5C..%2F.%2e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, keepSlashes := range []bool{false, true} {
			checkNormalized(t, in, keepSlashes)
		}
	})
}

func checkNormalized(t *testing.T, in string, keepSlashes bool) {
	out, err := Normalize(nil, []byte(in), !keepSlashes)
	if len(in) > 0 && in[0] == '/' {
		// The fast path for paths already normal answers as the general loop.
		slow, serr := normalize(nil, []byte(in), !keepSlashes)
		if string(slow) != string(out) || (serr == nil) != (err == nil) {
			t.Fatalf("%q: %q, %v; the general case gives %q, %v", in, out, err, slow, serr)
		}
	}
	if err != nil {
		return
	}
	// A normalised path, escaped as it goes upstream, decodes to itself; it starts
	// with "/" and has no "/./" or "/../" (nor "//" with merge_slashes on).
	again, err := Normalize(nil, AppendEscaped(nil, out), !keepSlashes)
	if err != nil || string(again) != string(out) {
		t.Fatalf("not stable: %q -> %q -> escaped and normalised %q (%v)", in, out, again, err)
	}
	s := string(out) + "/" // so a last "." or ".." segment shows as "/./" or "/../"
	if len(out) == 0 || out[0] != '/' || !keepSlashes && contains(string(out), "//") || contains(s, "/./") || contains(s, "/../") {
		t.Fatalf("%q normalised to %q", in, out)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
