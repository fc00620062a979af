package pcre

import (
	"slices"
	"testing"
)

// TestPrefilterLiterals: the literals found for patterns as configurations write
// them (lower-case, "~" marking a case-insensitive position), and none where a
// match need not contain one.
func TestPrefilterLiterals(t *testing.T) {
	for _, tc := range []struct {
		pattern  string
		caseless bool
		want     []string
	}{
		{`(googlebot|bingbot|yandex|baiduspider)`, true, []string{"~g~o~o~g~l~e~b~o~t", "~b~i~n~g~b~o~t", "~y~a~n~d~e~x", "~b~a~i~d~u~s~p~i~d~e~r"}},
		{`(crawler|spider|bot)/(\d+)`, true, []string{"~c~r~a~w~l~e~r/", "~s~p~i~d~e~r/", "~b~o~t/"}},
		{`(bot|crawler|spider)`, false, []string{"bot", "crawler", "spider"}},
		{`\.(gif|jpe?g|png)$`, false, nil}, // a literal prefix: strings.Index does it
		{`\w+bcd`, false, []string{"bcd"}},
		{`[0-9](ab|cd)*y`, false, []string{"y"}},
		{`[0-9](ab|cd)+y`, false, []string{"ab", "cd"}},
		{`(?i)bot`, false, []string{"~b~o~t"}},    // nginx's (?i): ASCII only
		{`\d(?i:k)bot`, false, []string{"~kbot"}}, // the translation's [kK]: no Kelvin sign
		{`bot|.*`, false, nil},
		{`(a|)`, false, nil},
		{`^/api/`, false, nil}, // anchored: the backtracker starts at 0 only
		{`/api/`, false, nil},  // a literal prefix: strings.Index does it
	} {
		re := MustCompile(tc.pattern, tc.caseless)
		var got []string
		if pf := re.bt.pf; pf != nil {
			for _, l := range pf.lits {
				s := ""
				for i := range len(l.s) {
					if l.fold&(1<<i) != 0 {
						s += "~"
					}
					s += l.s[i : i+1]
				}
				got = append(got, s)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.pattern, got, tc.want)
		}
	}
	// Go's own (?i) folds k onto the Kelvin sign: no literal.
	if re, err := goRegexp(`\d(?i)kbot`); err != nil || re.bt.pf != nil {
		t.Errorf("Go's (?i)kbot: %v %v", err, re.bt.pf)
	}
}

// TestPrefilterRejects: a browser's User-Agent is rejected by the literals of the
// bot patterns, a crawler's is not, and the matches are regexp's.
func TestPrefilterRejects(t *testing.T) {
	for _, p := range []string{`(googlebot|bingbot|yandex|baiduspider)`, `(crawler|spider|bot)/(\d+)`} {
		re := MustCompile(p, true)
		if !re.bt.pf.reject(firefoxUA) {
			t.Errorf("%s: %q not rejected", p, firefoxUA)
		}
		for _, s := range []string{firefoxUA, "Mozilla/5.0 (compatible; Googlebot/2.1)", "BOT/1", "x spider/", "Bot/9"} {
			if err := diffExec(re, []byte(s)); err != nil {
				t.Error(err)
			}
		}
	}
}
