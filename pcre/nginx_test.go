package pcre

import (
	"fmt"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/internal/nginxtest"
)

// nginxQuote writes s as a single-quoted nginx string.
func nginxQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// documentedDifference are the table's patterns where RE2 differs, as the package
// documentation says: (?m)^ after a final newline.
var documentedDifference = map[string]bool{"(?m)^$": true}

// TestTranslateAgainstNginx runs the table's patterns as nginx map keys ("~" and
// "~*") on the table's subjects, carried in the URI (percent-encoded, so newlines and
// control bytes get through) and compares the captures nginx hands to "$1".."$9".
func TestTranslateAgainstNginx(t *testing.T) {
	var http strings.Builder
	http.WriteString("map $uri $subject { '~(?s)^/(.*)\\z' $1; }\n")
	type probe struct {
		n       int
		re      *Regexp
		subject string
	}
	var probes []probe
	sel := []string{}
	for n, tc := range patternTable {
		re, err := Compile(tc.pattern, tc.caseless)
		if err != nil {
			t.Fatal(err)
		}
		op := "~"
		if tc.caseless {
			op = "~*"
		}
		var caps []string
		for i := 1; i <= 9; i++ {
			caps = append(caps, fmt.Sprintf("$%d", i))
		}
		fmt.Fprintf(&http, "map $subject $r%d { default nomatch; %s %s; }\n", n, nginxQuote(op+tc.pattern), nginxQuote("m|"+strings.Join(caps, "|")))
		sel = append(sel, fmt.Sprintf("%d $r%d;", n, n))
		for _, s := range tc.subjects {
			u := "/" + s
			if strings.Contains(u, "//") || strings.Contains(u, "/./") || strings.Contains(u, "/../") ||
				strings.HasSuffix(u, "/.") || strings.HasSuffix(u, "/..") || strings.Contains(s, "\x00") {
				continue // the URI's normalization would change the subject
			}
			probes = append(probes, probe{n, re, s})
		}
	}
	fmt.Fprintf(&http, "map $http_x_pattern $result { %s }\n", strings.Join(sel, " "))
	ng := nginxtest.Start(t, http.String()+`server { LISTEN; merge_slashes off; location / { return 200 "$result"; } }`, nil)
	for _, p := range probes {
		var target strings.Builder
		target.WriteByte('/')
		for i := 0; i < len(p.subject); i++ {
			fmt.Fprintf(&target, "%%%02X", p.subject[i])
		}
		_, want := ng.Get(t, target.String(), fmt.Sprintf("X-Pattern: %d", p.n))
		got := "nomatch"
		subject := []byte(p.subject)
		caps := make([]int, p.re.CapLen())
		if n, ok := p.re.Exec(subject, caps); ok && len(subject) > 0 {
			parts := []string{"m"}
			for i := 1; i <= 9; i++ {
				c := string(AppendCapture(nil, subject, caps[:n], i))
				// The documented difference: a group that ends at a "$" before a
				// final newline holds that newline.
				if strings.HasSuffix(c, "\n") && caps[2*i+1] == len(subject) && strings.HasSuffix(p.subject, "\n") && !strings.HasSuffix(want, c) {
					c = strings.TrimSuffix(c, "\n")
				}
				parts = append(parts, c)
			}
			got = strings.Join(parts, "|")
		}
		if got != want && documentedDifference[p.re.String()] {
			t.Logf("documented difference: %q on %q: %q, nginx %q", p.re.String(), p.subject, got, want)
			continue
		}
		if got != want {
			t.Errorf("%q on %q: %q, nginx %q", p.re.String(), p.subject, got, want)
		}
	}
	t.Logf("%d subjects compared", len(probes))
}
