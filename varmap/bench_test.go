package varmap

import "testing"

func benchMap(b *testing.B) *Map {
	lines := [][2]string{{"hostnames", ""}, {"default", "none"}}
	for _, h := range []string{"example.com", "www.example.org", "api.example.net", "static.example.io"} {
		lines = append(lines, [2]string{h, "exact-" + h})
	}
	lines = append(lines, [2]string{"*.example.com", "star"}, [2]string{".example.org", "dot"}, [2]string{"www.example.*", "tail"},
		[2]string{`~^(?<sub>\w+)\.test$`, "re"})
	m, err := Build("$host", "v", lines)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func benchFind(b *testing.B, key string, want string) {
	m := benchMap(b)
	k := []byte(key)
	scratch := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		if r := m.Find(k, scratch, nil); m.Values[r.Value].Text != want {
			b.Fatalf("%q", m.Values[r.Value].Text)
		}
	}
}

// Lookups without a regex allocate nothing.
func BenchmarkFindExact(b *testing.B)      { benchFind(b, "api.example.net", "exact-api.example.net") }
func BenchmarkFindExactUpper(b *testing.B) { benchFind(b, "API.Example.NET", "exact-api.example.net") }
func BenchmarkFindHead(b *testing.B)       { benchFind(b, "a.b.example.com", "star") }
func BenchmarkFindTail(b *testing.B)       { benchFind(b, "www.example.de", "tail") }
func BenchmarkFindDefault(b *testing.B)    { benchFind(b, "nothing.here", "none") }

// BenchmarkFindRegex: a regex key without captures asked for (caps nil) allocates
// nothing either.
func BenchmarkFindRegex(b *testing.B) { benchFind(b, "abc.test", "re") }

// BenchmarkFindRegexCaptures: a regex key whose captures are asked for allocates
// nothing.
func BenchmarkFindRegexCaptures(b *testing.B) {
	m := benchMap(b)
	k := []byte("abc.test")
	scratch := make([]byte, 0, 64)
	caps := make([]int, 20)
	b.ReportAllocs()
	for b.Loop() {
		if r := m.Find(k, scratch, caps); r.NCaps != 4 || caps[2] != 0 || caps[3] != 3 {
			b.Fatalf("%+v %v", r, caps)
		}
	}
}

// BenchmarkFindUserAgent is the bench's reqlogic map (regex keys only, none
// matching) on a browser's User-Agent, with captures asked for as a request does.
func BenchmarkFindUserAgent(b *testing.B) {
	m, err := Build("$http_user_agent", "is_bot", [][2]string{{"default", "0"},
		{`~*(googlebot|bingbot|yandex|baiduspider)`, "1"}, {`~*(crawler|spider|bot)/(\d+)`, "1"}})
	if err != nil {
		b.Fatal(err)
	}
	k := []byte("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")
	scratch := make([]byte, 0, 128)
	caps := make([]int, m.MaxCaptures())
	b.ReportAllocs()
	for b.Loop() {
		if r := m.Find(k, scratch, caps); r.Found {
			b.Fatalf("%+v", r)
		}
	}
}
