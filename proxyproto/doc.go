// Package proxyproto speaks HAProxy's PROXY protocol (versions 1 and 2): a
// Layer reads the header a load balancer puts before a connection's own bytes
// and hands the connection on with the client's address, and the Append
// functions write headers for connections to upstreams.
//
// What is accepted follows nginx's "listen ... proxy_protocol" (the
// specification here), with these differences: a header split across reads is
// waited for (nginx 1.22 reads it from the first read only), version 1
// addresses must be valid IP addresses of the family named (nginx checks only
// their characters) and a version 1 line is at most 107 bytes (nginx does not
// bound "PROXY UNKNOWN ..." lines), and a version 2 header may be DefaultMaxHeader
// bytes long (nginx's HTTP server reads it from its client_header_buffer_size).
package proxyproto
