// Package rewrite is nginx's ngx_http_rewrite_module: it holds return for now
// (rewrite, set, if come later). Its handler runs in the server rewrite phase for a
// server's return and in the rewrite phase for a location's, and is added only when
// the configuration has one.
package rewrite
