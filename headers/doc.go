// Package headers is nginx's ngx_http_headers_module: add_header and add_trailer
// (expires is the static package's), a header filter that is in the chain only
// when the configuration has either, and a body filter only when it has an
// add_trailer.
package headers
