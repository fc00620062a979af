package static

import (
	"testing"
)

// The parsers read what clients send: they must not panic, and what they accept
// must make sense.
func FuzzParseRanges(f *testing.F) {
	for _, s := range []string{"0-4", "-3", "6-", " 1 - 2 , 4-5", "0-1,3-4,8-", "99999999999999999999-", ",", "-", ""} {
		f.Add(s, int64(12), 3)
	}
	f.Fuzz(func(t *testing.T, v string, length int64, max int) {
		if length < 0 {
			length = -length
		}
		rs, res := parseRanges([]byte(v), length, max, nil)
		if res != rangesOK {
			return
		}
		var total int64
		for _, r := range rs {
			if r.start < 0 || r.start >= r.end || r.end > length {
				t.Fatalf("%q of %d: range [%d,%d)", v, length, r.start, r.end)
			}
			total += r.end - r.start
		}
		if total > length {
			t.Fatalf("%q of %d: %d bytes accepted", v, length, total)
		}
	})
}

func FuzzParseHTTPTime(f *testing.F) {
	for _, s := range []string{"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "x, 29 Feb 2000 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if ts := ParseHTTPTime([]byte(v)); ts != -1 && ts >= 0 && ts < 1e11 {
			if back := ParseHTTPTime(AppendHTTPTime(nil, ts)); back != ts {
				t.Fatalf("%q: %d does not round-trip (%d)", v, ts, back)
			}
		}
	})
}

func FuzzListing(f *testing.F) {
	f.Add([]byte("name.txt"), true, true)
	f.Add([]byte("\xc3\xa9\xc3"), true, false)
	f.Fuzz(func(t *testing.T, name []byte, utf8, dir bool) {
		e := []DirEntry{{Name: name, Dir: dir, File: !dir, Size: int64(len(name)) << 20}}
		AppendHTMLListing(nil, name, e, ListingOptions{UTF8: utf8})
		AppendHTMLListing(nil, name, e, ListingOptions{UTF8: utf8, ExactSize: true})
		AppendJSONListing(nil, e, name)
		AppendXMLListing(nil, e)
	})
}
