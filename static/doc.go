// Package static is nginx's static file serving as building blocks for the HTTP
// core: the directives (root, alias, index, try_files, types, expires, autoindex,
// open_file_cache ...), the mapping of a URI to a file, lookups that honour
// disable_symlinks, a per-loop open_file_cache, the content handlers (index,
// autoindex, static) and the header filters that shape their responses
// (not-modified, expires, charset, range). Debian's nginx 1.22 is the specification;
// nginx_test.go compares the package's answers with its answers, request by request.
//
// core.go is the module in the HTTP core (cmd/numaproxy registers it after the
// headers module, so its filter runs before add_header, as nginx's headers filter
// sets Expires first). One Handler per event loop, its open file caches renewed at
// each reload; one Response per loop, reused, since a request is answered in one
// call: what the socket does not take of a file is queued on the connection with a
// descriptor of its own. Phase by phase:
//
//   - find config (only when some location has internal, try_files or captures):
//     lc := ConfOf(loc) (ServerConf when none matched); a location marked internal
//     answers a client's request with 404; the request's context starts afresh,
//     with a regex location's captures ($1..$9 of Vars) when its templates name
//     them.
//   - try_files (nginx's precontent phase): h.TryFiles(req, lc, resp). Declined: go
//     on. Continue: resp.URI is the new $uri, same location (resp.AddURIToAlias is
//     carried to the content phase). Redirect: internal redirect to resp.URI with
//     resp.Args (the request's own without "?"). Named: to the named location
//     resp.URI. Send: the =code.
//   - content, for a location no other module serves: h.Content(req, lc, resp) runs
//     index, autoindex and static in nginx's order, then h.Filter (304/412,
//     Expires, charset, 206/416, Last-Modified rules) over the answer, with an
//     error_page's status set first. A 200, 206 or 304 goes out as the module's own
//     head and body (files with SendFile, or read into a pool buffer when small);
//     ErrorPage is the core's special response (its page or error_page) with the
//     Location, Content-Range and Expires the filters gave it.
//   - header filter (only with expires or charset somewhere): ExpiresFilter and the
//     charset rules over every other response, proxied ones and the core's pages.
//
// Precompressed files (compress's gzip_static) go through the same path:
// ServePrecompressed opens the URI's file with a suffix (Handler.OpenPrecompressed,
// SendPrecompressed) and answers with the filters and sendResponse, adding
// Response.ContentEncoding. Request.Encodes (compress, through SetEncodes) tells
// the range filter that a response will be encoded on the fly: it then stays whole.
//
// Variables (root or alias with them, index, try_files, disable_symlinks from=) come
// from the core's registry through Vars, checked where they are written; the module
// adds $document_root, $realpath_root and $request_filename to the registry.
//
// Everything here runs on the loop. The file system calls (open, openat2, stat,
// getdents for autoindex) block it for as long as the file system takes: microseconds
// with a warm dentry cache, much longer on a cold disk or a network file system, as
// in nginx without aio. A hit in open_file_cache makes no system call, and the
// decision path for a cached file allocates nothing.
package static
