package tls

import (
	"crypto/rand"
	stdtls "crypto/tls"
	"errors"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// ServerConfig is one server's TLS settings: the crypto/tls configuration
// (certificates, versions, suites, ticket keys) and what crypto/tls has no
// field for.
type ServerConfig struct {
	TLS *stdtls.Config
	// SessionTimeout bounds the age of a session ticket that may resume
	// (nginx's ssl_session_timeout); 0 leaves crypto/tls's 7 days.
	SessionTimeout time.Duration
	// HandshakeTimeout bounds the handshakes this configuration starts; 0
	// leaves Options.HandshakeTimeout.
	HandshakeTimeout time.Duration
	// AutoTicketKeys: tickets are sealed with numaproxy's own keys, the same
	// in every loop, kept across reloads and rotated (no
	// ssl_session_ticket_key); else with TLS's.
	AutoTicketKeys bool
	// Reject refuses handshakes that end up with this server
	// (ssl_reject_handshake): an unrecognized_name alert.
	Reject bool
	// RecordSize bounds the plaintext of the records sent (ssl_buffer_size);
	// 0 is 16k.
	RecordSize int

	verifier *verifier // client certificates (ssl_verify_client); nil: none asked

	// sessions, else a per-loop cache of builtinCache bytes: tickets are
	// identifiers of sessions kept there (ssl_session_cache with tickets off).
	sessions     *sessionCache
	builtinCache int

	staplers staplers // OCSP responses fetched (ssl_stapling); nil: Certificates as they are
}

// Router picks the configuration of a connection. Its methods run on the loop
// inside handshakes and must not block.
type Router interface {
	// Default is the configuration a handshake on an address starts with (its
	// default server's), nil when the address does not speak TLS.
	Default(local netip.AddrPort) *ServerConfig
	// ByName is the configuration of the server the client named (SNI) on the
	// address; nil keeps the default.
	ByName(local netip.AddrPort, serverName string) *ServerConfig
}

// Options tune a Layer; zero values take the defaults noted.
type Options struct {
	// HandshakeTimeout bounds a handshake from the accept (nginx uses
	// client_header_timeout); default 60s.
	HandshakeTimeout time.Duration
	// MaxHandshakeBytes bounds what a client may send before its handshake
	// completes; default 64 KiB.
	MaxHandshakeBytes int
	// KTLS hands the record layer to the kernel where it can take it.
	KTLS bool
	// Support is the kernel's kTLS (default Probe()).
	Support *Support
	// Stats receives the counters; may be shared by the layers of many loops.
	Stats *Stats
	// PlainHTTP hands a connection whose first byte cannot start a TLS
	// handshake to the inner handler as plain, marked (IsPlainHTTP) for
	// nginx's 497; else it is closed as a failed handshake.
	PlainHTTP bool
}

// Stats count handshakes by outcome and record path; safe from any goroutine.
type Stats struct {
	KTLS          atomic.Uint64 // connections whose records the kernel handles
	Userspace     atomic.Uint64 // connections whose records crypto/tls handles on the loop
	Resumed       atomic.Uint64 // handshakes that resumed a session
	Failures      atomic.Uint64 // handshakes that failed (timeouts included)
	Timeouts      atomic.Uint64 // handshakes that ran out of time
	KTLSFallbacks atomic.Uint64 // kernel could have taken it but userspace did (see Layer)
}

// Layer terminates TLS for one loop: it is the loop's Handler and wraps the
// inner one (the HTTP worker). Connections on addresses the Router gives no
// configuration pass straight through. Everything in it runs on its loop.
type Layer struct {
	inner   eventloop.Handler
	router  Router
	opts    Options
	support *Support
	stats   *Stats

	clones  map[*ServerConfig]*stdtls.Config // this loop's copies, hooks installed
	builtin map[*ServerConfig]*sessionCache  // this loop's ssl_session_cache builtin

	ringCfg  *stdtls.Config // ticketConfig
	ringSeen *ticketRing

	client       bool                             // connections to upstreams (Client)
	clientClones map[*ClientConfig]*stdtls.Config // this loop's copies, with their session caches
	cur          *Conn                            // the connection whose handshake runs now
	keylog       keyLog

	plain []byte // decrypted input on its way to the inner handler
	out   []byte // records of one write, sent with one socket write
	stage []byte // Writev's pieces gathered into full records
	tail  []byte // the rest of a record read from the socket to reach a boundary
	batch *Conn  // the connection whose records go to out
	one   [1][]byte

	holding   []*Conn // connections that held plaintext back in this batch (WritevMore)
	flushAt   eventloop.BatchEnd
	flushInit bool

	fileBuf [maxPlaintext]byte // a file segment on its way into records (WriteFile)

	watch       eventloop.Conn // a raw conn just handed to the inner handler
	watchClosed bool
}

const (
	maxPlaintext  = 16 << 10
	maxRecord     = 5 + maxPlaintext + 2048 // a record header and the largest ciphertext
	outFlushBytes = 64 << 10
)

// NewLayer makes the layer of one loop around inner.
func NewLayer(inner eventloop.Handler, router Router, opts Options) *Layer {
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 60 * time.Second
	}
	if opts.MaxHandshakeBytes <= 0 {
		opts.MaxHandshakeBytes = 64 << 10
	}
	if opts.Stats == nil {
		opts.Stats = &Stats{}
	}
	l := &Layer{inner: inner, router: router, opts: opts, stats: opts.Stats, clones: map[*ServerConfig]*stdtls.Config{},
		builtin: map[*ServerConfig]*sessionCache{}, clientClones: map[*ClientConfig]*stdtls.Config{}}
	if opts.KTLS {
		l.support = opts.Support
		if l.support == nil {
			l.support = Probe()
		}
		if !l.support.Any() {
			l.support = nil
		}
	}
	l.keylog.l = l
	return l
}

// SetRouter switches to a new configuration (call it on the loop, e.g. through
// Loop.Run at a reload). Handshakes under way finish with the one they started
// with.
func (l *Layer) SetRouter(r Router) {
	l.router = r
	clear(l.clones)
	clear(l.builtin)
}

// Stats returns the counters.
func (l *Layer) Stats() *Stats { return l.stats }

// KTLS reports whether this layer hands connections to the kernel.
func (l *Layer) KTLS() bool { return l.support != nil }

// config returns this loop's copy of sc with the layer's hooks: ticket age
// (ssl_session_timeout), the key log and the count of session tickets sent
// under the application key (kTLS's transmit sequence).
func (l *Layer) config(sc *ServerConfig) *stdtls.Config {
	if cfg := l.clones[sc]; cfg != nil {
		return cfg
	}
	cfg := sc.TLS.Clone()
	cfg.GetConfigForClient = l.configForClient
	if st := sc.staplers; st != nil {
		cfg.GetCertificate = func(h *stdtls.ClientHelloInfo) (*stdtls.Certificate, error) {
			log := slog.Default()
			if c := l.cur; c != nil {
				log = c.raw.Loop().Logger()
			}
			return st.get(h, log)
		}
	}
	if l.support != nil {
		cfg.KeyLogWriter = &l.keylog
	}
	if v := sc.verifier; v != nil {
		cfg.VerifyConnection = func(cs stdtls.ConnectionState) error {
			if c := l.cur; c != nil {
				c.info.verified(v, cs.PeerCertificates)
			}
			return nil // as nginx, the request is refused, not the handshake
		}
	}
	timeout := sc.SessionTimeout
	store := sc.sessions
	if store == nil && sc.builtinCache > 0 {
		store = newSessionCache(sc.builtinCache)
		l.builtin[sc] = store
	}
	if !cfg.SessionTicketsDisabled {
		// Tickets carry their issue time (ssl_session_timeout) and the session's
		// identifier ($ssl_session_id); with a cache, a ticket is the key of
		// the session kept there.
		cfg.WrapSession = func(cs stdtls.ConnectionState, ss *stdtls.SessionState) ([]byte, error) {
			var sid [32]byte
			if c := l.cur; c != nil {
				if c.appSecrets {
					c.appTickets++ // sent under the application traffic key
				}
				if cs.DidResume && c.hasTicketSID {
					c.info.sid, c.info.hasSID = c.ticketSID, true
				}
				sid = *c.info.SessionID()
			}
			now := time.Now()
			stampSession(ss, now, &sid)
			if store == nil {
				if sc.AutoTicketKeys {
					return l.ticketConfig(now).EncryptTicket(cs, ss)
				}
				return cfg.EncryptTicket(cs, ss)
			}
			state, err := ss.Bytes()
			if err != nil {
				return nil, err
			}
			id := make([]byte, 32)
			rand.Read(id)
			expires := now.Add(7 * 24 * time.Hour)
			if timeout > 0 {
				expires = now.Add(timeout)
			}
			store.put([32]byte(id), state, expires)
			return id, nil
		}
		cfg.UnwrapSession = func(identity []byte, cs stdtls.ConnectionState) (*stdtls.SessionState, error) {
			var ss *stdtls.SessionState
			var err error
			if store == nil {
				keys := cfg
				if sc.AutoTicketKeys {
					keys = l.ticketConfig(time.Now())
				}
				ss, err = keys.DecryptTicket(identity, cs)
			} else if state := store.get(identity, time.Now()); state != nil {
				ss, err = stdtls.ParseSessionState(state)
			}
			if err != nil || ss == nil {
				return nil, nil
			}
			issued, sid, ok := sessionStamp(ss)
			if !ok || timeout > 0 && time.Since(issued) > timeout {
				return nil, nil // a full handshake, as after nginx's ssl_session_timeout
			}
			if c := l.cur; c != nil {
				c.ticketSID, c.hasTicketSID = sid, true
			}
			return ss, nil
		}
	}
	l.clones[sc] = cfg
	return cfg
}

// configForClient switches to the server the client named (SNI), and rejects
// the handshake when that server, or the default one for no or an unknown
// name, has ssl_reject_handshake on.
func (l *Layer) configForClient(hello *stdtls.ClientHelloInfo) (*stdtls.Config, error) {
	c := l.cur
	if c == nil {
		return nil, nil
	}
	// crypto/tls made these slices for this hello: kept, not copied.
	c.info.OfferedCiphers, c.info.OfferedCurves = hello.CipherSuites, hello.SupportedCurves
	sc := c.sc
	if hello.ServerName != "" {
		if byName := l.router.ByName(c.raw.LocalAddr(), hello.ServerName); byName != nil {
			sc = byName
		}
	}
	if sc.Reject {
		c.rejected = true
		return nil, errRejected
	}
	if sc == c.sc {
		return nil, nil
	}
	c.sc = sc
	return l.config(sc), nil
}

var errRejected = errors.New("tls: handshake rejected (ssl_reject_handshake)")

// buffers allocates the loop's buffers on first use, on the loop's thread.
func (l *Layer) buffers() {
	if l.plain == nil {
		l.plain = make([]byte, 96<<10)
		l.out = make([]byte, 0, outFlushBytes+maxRecord)
		l.stage = make([]byte, 0, maxPlaintext)
		l.tail = make([]byte, maxRecord)
	}
}

// OnOpen implements eventloop.Handler.
func (l *Layer) OnOpen(raw eventloop.Conn) {
	if l.client {
		// Connected to an upstream: the client speaks first.
		if c, ok := raw.Context().(*Conn); ok {
			l.buffers()
			if c.hsTimeout > 0 {
				raw.SetTimeout(c.hsTimeout)
			}
			c.resume()
		}
		return
	}
	sc := l.router.Default(raw.LocalAddr())
	if sc == nil {
		l.inner.OnOpen(raw)
		return
	}
	l.buffers()
	c := &Conn{layer: l, raw: raw, sc: sc}
	c.tr.c = c
	raw.SetContext(c)
	timeout := l.opts.HandshakeTimeout
	if sc.HandshakeTimeout > 0 {
		timeout = sc.HandshakeTimeout
	}
	raw.SetTimeout(timeout)
}

// OnData implements eventloop.Handler.
func (l *Layer) OnData(raw eventloop.Conn, data []byte) {
	switch c := raw.Context().(type) {
	case *Conn:
		c.onData(data)
	case *kconn:
		l.inner.OnData(c, data)
	default:
		l.inner.OnData(raw, data)
	}
}

// OnWriteBlocked implements eventloop.Handler.
func (l *Layer) OnWriteBlocked(raw eventloop.Conn) {
	switch c := raw.Context().(type) {
	case *Conn:
		c.onWriteBlocked()
	case *kconn:
		l.inner.OnWriteBlocked(c)
	default:
		l.inner.OnWriteBlocked(raw)
	}
}

// OnWritable implements eventloop.Handler.
func (l *Layer) OnWritable(raw eventloop.Conn) {
	switch c := raw.Context().(type) {
	case *Conn:
		c.onWritable()
	case *kconn:
		l.inner.OnWritable(c)
	default:
		l.inner.OnWritable(raw)
	}
}

// OnTimeout implements eventloop.Handler.
func (l *Layer) OnTimeout(raw eventloop.Conn) {
	switch c := raw.Context().(type) {
	case *Conn:
		c.onTimeout()
	case *kconn:
		l.inner.OnTimeout(c)
	default:
		l.inner.OnTimeout(raw)
	}
}

// OnClose implements eventloop.Handler.
func (l *Layer) OnClose(raw eventloop.Conn, err error) {
	if raw == l.watch {
		l.watchClosed = true
	}
	switch c := raw.Context().(type) {
	case *Conn:
		c.onClose(err)
	case *kconn:
		l.inner.OnClose(c, err)
	default:
		l.inner.OnClose(raw, err)
	}
}
