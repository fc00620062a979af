// Package proxyproto speaks HAProxy's PROXY protocol (versions 1 and 2): a
// Layer reads the header a load balancer puts before a connection's own bytes
// and hands the connection on with the client's address, and the Append
// functions write headers for connections to upstreams.
//
// The Conn a Layer hands on has the header's source as RemoteAddr (nginx gives
// $remote_addr so only with the realip module's "real_ip_header proxy_protocol";
// Options.KeepPeerAddr keeps the peer's) and the socket's own LocalAddr (nginx's
// $server_addr, and the address a listener's servers are found by); the header
// itself, with its destination and TLVs, is HeaderOf(conn).
//
// Module (module.go) is the HTTP side: proxy_protocol_timeout and nginx's
// $proxy_protocol_* variables, and SourceOf, the header's client address for a
// request (what realip's "real_ip_header proxy_protocol" takes). server/ puts a
// Layer on each loop, outside the TLS layer, for the addresses whose listen says
// proxy_protocol; proxy/ writes AppendV1 for "proxy_protocol on".
//
// What is accepted follows nginx's "listen ... proxy_protocol" (the
// specification here), with these differences: a header split across reads is
// waited for (nginx 1.22 reads it from the first read only), version 1
// addresses must be valid IP addresses of the family named (nginx checks only
// their characters) and a version 1 line is at most 107 bytes (nginx does not
// bound "PROXY UNKNOWN ..." lines). A version 2 header may be Options.MaxHeader
// bytes long; nginx's HTTP server reads it from its client_header_buffer_size.
package proxyproto
