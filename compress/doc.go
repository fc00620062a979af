// Package compress is nginx's ngx_http_gzip_filter_module and
// ngx_http_gunzip_filter_module with the core's gzip settings (gzip_vary,
// gzip_http_version, gzip_proxied, gzip_disable: ngx_http_gzip_ok), plus brotli in
// the style of ngx_brotli and zstd in the style of zstd-nginx-module, as one header
// filter that picks the coding and one body filter that encodes (or gunzips) the
// body as it streams. One package because the codings must be chosen together:
// Accept-Encoding's q-values decide between them (ties: br, zstd, gzip).
//
// The header filter follows nginx's: a 200, 403 or 404 without a Content-Encoding,
// whose length (when known) reaches *_min_length and whose type is in *_types, is
// compressed for a client whose Accept-Encoding accepts the coding (gzip read
// exactly as nginx reads it, quirks included) and that gzip_ok lets through; the
// head then loses its Content-Length (the core frames the body chunked, or until
// the close for HTTP/1.0) and its Accept-Ranges, and a strong ETag becomes weak.
// gzip_vary adds Vary: Accept-Encoding to every response the checks looked at.
//
// The body filter compresses each piece as it comes and passes the output on once
// gzip_buffers' bound is reached or at the end of the piece: nothing is buffered
// beyond the encoder's window, so the client's backpressure (the proxy stops
// reading its upstream) holds the whole chain. Encoders come from per-loop pools
// keyed by coding and level when a response's first body bytes come and go back at
// its end (or when the request ends early, in the log phase), so an idle
// connection holds none. gunzip's inflater is a coroutine (iter.Pull) on the
// loop's thread: the gzip reader pulls its input, and yields when it has used all
// that was given, instead of blocking.
//
// gzip_static, brotli_static and zstd_static (static.go) are a content handler
// before static's: the file the URI maps to plus .gz (.br, .zst), found through
// static's lookups and sent through its filters and sendfile
// (static.ServePrecompressed). As nginx's, it allows no ranges; gzip_static on sets
// the request's Vary flag (reqCtx.gzipVary) once the file is found, whatever is
// sent. The module also tells static (static.SetEncodes) which responses the
// header filter will encode, so that static's range filter leaves them whole, as
// nginx's gzip filter clears allow_ranges before its range filter runs.
package compress
