// Package route decides which server and location a request belongs to, with nginx's
// rules: servers by listen address then Host (exact, longest leading wildcard, longest
// trailing wildcard, first regex, default server), locations by exact match, longest
// prefix (^~ stops the regex search), then regexes in file order, nested locations
// searched inside the match. Request paths are normalised first (normalize.go).
//
// A Table is built once per configuration snapshot and only read afterwards, so loops
// share it without locks; matching does not allocate.
package route
