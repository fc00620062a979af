// Package proxy is the HTTP/1.1 reverse proxy that runs on the event loops: it reads
// client requests (proxy/http1), routes them (proxy/route), answers locally (return,
// error pages) or forwards them to an upstream group (upstream) and streams the reply
// back with backpressure both ways, with nginx's semantics throughout.
//
// module.go declares the proxy's directives and their nginx inheritance; variables.go
// is the one place request variables are evaluated; the data path is in worker.go
// (one per loop), client.go (a client connection's request cycle) and backend.go (the
// upstream side).
package proxy
