package proxy

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/pcre"
)

// CookieRewrite is one proxy_cookie_domain or proxy_cookie_path rule.
type CookieRewrite struct {
	Regex       *pcre.Regexp       // ~regex; nil for a plain pattern
	Pattern     *httpcore.Template // a plain pattern: the whole domain, or a path prefix
	Replacement *Replacement
	domain      bool
}

// Replacement is a rewrite's replacement: text with variables and, after a regex,
// its captures $1..$9.
type Replacement struct {
	parts    []replacementPart
	captures bool
}

type replacementPart struct {
	t       *httpcore.Template // nil for a capture
	capture int
}

// compileReplacement splits s at $N and ${N} (regex captures, which templates do
// not know) and compiles the rest as templates.
func compileReplacement(c *conf.Cursor, s string, regex *pcre.Regexp) (*Replacement, error) {
	r := &Replacement{}
	lit := 0
	flush := func(end int) error {
		if end > lit {
			t, err := httpcore.CompileTemplate(c, s[lit:end])
			if err != nil {
				return err
			}
			r.parts = append(r.parts, replacementPart{t: t})
		}
		return nil
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			continue
		}
		n, width := -1, 0
		switch {
		case s[i+1] >= '0' && s[i+1] <= '9':
			n, width = int(s[i+1]-'0'), 2
		case i+3 < len(s) && s[i+1] == '{' && s[i+2] >= '0' && s[i+2] <= '9' && s[i+3] == '}':
			n, width = int(s[i+2]-'0'), 4
		}
		if n < 0 {
			continue
		}
		if regex == nil {
			return nil, fmt.Errorf("$%d without a regular expression", n)
		}
		if err := flush(i); err != nil {
			return nil, err
		}
		r.parts = append(r.parts, replacementPart{capture: n})
		r.captures = true
		i += width - 1
		lit = i + 1
	}
	if err := flush(len(s)); err != nil {
		return nil, err
	}
	return r, nil
}

// Append evaluates the replacement into dst; match holds the capture offsets in
// src (nil without a regex). A capture the regex did not set is empty.
func (r *Replacement) Append(dst []byte, v *httpcore.Request, src []byte, match []int) []byte {
	for _, p := range r.parts {
		if p.t != nil {
			dst = p.t.Append(dst, v)
			continue
		}
		if i := 2 * p.capture; i+1 < len(match) && match[i] >= 0 {
			dst = append(dst, src[match[i]:match[i+1]]...)
		}
	}
	return dst
}

// setCookieRewrite is nginx's proxy_cookie_domain and proxy_cookie_path: "off", or
// any number of pattern-replacement pairs at a level (not both).
func setCookieRewrite(domain bool) func(c *conf.Cursor, s *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		lc := locConf(c)
		list, bit := &lc.CookiePaths, uint64(bitCookiePaths)
		if domain {
			list, bit = &lc.CookieDomains, bitCookieDomains
		}
		first := lc.set&bit == 0
		if !first && *list == nil {
			return s.Errorf("%q directive is duplicate", s.Name) // after "off"
		}
		lc.set |= bit
		if len(s.Args) == 1 {
			if s.Args[0].Value != "off" {
				return s.Errorf("invalid parameter %q", s.Args[0].Value)
			}
			if !first {
				return s.Errorf("%q directive is duplicate", s.Name)
			}
			*list = nil
			return nil
		}
		if first {
			*list = nil
		}
		pattern, repl := s.Args[0].Value, s.Args[1].Value
		r := CookieRewrite{domain: domain}
		if rest, ok := strings.CutPrefix(pattern, "~"); ok {
			// proxy_cookie_domain's regex ignores case; proxy_cookie_path's with ~*.
			caseless := domain
			if !domain {
				rest, caseless = strings.CutPrefix(rest, "*")
			}
			arg := s.Args[0]
			arg.Value = rest
			re, err := conf.CompileRegex(arg, caseless)
			if err != nil {
				return err
			}
			r.Regex = re
		} else {
			if domain {
				// Domains compare without their leading dot, which the value keeps.
				pattern = strings.TrimPrefix(pattern, ".")
				repl = strings.TrimPrefix(repl, ".")
			}
			t, err := httpcore.CompileTemplate(c, pattern)
			if err != nil {
				return s.InvalidValue(s.Args[0], err.Error())
			}
			r.Pattern = t
		}
		var err error
		if r.Replacement, err = compileReplacement(c, repl, r.Regex); err != nil {
			return s.InvalidValue(s.Args[1], err.Error())
		}
		if r.Regex != nil && r.Replacement.captures {
			for _, p := range r.Replacement.parts {
				if p.t == nil && p.capture > r.Regex.NumCaptures() {
					return s.InvalidValue(s.Args[1], fmt.Sprintf("the regular expression has no capture $%d", p.capture))
				}
			}
		}
		*list = append(*list, r)
		return nil
	}
}

// cookieAttr is one "name[=value]" of a Set-Cookie value: offsets in the value.
type cookieAttr struct {
	name, value [2]int
	hasValue    bool
}

// appendCookie appends a Set-Cookie value rewritten by proxy_cookie_domain and
// proxy_cookie_path as nginx does (ngx_http_proxy_rewrite_cookie): the value is cut
// at ";" into attributes, spaces around names and values trimmed; the first rule
// that matches a domain or path attribute rewrites it; if any did, the value is
// written out again with "; " between the attributes, else it goes unchanged.
func (ex *exchange) appendCookie(h, value []byte) []byte {
	var stack [16]cookieAttr
	attrs := parseCookie(stack[:0], value)
	mark := len(h)
	if !attrs[0].hasValue {
		return append(h, value...) // not name=value: left alone, as nginx
	}
	changed := false
	for i, a := range attrs {
		if i > 0 {
			h = append(h, "; "...)
		}
		name := value[a.name[0]:a.name[1]]
		h = append(h, name...)
		if !a.hasValue {
			continue
		}
		h = append(h, '=')
		v := value[a.value[0]:a.value[1]]
		var rules []CookieRewrite
		switch {
		case i == 0:
		case http1.EqualFold(name, "domain"):
			rules = ex.lc.CookieDomains
		case http1.EqualFold(name, "path"):
			rules = ex.lc.CookiePaths
		}
		done := false
		for j := range rules {
			if h, done = rules[j].appendRewritten(h, v, ex.r); done {
				changed = true
				break
			}
		}
		if !done {
			h = append(h, v...)
		}
	}
	if !changed {
		return append(h[:mark], value...)
	}
	return h
}

// appendRewritten appends v rewritten by the rule and reports true, or appends
// nothing and reports false when the rule does not match. nginx's handlers:
// a regex matching anywhere replaces the whole value; a path replaces the prefix it
// matches; a domain matches the whole value (any case) but its leading dot, which
// it keeps.
func (r *CookieRewrite) appendRewritten(h, v []byte, c *httpcore.Request) ([]byte, bool) {
	mark := len(h)
	if r.Regex != nil {
		var match []int
		if r.Replacement.captures {
			if match = r.Regex.FindSubmatchIndex(v); match == nil {
				return h, false
			}
		} else if !r.Regex.Match(v) {
			return h, false
		}
		return r.Replacement.Append(h, c, v, match), true
	}
	// The pattern is evaluated where the result will go, and overwritten by it.
	h = r.Pattern.Append(h, c)
	pattern := h[mark:]
	if !r.domain {
		if !bytes.HasPrefix(v, pattern) {
			return h[:mark], false
		}
		rest := v[len(pattern):]
		h = r.Replacement.Append(h[:mark], c, nil, nil)
		return append(h, rest...), true
	}
	dot := len(v) > 0 && v[0] == '.'
	name := v
	if dot {
		name = v[1:]
	}
	if !bytes.EqualFold(name, pattern) {
		return h[:mark], false
	}
	h = h[:mark]
	if dot {
		h = append(h, '.')
	}
	return r.Replacement.Append(h, c, nil, nil), true
}

// parseCookie is nginx's ngx_http_proxy_parse_cookie: attributes split at ";",
// the name up to the first "=", spaces trimmed around both.
func parseCookie(attrs []cookieAttr, v []byte) []cookieAttr {
	start := 0
	for {
		last := bytes.IndexByte(v[start:], ';')
		if last < 0 {
			last = len(v)
		} else {
			last += start
		}
		for start < last && v[start] == ' ' {
			start++
		}
		p := start
		for p < last && v[p] != '=' {
			p++
		}
		a := cookieAttr{name: [2]int{start, p}}
		for a.name[1] > a.name[0] && v[a.name[1]-1] == ' ' {
			a.name[1]--
		}
		if p < last {
			p++
			for p < last && v[p] == ' ' {
				p++
			}
			a.value, a.hasValue = [2]int{p, last}, true
			for a.value[1] > a.value[0] && v[a.value[1]-1] == ' ' {
				a.value[1]--
			}
		}
		attrs = append(attrs, a)
		if last == len(v) {
			return attrs
		}
		start = last + 1
	}
}
