// Package conf reads nginx-grammar configuration files into an immutable, fully
// validated Config snapshot.
//
// It knows the grammar (lexer.go), includes (include.go), the directive registry
// (registry.go) and the skeleton every proxy config shares: the main context, events,
// http, server, listen, server_name and location (core.go, http.go). What any other
// directive means is declared by the package that implements it, in a Module table, the
// way nginx modules declare ngx_command_t: conf never learns what proxy_pass does.
//
// Reload builds a new Config with Load and swaps it in whole; nothing reads raw tokens
// after Load returns.
package conf
