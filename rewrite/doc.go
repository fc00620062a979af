// Package rewrite is nginx's ngx_http_rewrite_module: set, if, rewrite, break and
// return, run in the order written as nginx's script codes, a server's in the
// server rewrite phase and a location's in the location's rewrite phase (a level
// without them costs a request nothing).
//
// rewrite matches $uri with a PCRE pattern (package pcre); "last" (or no flag in a
// location) has the core look for the location again after the phase, at most 10
// times a request with the internal redirects (then 500), "break" stops here, and
// a redirect answers at once with the request's arguments appended unless the
// replacement ends with "?". Captures ($1 ... $9, named groups) are the request's,
// shared with location, server_name, if and map regexes (httpcore.Request.Regex);
// in a redirect and in new arguments they are escaped when the client's path held
// "%" or "+", as nginx does.
//
// An if block's directives run in the enclosing level's sequence; inside a
// location the block is also nginx's implicit location (conf.LocIf): when its
// condition holds the request takes that location's configs (add_header,
// proxy_pass, error_page set in it replace the enclosing location's; what it does
// not set is inherited), and the enclosing location's content handler when it has
// none of its own.
//
// set declares its variable in the configuration's variables (httpcore.Declared),
// so every module's templates may use it; its value lives in the request. "set
// $args" changes the request's arguments, as nginx's.
//
// Differences from nginx: -f -d -e -x stat the file on the loop (no
// open_file_cache); set cannot give a value to another variable a module owns
// ("the duplicate variable"). A request through set, rewrites, if and return
// allocates nothing, regex matches with groups included.
package rewrite
