package tls

import (
	"crypto/rand"
	stdtls "crypto/tls"
	"crypto/x509"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// Info is what a connection's handshake settled, for the $ssl_* variables. It
// is kept with the connection on both record paths.
type Info struct {
	Version    uint16
	Cipher     uint16
	Curve      stdtls.CurveID
	ServerName string
	ALPN       string
	Resumed    bool
	// OfferedCiphers and OfferedCurves are the client's lists as its
	// ClientHello had them ($ssl_ciphers, $ssl_curves).
	OfferedCiphers []uint16
	OfferedCurves  []stdtls.CurveID
	// Peer is the client's certificate chain as sent; Verify is nginx's
	// $ssl_client_verify ("NONE", "SUCCESS", "FAILED:reason").
	Peer      []*x509.Certificate
	Verify    string
	verifyErr verifyErr
	// sid is the session's identifier: crypto/tls has none on the server side,
	// so numaproxy makes one per session (kept in its tickets) when first asked.
	sid    [32]byte
	hasSID bool
}

const (
	verifyNone    = "NONE"
	verifySuccess = "SUCCESS"
)

// SessionID is the session's identifier (nginx's $ssl_session_id): random per
// full handshake, carried by the session's tickets to the connections that
// resume it.
func (i *Info) SessionID() *[32]byte {
	if !i.hasSID {
		rand.Read(i.sid[:])
		i.hasSID = true
	}
	return &i.sid
}

func (i *Info) set(cs *stdtls.ConnectionState) {
	i.Version, i.Cipher, i.Curve = cs.Version, cs.CipherSuite, cs.CurveID
	i.ServerName, i.ALPN, i.Resumed = cs.ServerName, cs.NegotiatedProtocol, cs.DidResume
	i.Peer = cs.PeerCertificates
	if i.Verify == "" {
		i.Verify = verifyNone
	}
}

// verified records the outcome of a client certificate's verification.
func (i *Info) verified(v *verifier, chain []*x509.Certificate) {
	switch {
	case len(chain) == 0:
		i.Verify, i.verifyErr = verifyNone, verifyOK
	default:
		i.verifyErr = v.check(chain, time.Now())
		if i.verifyErr == verifyOK {
			i.Verify = verifySuccess
		} else {
			i.Verify = "FAILED:" + i.verifyErr.String()
		}
	}
}

// kconn is a connection whose records the kernel handles: the raw conn, handed
// to the inner handler with the handshake's Info beside it. Its context is the
// inner handler's; the raw conn's context is the kconn.
type kconn struct {
	eventloop.Conn
	info  Info
	ctx   any
	plain bool // plain HTTP on a TLS address (Options.PlainHTTP): no TLS at all
}

func (k *kconn) Context() any     { return k.ctx }
func (k *kconn) PlainHTTP() bool  { return k.plain }
func (k *kconn) SetContext(v any) { k.ctx = v }

// InfoOf is the TLS state of a connection the layer handed to its inner
// handler; nil for a connection without TLS.
func InfoOf(c eventloop.Conn) *Info {
	switch c := c.(type) {
	case *Conn:
		return &c.info
	case *kconn:
		if c.plain {
			return nil
		}
		return &c.info
	}
	return nil
}

// IsPlainHTTP reports a connection that sent plain HTTP to a TLS address.
func IsPlainHTTP(c eventloop.Conn) bool {
	k, ok := c.(*kconn)
	return ok && k.plain
}

// sessionExtraTag marks the SessionState.Extra entry numaproxy adds to its
// tickets: the issue time (ssl_session_timeout) and the session's identifier.
const sessionExtraTag = "numaproxy-session:"

const sessionExtraLen = len(sessionExtraTag) + 8 + 32

func stampSession(ss *stdtls.SessionState, now time.Time, sid *[32]byte) {
	e := make([]byte, sessionExtraLen)
	copy(e, sessionExtraTag)
	putUint64(e[len(sessionExtraTag):], uint64(now.Unix()))
	copy(e[len(sessionExtraTag)+8:], sid[:])
	for i, x := range ss.Extra {
		if isSessionExtra(x) {
			ss.Extra[i] = e
			return
		}
	}
	ss.Extra = append(ss.Extra, e)
}

func isSessionExtra(x []byte) bool {
	return len(x) == sessionExtraLen && string(x[:len(sessionExtraTag)]) == sessionExtraTag
}

// sessionStamp is the issue time and identifier of a ticket's session.
func sessionStamp(ss *stdtls.SessionState) (issued time.Time, sid [32]byte, ok bool) {
	for _, x := range ss.Extra {
		if isSessionExtra(x) {
			b := x[len(sessionExtraTag):]
			copy(sid[:], b[8:])
			return time.Unix(int64(getUint64(b)), 0), sid, true
		}
	}
	return time.Time{}, sid, false
}

func putUint64(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func getUint64(b []byte) uint64 {
	var v uint64
	for _, x := range b[:8] {
		v = v<<8 | uint64(x)
	}
	return v
}
