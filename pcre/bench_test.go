package pcre

import (
	"regexp"
	"testing"
)

var benchSubject = []byte("/static/images/2024/photo_big.JPG")

// BenchmarkMatch: a capture-less match ("location ~* \.(gif|jpg)$") allocates nothing.
func BenchmarkMatch(b *testing.B) {
	re := MustCompile(`\.(?:gif|jpe?g|png)$`, true)
	b.ReportAllocs()
	for b.Loop() {
		if !re.Match(benchSubject) {
			b.Fatal("no match")
		}
	}
}

// uriPatterns are captures as configurations write them, each with a subject it
// matches: location, rewrite, if and map patterns.
var uriPatterns = []struct {
	name, pattern, subject string
	caseless               bool
}{
	{"static", `^/static/(\w+)/(\d+)/(?<name>[^/]+)\.(jpg|png)$`, string(benchSubject), true},
	{"rewrite", `^/old/(.*)$`, "/old/articles/2024/some-title", false},
	{"api", `^/api/v(\d+)/(\w+)/(\d+)$`, "/api/v2/users/12345", false},
	{"unanchored", `/(images|css|js)/([^/]+)$`, "/assets/site/images/logo.png", false},
	{"useragent", `(?i)(bot|crawler|spider)`, "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", false},
	{"ext", `\.(?<ext>php|cgi)(/.*)?$`, "/index.php/some/path", false},
}

// BenchmarkExecCaptures: a match with captures allocates nothing; the ns/op are
// the backtracker's, against BenchmarkGoSubmatch's.
func BenchmarkExecCaptures(b *testing.B) {
	for _, p := range uriPatterns {
		b.Run(p.name, func(b *testing.B) {
			re := MustCompile(p.pattern, p.caseless)
			caps := make([]int, re.CapLen())
			subject := []byte(p.subject)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := re.Exec(subject, caps); !ok {
					b.Fatal("no match")
				}
			}
		})
	}
}

// BenchmarkGoSubmatch is BenchmarkExecCaptures through Go's regexp, as Exec was
// before the backtracker: one allocation per match.
func BenchmarkGoSubmatch(b *testing.B) {
	for _, p := range uriPatterns {
		b.Run(p.name, func(b *testing.B) {
			re := MustCompile(p.pattern, p.caseless)
			subject := []byte(p.subject)
			b.ReportAllocs()
			for b.Loop() {
				if re.re.FindSubmatchIndex(subject) == nil {
					b.Fatal("no match")
				}
			}
		})
	}
}

// TestExecAllocs: a match with captures allocates nothing once the scratch pool
// holds a state (the race detector's pool drops some Puts: skipped under it).
func TestExecAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	for _, p := range uriPatterns {
		re := MustCompile(p.pattern, p.caseless)
		caps := make([]int, re.CapLen())
		subject := []byte(p.subject)
		if a := testing.AllocsPerRun(100, func() {
			if _, ok := re.Exec(subject, caps); !ok {
				t.Fatalf("%s: no match", p.name)
			}
		}); a != 0 {
			t.Errorf("%s: %v allocations per match", p.name, a)
		}
	}
}

// BenchmarkExecNoMatch: a failed match with captures allocates nothing.
func BenchmarkExecNoMatch(b *testing.B) {
	re := MustCompile(`^/api/(\w+)/(\d+)$`, false)
	caps := make([]int, re.CapLen())
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := re.Exec(benchSubject, caps); ok {
			b.Fatal("match")
		}
	}
}

// BenchmarkGoFoldCase compares the ASCII-only folding of the translation ([jJ][pP][gG])
// with Go's own (?i), which the translation cannot use (it folds the Kelvin sign).
func BenchmarkGoFoldCase(b *testing.B) {
	re := regexp.MustCompile(`(?i)\.(?:gif|jpe?g|png)\z`)
	b.ReportAllocs()
	for b.Loop() {
		if !re.Match(benchSubject) {
			b.Fatal("no match")
		}
	}
}

// BenchmarkMatchCapturing is BenchmarkExecCaptures/static's pattern matched
// without reading the groups: the difference is the cost of captures.
func BenchmarkMatchCapturing(b *testing.B) {
	re := MustCompile(`^/static/(\w+)/(\d+)/(?<name>[^/]+)\.(jpg|png)$`, true)
	b.ReportAllocs()
	for b.Loop() {
		if !re.Match(benchSubject) {
			b.Fatal("no match")
		}
	}
}

// firefoxUA is a browser's User-Agent: the crawler patterns of a map match none of it.
const firefoxUA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

// BenchmarkUANoMatch: User-Agent patterns failing on a browser's agent, through
// Exec (the backtracker, as a map key) and through Match (Go's regexp).
func BenchmarkUANoMatch(b *testing.B) {
	for _, p := range []string{`(googlebot|bingbot|yandex|baiduspider)`, `(crawler|spider|bot)/(\d+)`} {
		b.Run(p, func(b *testing.B) {
			re := MustCompile(p, true)
			caps := make([]int, re.CapLen())
			for b.Loop() {
				if _, ok := re.ExecString(firefoxUA, caps); ok {
					b.Fatal("match")
				}
			}
		})
		b.Run("go/"+p, func(b *testing.B) {
			re := MustCompile(p, true)
			for b.Loop() {
				if re.MatchString(firefoxUA) {
					b.Fatal("match")
				}
			}
		})
	}
}

// BenchmarkMatchUA: capture-less unanchored case-insensitive patterns (location
// ~*, if ~*) over a User-Agent that holds a word they need, so that no prefilter
// decides: the matcher itself runs.
func BenchmarkMatchUA(b *testing.B) {
	ua := []byte("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html) AppleWebKit/537.36 Chrome/120.0 Safari/537.36")
	for _, p := range []string{`chrome/1[0-1]\d`, `googlebot/\d+\.\d+;\s+\+https?://www\.bing`, `safari/\d+`} {
		re := MustCompile(p, true)
		want := regexp.MustCompile(re.RE2()).Match(ua)
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if re.Match(ua) != want {
					b.Fatal("differs from Go's regexp")
				}
			}
		})
	}
}
