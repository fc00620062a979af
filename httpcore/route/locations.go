package route

import (
	"sort"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/pcre"
)

// Locations is one level of a location tree: the exact and prefix locations (searched
// for the longest match), the regex locations in file order, and named ones.
type Locations struct {
	exact  map[string]*conf.Location
	prefix []prefixLoc // longest path first
	regex  []*regexLoc
	named  map[string]*conf.Location
	// redirects are the prefix locations ending in "/" (but "/"), longest first,
	// with that slash cut: the paths AutoRedirect answers.
	redirects []redirectLoc
	// redirectLens has bit n set for a redirect path of n bytes (bit 63: 63 or more),
	// so that most paths are answered without a comparison.
	redirectLens uint64
}

type redirectLoc struct {
	path string
	loc  *conf.Location
}

// prefixLoc is held by value with its path beside it: the search reads one entry
// after another, longest first, for the first that path starts with.
type prefixLoc struct {
	path   string // loc.Path
	loc    *conf.Location
	nested *Locations // nil without nested locations
}

type regexLoc struct {
	loc    *conf.Location
	nested *Locations
}

func buildLocations(locs []*conf.Location) *Locations {
	l := &Locations{exact: map[string]*conf.Location{}, named: map[string]*conf.Location{}}
	for _, loc := range locs {
		switch loc.Kind {
		case conf.LocExact:
			l.exact[loc.Path] = loc
		case conf.LocPrefix, conf.LocPrefixNoRegex:
			l.prefix = append(l.prefix, prefixLoc{loc.Path, loc, buildNested(loc.Locations)})
		case conf.LocRegex, conf.LocRegexCaseless:
			l.regex = append(l.regex, &regexLoc{loc, buildNested(loc.Locations)})
		case conf.LocNamed:
			l.named[loc.Path] = loc
		} // an if's or limit_except's implicit location is entered by its condition, never searched

	}
	sort.SliceStable(l.prefix, func(i, j int) bool { return len(l.prefix[i].path) > len(l.prefix[j].path) })
	for _, p := range l.prefix {
		if n := len(p.loc.Path); n > 1 && strings.HasSuffix(p.loc.Path, "/") {
			l.redirects = append(l.redirects, redirectLoc{p.loc.Path[:n-1], p.loc})
			l.redirectLens |= 1 << min(n-1, 63)
		}
	}
	return l
}

// buildNested is buildLocations for the locations inside one, nil when there are
// none (find and AutoRedirect take a nil level as empty).
func buildNested(locs []*conf.Location) *Locations {
	for _, loc := range locs {
		switch loc.Kind {
		case conf.LocExact, conf.LocPrefix, conf.LocPrefixNoRegex, conf.LocRegex, conf.LocRegexCaseless:
			return buildLocations(locs)
		}
	}
	return nil // none is searched (named, if or limit_except ones)
}

// Match is the result of a location search.
type Match struct {
	Location *conf.Location // nil when nothing matched
	// Prefix is the matched prefix location's path when the match came from the
	// prefix search (proxy_pass with a URI replaces this part); "" for = and regex.
	Prefix string
}

// Matcher runs a location's regex: the HTTP core's request, which keeps the
// captures of a match (nil: a plain match).
type Matcher interface {
	Regex(re *pcre.Regexp, subject []byte) bool
}

// Find searches the tree for path (a normalised $uri) in nginx's order: exact match;
// else the longest prefix, searched recursively inside; unless that prefix has ^~, the
// regexes of each level from the deepest up, first match in file order wins and is
// itself searched inside. Regexes run through m.
func (l *Locations) Find(path []byte, m Matcher) Match {
	res, _ := l.find(path, m)
	return res
}

// find returns the match and whether it is final (exact or regex: no outer regex may
// override it).
func (l *Locations) find(path []byte, m Matcher) (Match, bool) {
	if l == nil {
		return Match{}, false
	}
	if len(l.exact) > 0 {
		if loc, ok := l.exact[string(path)]; ok {
			return Match{Location: loc}, true
		}
	}
	var best Match
	noRegex := false
	if i := longestPrefix(l.prefix, path); i >= 0 {
		p := &l.prefix[i]
		best = Match{Location: p.loc, Prefix: p.path}
		noRegex = p.loc.Kind == conf.LocPrefixNoRegex
		if inner, final := p.nested.find(path, m); final {
			return inner, true
		} else if inner.Location != nil {
			best = inner
		}
	}
	if !noRegex {
		for _, r := range l.regex {
			if matches(m, r.loc.Regex, path) {
				if inner, _ := r.nested.find(path, m); inner.Location != nil {
					return inner, true
				}
				return Match{Location: r.loc}, true
			}
		}
	}
	return best, false
}

// Named returns the server-level location "@name".
func (l *Locations) Named(name string) *conf.Location { return l.named[name] }

// AutoRedirect reports whether path is a prefix location's path without its trailing
// slash ("/dir" for "location /dir/"), which nginx answers with a 301 to "/dir/" when
// the location proxies. It returns that location.
func (l *Locations) AutoRedirect(path []byte) *conf.Location {
	if l == nil {
		return nil
	}
	if l.redirectLens&(1<<min(len(path), 63)) == 0 {
		return nil
	}
	for i := range l.redirects {
		if string(path) == l.redirects[i].path {
			return l.redirects[i].loc
		}
	}
	return nil
}

func matches(m Matcher, re *pcre.Regexp, s []byte) bool {
	if m == nil {
		return re.Match(s)
	}
	return m.Regex(re, s)
}

// longestPrefix is the index of the first (longest) of prefix that path starts
// with, or -1; a function of its own, so that the loop runs in registers.
func longestPrefix(prefix []prefixLoc, path []byte) int {
	for i := range prefix {
		if hasPrefix(path, prefix[i].path) {
			return i
		}
	}
	return -1
}

func hasPrefix(s []byte, prefix string) bool {
	return len(s) >= len(prefix) && string(s[:len(prefix)]) == prefix
}
