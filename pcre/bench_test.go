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

// BenchmarkExecCaptures: a match with captures costs Go's one allocation.
func BenchmarkExecCaptures(b *testing.B) {
	re := MustCompile(`^/static/(\w+)/(\d+)/(?<name>[^/]+)\.(jpg|png)$`, true)
	caps := make([]int, re.CapLen())
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := re.Exec(benchSubject, caps); !ok {
			b.Fatal("no match")
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

// BenchmarkMatchCapturing is BenchmarkExecCaptures's pattern matched without
// reading the groups: the difference is the cost of captures, allocation included.
func BenchmarkMatchCapturing(b *testing.B) {
	re := MustCompile(`^/static/(\w+)/(\d+)/(?<name>[^/]+)\.(jpg|png)$`, true)
	b.ReportAllocs()
	for b.Loop() {
		if !re.Match(benchSubject) {
			b.Fatal("no match")
		}
	}
}

// BenchmarkAlloc80 is the allocation Exec makes on a match, alone.
func BenchmarkAlloc80(b *testing.B) {
	b.ReportAllocs()
	var sink []int
	for b.Loop() {
		sink = make([]int, 10)
	}
	_ = sink
}
