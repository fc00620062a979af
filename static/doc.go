// Package static is nginx's static file serving as building blocks for the HTTP
// core: the directives (root, alias, index, try_files, types, expires, autoindex,
// open_file_cache ...), the mapping of a URI to a file, lookups that honour
// disable_symlinks, a per-loop open_file_cache, the content handlers (index,
// autoindex, static) and the header filters that shape their responses
// (not-modified, expires, charset, range). Debian's nginx 1.22 is the specification;
// nginx_test.go compares the package's answers with its answers, request by request.
//
// core.go is the module in the HTTP core (cmd/numaproxy registers it): how it uses
// the building blocks, phase by phase (one Handler per event loop, its open file
// caches renewed at each reload; one Response per loop, reused, since a request is
// answered in one call: what the socket does not take of a file is queued on the
// connection with a descriptor of its own):
//
//   - find config: after choosing the location, lc := ConfOf(loc) (ServerConf when
//     none matched). A location marked internal answers a client's request with 404
//     (lc.Internal && !internal).
//   - try_files (nginx's precontent phase): h.TryFiles(req, lc, resp). Declined: go
//     on. Continue: resp.URI is the new $uri, same location (carry
//     resp.AddURIToAlias into the Request). Redirect: internal redirect to resp.URI
//     with resp.Args. Named: to the named location resp.URI, request unchanged.
//     Send: the =code (resp.ErrorPage).
//   - content, for a location without proxy_pass or return: h.Content(req, lc,
//     resp) runs index, autoindex and static in nginx's order. Redirect is the index
//     handler's internal redirect; Send is an answer.
//   - header filters: h.Filter(req, lc, resp) runs nginx's filters over a Content
//     answer (304/412, Expires, charset, 206/416, Last-Modified rules, absolute
//     Location); Serve is Content then Filter. When the core has its own filter chain
//     (so that expires and charset also reach proxied responses and error pages), it
//     calls the pieces instead: NotModified, ExpiresFilter, Handler.CharsetFilter,
//     Handler.RangeFilter, FinalHeader.
//   - response: Status and the header fields of resp; ErrorPage means the core's
//     special response (its page or error_page) with those fields. The body is
//     resp.Body in order: literal bytes, or ranges of resp.File.Fd to send with
//     sendfile(2) or pread(2) at their offsets (never the file position: a cached
//     descriptor is shared by the loop's requests); none for HEAD. resp.Log is the
//     error-log line nginx would write. Close resp.File (or Reset resp) once sent.
//
// Variables (root or alias with them, index, try_files, disable_symlinks from=) come
// from the core's registry through Vars; $document_root belongs to this module
// (DocumentRoot). Template.VarNames lists the names to check at load time.
//
// Everything here runs on the loop. The file system calls (open, openat2, stat,
// getdents for autoindex) block it for as long as the file system takes: microseconds
// with a warm dentry cache, much longer on a cold disk or a network file system, as
// in nginx without aio. A hit in open_file_cache makes no system call, and the
// decision path for a cached file allocates nothing.
package static
