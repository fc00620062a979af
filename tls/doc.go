// Package tls terminates TLS on the event loop's own thread with the standard
// library's crypto/tls: no fork, no goroutine per connection, no hand-off to
// another CPU.
//
// A Layer is an eventloop.Handler that wraps the HTTP worker. For a connection
// on a TLS address it runs tls.Server(...).HandshakeContext as an iter.Pull
// coroutine created and always resumed on the loop's locked goroutine (the
// runtime lends the coroutine the loop's thread; resuming it from another
// goroutine would be a fatal error): the coroutine's transport yields when it
// has no input and the loop resumes it when input arrives. During the handshake
// the transport hands crypto/tls whole records only, so that a request arriving
// with the client's Finished stays out of crypto/tls's buffer.
//
// After the handshake a connection takes one of two record paths:
//   - kTLS: where the kernel has the TLS ULP for the negotiated version and
//     cipher, the traffic keys (from Config.KeyLogWriter) are installed with
//     TCP_ULP "tls", TLS_RX and TLS_TX, and the inner handler gets the raw
//     eventloop.Conn itself: plaintext on the socket, sendfile works.
//   - userspace: the inner handler gets a *Conn that decrypts what the loop
//     reads through crypto/tls over a memory transport (whose Read returns a
//     Temporary would-block error when empty, which crypto/tls does not keep
//     after the handshake) and encrypts what the handler writes.
//
// Either way the inner handler's connection carries the handshake's Info
// (InfoOf): the kTLS one is the raw conn wrapped with it. The $ssl_* variables
// read it, formatted as nginx with OpenSSL 3 formats them (cipher names, RFC
// 2253 DNs); $ssl_session_id is an identifier numaproxy makes per session and
// keeps in the session's tickets, as crypto/tls has none on the server side.
//
// Client certificates (ssl_verify_client) are asked for with
// RequestClientCert and verified in VerifyConnection, on the loop, with
// OpenSSL's rules as nginx sets them (depth, CRLs of the whole chain, the
// client purpose); the handshake never fails for them: a phase handler answers
// nginx's 495 or 496.
//
// Sessions: tickets are crypto/tls's, with keys from ssl_session_ticket_key
// files or numaproxy's own ring (process-wide, kept across reloads, rotated
// every 12 hours), the same for every loop: read-only between rotations, so
// they cross NUMA domains without a write. ssl_session_cache with tickets off makes the
// tickets identifiers of sessions kept on the server: shared:NAME:SIZE is one
// FIFO cache per process behind a mutex held for a map operation (it crosses
// domains: each resumption touches it), builtin one cache per loop.
// crypto/tls has no TLS 1.2 resumption by session ID alone.
//
// OCSP stapling (ssl_stapling without ssl_stapling_file): a stapler per
// certificate, shared by the loops, is the configuration's GetCertificate. A
// handshake that finds no fresh response starts one fetch (a goroutine with
// net/http, off the loops; at most one per certificate at a time) and goes on
// without a staple, as nginx's first handshakes do; the verified response is
// swapped in atomically and stapled until its nextUpdate, refreshed before.
//
// Client runs the same machinery for connections to https upstreams: Dial
// connects, the handshake (tls.Client) runs as the loop's coroutine, writes
// made meanwhile wait, and the proxy's handler gets the *Conn once it is done,
// or its failure as the connection's close. Each loop keeps a session cache
// per upstream configuration. Upstream connections always use userspace
// records.
package tls
