// Package headers is nginx's ngx_http_headers_module: add_header (expires comes
// later), a header filter that is in the chain only when the configuration has an
// add_header.
package headers
