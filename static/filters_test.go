package static

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestParseHTTPTime(t *testing.T) {
	ref := time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC).Unix()
	for v, want := range map[string]int64{
		"Sun, 06 Nov 1994 08:49:37 GMT":  ref,
		"Sunday, 06-Nov-94 08:49:37 GMT": ref,
		"Sun Nov  6 08:49:37 1994":       ref,
		"Sun Nov 6 08:49:37 1994":        ref,
		"Sun, 06 Nov 1994 08:49:37":      ref, // no zone: nginx does not look
		"x, 06 Nov 1994 08:49:37 PST":    ref, // nor at the weekday
		"Thu, 01 Jan 1970 00:00:00 GMT":  0,
		"Tue, 29 Feb 2000 00:00:00 GMT":  time.Date(2000, 2, 29, 0, 0, 0, 0, time.UTC).Unix(),
		"Tue, 19 Jan 2038 03:14:08 GMT":  1 << 31,
		"Mon, 01 Jan 2024 00:00:00 GMT":  time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Unix(),
		"Sat, 31 Dec 2999 23:59:59 GMT":  time.Date(2999, 12, 31, 23, 59, 59, 0, time.UTC).Unix(),
		"Fri, 29 Feb 2001 00:00:00 GMT":  -1,
		"Fri, 29 Feb 1900 00:00:00 GMT":  -1,
		"Sun, 31 Apr 1994 08:49:37 GMT":  -1,
		"Sun, 06 Nov 1994 24:49:37 GMT":  -1,
		"Sun, 06 Nov 1994 08:60:37 GMT":  -1,
		"Sun, 06 Xyz 1994 08:49:37 GMT":  -1,
		"Sun, 6 Nov 1994 08:49:37 GMT":   -1,
		"Sun, 06 Nov 94 08:49:37 GMT":    -1,
		"garbage":                        -1,
		"":                               -1,
		"Sun, 06 Nov 1994 08:49":         -1,
	} {
		if got := ParseHTTPTime([]byte(v)); got != want {
			t.Errorf("%q = %d, want %d", v, got, want)
		}
	}
	// Dates from before 1970 to far ahead format as time does and round-trip.
	for ts := int64(-4e9); ts < 2e11; ts += 86400*37 + 3607 {
		s := AppendHTTPTime(nil, ts)
		if got := ParseHTTPTime(s); got != ts && ts >= 0 {
			t.Fatalf("%s: %d, want %d", s, got, ts)
		}
		if string(s) != time.Unix(ts, 0).UTC().Format(http.TimeFormat) {
			t.Fatalf("AppendHTTPTime(%d) = %s", ts, s)
		}
	}
}

func TestParseRanges(t *testing.T) {
	tests := []struct {
		v      string
		length int64
		max    int
		want   string
	}{
		{"0-4", 12, -1, "ok [0,5)"},
		{"6-", 12, -1, "ok [6,12)"},
		{"-3", 12, -1, "ok [9,12)"},
		{"-100", 12, -1, "ok [0,12)"},
		{"3-100", 12, -1, "ok [3,12)"},
		{" 1 - 2 , 4-5", 12, -1, "ok [1,3) [4,6)"},
		{"0-5,3-8", 12, -1, "ok [0,6) [3,9)"},
		{"0-11,0-11", 12, -1, "declined [0,12) [0,12)"}, // more than the file
		{"100-", 12, -1, "416"},
		{"100-200,0-1", 12, -1, "ok [0,2)"},
		{"-0", 12, -1, "416"},
		{"5-2", 12, -1, "416"},
		{"x", 12, -1, "416"},
		{"1-2x", 12, -1, "416"},
		{"1-2,", 12, -1, "416"},
		{"", 12, -1, "416"},
		{"9223372036854775807-", 12, -1, "416"},
		{"9223372036854775808-", 12, -1, "416"},
		{"0-9223372036854775808", 12, -1, "416"},
		{"0-", 0, -1, "declined"},
		{"-5", 0, -1, "declined"},
		{"0-1,3-4", 12, 1, "declined [0,2) [3,5)"},
		{"0-1", 12, 1, "ok [0,2)"},
		{"0-1,3-4,6-7", 12, 2, "declined [0,2) [3,5) [6,8)"},
	}
	for _, tt := range tests {
		rs, res := parseRanges([]byte(tt.v), tt.length, tt.max, nil)
		got := map[rangeResult]string{rangesOK: "ok", rangesDeclined: "declined", rangesNotSatisfiable: "416"}[res]
		if res != rangesNotSatisfiable {
			for _, r := range rs {
				got += fmt.Sprintf(" [%d,%d)", r.start, r.end)
			}
		}
		if got != tt.want {
			t.Errorf("%q of %d (max %d): %s, want %s", tt.v, tt.length, tt.max, got, tt.want)
		}
	}
}

func TestETagMatches(t *testing.T) {
	etag := []byte(`"5f-c"`)
	tests := []struct {
		list string
		weak bool
		want bool
	}{
		{`"5f-c"`, false, true},
		{`*`, false, true},
		{` "5f-c"`, false, false}, // nginx does not skip leading space before the first tag
		{`"a", "5f-c"`, false, true},
		{`"a",  "5f-c" , "b"`, false, true},
		{`"a","5f-c"`, false, true},
		{`W/"5f-c"`, false, false},
		{`W/"5f-c"`, true, true},
		{`"a", W/"5f-c"`, true, true},
		{`"5f-cd"`, false, false},
		{`"5f-c"x`, false, false},
		{`"5f-c"	`, false, true},
		{``, false, false},
		{`"a"`, false, false},
	}
	for _, tt := range tests {
		if got := etagMatches([]byte(tt.list), etag, tt.weak); got != tt.want {
			t.Errorf("%q weak %v: %v", tt.list, tt.weak, got)
		}
	}
	if etagMatches([]byte(`"x"`), nil, false) || !etagMatches([]byte("*"), nil, false) {
		t.Error("no ETag: only * matches")
	}
	if !etagMatches([]byte(`"5f-c"`), []byte(`W/"5f-c"`), true) {
		t.Error("weak comparison ignores the response's W/")
	}
}

func TestExpiresDaily(t *testing.T) {
	lc := &LocConf{Expires: Expires{Mode: ExpiresDaily, Time: 15*time.Hour + 30*time.Minute}}
	now := time.Date(2024, 3, 9, 10, 0, 0, 0, time.Local).Unix()
	var r Response
	r.Reset()
	r.Status = 200
	ExpiresFilter(lc, &r, now)
	at := time.Date(2024, 3, 9, 15, 30, 0, 0, time.Local)
	if string(r.Expires) != at.UTC().Format(http.TimeFormat) || string(r.CacheControl) != fmt.Sprintf("max-age=%d", at.Unix()-now) {
		t.Errorf("before the time: %s %s", r.Expires, r.CacheControl)
	}
	r.Reset()
	r.Status = 200
	ExpiresFilter(lc, &r, at.Unix())
	next := time.Date(2024, 3, 10, 15, 30, 0, 0, time.Local)
	if string(r.Expires) != next.UTC().Format(http.TimeFormat) {
		t.Errorf("at the time: %s, want the next day", r.Expires)
	}
	r.Reset()
	r.Status = 404
	ExpiresFilter(lc, &r, now)
	if r.Expires != nil {
		t.Error("expires on a 404")
	}
}

func TestAppendAbsoluteLocation(t *testing.T) {
	for _, tt := range []struct {
		b    RedirectBase
		want string
	}{
		{RedirectBase{Host: []byte("h"), Port: 80}, "http://h/d/"},
		{RedirectBase{Host: []byte("h"), Port: 8080}, "http://h:8080/d/"},
		{RedirectBase{Host: []byte("h"), Port: 0}, "http://h/d/"},
		{RedirectBase{HTTPS: true, Host: []byte("h"), Port: 443}, "https://h/d/"},
		{RedirectBase{HTTPS: true, Host: []byte("[::1]"), Port: 80}, "https://[::1]:80/d/"},
	} {
		if got := string(AppendAbsoluteLocation(nil, []byte("/d/"), &tt.b)); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.b, got, tt.want)
		}
	}
}
