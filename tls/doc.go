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
package tls
