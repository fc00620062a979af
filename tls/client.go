package tls

import (
	"bytes"
	stdtls "crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
)

// ClientConfig is the TLS of connections to an upstream (the proxy_ssl_*
// directives of a location). It is read-only once built.
type ClientConfig struct {
	tls   *stdtls.Config // verification (proxy_ssl_verify) is its VerifyConnection
	reuse bool
}

// Client runs one loop's TLS to upstreams: an eventloop.Handler around the
// handler of upstream connections (inner), which gets a *Conn once the
// handshake is done and the handshake's failure as the connection's close.
// Handshakes run as coroutines on the loop, as the server's.
type Client struct {
	l *Layer
}

// NewClient makes a loop's client side around inner.
func NewClient(inner eventloop.Handler) *Client {
	l := NewLayer(inner, nil, Options{})
	l.client = true
	return &Client{l: l}
}

// Dial connects to addr and starts the handshake once connected. What is
// written before the handshake ends is sent after it; inner's OnOpen says the
// connection is ready, its OnClose that it failed (a handshake that runs out
// of timeout wraps eventloop.ErrDialTimeout).
func (cl *Client) Dial(loop *eventloop.Loop, addr netip.AddrPort, o eventloop.DialOptions, cc *ClientConfig, ctx any) (eventloop.Conn, error) {
	c := &Conn{layer: cl.l, client: cc, ctx: ctx, hsTimeout: o.Timeout}
	c.tr.c = c
	raw, err := loop.DialWith(addr, o, cl.l, c)
	if err != nil {
		return nil, err
	}
	c.raw = raw
	return c, nil
}

// Same reports whether c is a connection of this configuration (a keep-alive
// connection may be reused), or a plain one when cc is nil.
func Same(c eventloop.Conn, cc *ClientConfig) bool {
	tc, ok := c.(*Conn)
	if !ok {
		return cc == nil
	}
	return tc.client == cc
}

// clientConfig is this loop's copy of cc: its own session cache (per upstream
// configuration per loop, as nginx's per worker).
func (l *Layer) clientConfig(cc *ClientConfig) *stdtls.Config {
	if cfg := l.clientClones[cc]; cfg != nil {
		return cfg
	}
	if len(l.clientClones) >= 256 {
		clear(l.clientClones) // configurations of past reloads
	}
	cfg := cc.tls.Clone()
	if cc.reuse {
		cfg.ClientSessionCache = stdtls.NewLRUClientSessionCache(16)
	}
	l.clientClones[cc] = cfg
	return cfg
}

// UpstreamConfig builds the TLS of a location's connections to an https
// upstream whose host (as in proxy_pass) is host.
func UpstreamConfig(loc *conf.Location, host string) (*ClientConfig, error) {
	sc, _ := loc.Conf(Module).(*SrvConf)
	if sc == nil {
		return nil, errors.New("proxy_ssl: the tls module is not built in")
	}
	return sc.buildClient(host)
}

// upstreamConf holds the proxy_ssl_* directives of one level.
type upstreamConf struct {
	serverName     bool
	name           string
	verify         bool
	depth          int
	trusted        fileRef
	cert, key      fileRef
	minVer, maxVer uint16
	ciphers        []uint16
	noReuse        bool
	set            uint32
}

const (
	upServerName = 1 << iota
	upName
	upVerify
	upDepth
	upTrusted
	upCert
	upKey
	upProtocols
	upCiphers
	upReuse
)

// upInherited are the fields a level takes from its parent when it did not set them.
var upInherited = []conf.Inherited[upstreamConf]{
	{Bit: upServerName, Take: func(c, p *upstreamConf) { c.serverName = p.serverName }},
	{Bit: upName, Take: func(c, p *upstreamConf) { c.name = p.name }},
	{Bit: upVerify, Take: func(c, p *upstreamConf) { c.verify = p.verify }},
	{Bit: upDepth, Take: func(c, p *upstreamConf) { c.depth = p.depth }},
	{Bit: upTrusted, Take: func(c, p *upstreamConf) { c.trusted = p.trusted }},
	{Bit: upCert, Take: func(c, p *upstreamConf) { c.cert = p.cert }},
	{Bit: upKey, Take: func(c, p *upstreamConf) { c.key = p.key }},
	{Bit: upProtocols, Take: func(c, p *upstreamConf) { c.minVer, c.maxVer = p.minVer, p.maxVer }},
	{Bit: upCiphers, Take: func(c, p *upstreamConf) { c.ciphers = p.ciphers }},
	{Bit: upReuse, Take: func(c, p *upstreamConf) { c.noReuse = p.noReuse }},
}

func (u *upstreamConf) inherit(p *upstreamConf) {
	conf.TakeUnset(u, p, uint64(u.set), upInherited)
	u.set |= p.set
}

func upstreamDirectives() []conf.Directive {
	const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx
	up := func(c *conf.Cursor, s *conf.Stmt, bit uint32) (*upstreamConf, error) {
		u := &srvConf(c).up
		return u, once(&u.set, bit, s)
	}
	flag := func(bit uint32, set func(u *upstreamConf, on bool)) func(*conf.Cursor, *conf.Stmt) error {
		return func(c *conf.Cursor, s *conf.Stmt) error {
			u, err := up(c, s, bit)
			if err != nil {
				return err
			}
			on, err := conf.ParseFlag(s.Args[0].Value)
			if err != nil {
				return s.InvalidValue(s.Args[0], "it must be \"on\" or \"off\"")
			}
			set(u, on)
			return nil
		}
	}
	file := func(bit uint32, field func(u *upstreamConf) *fileRef) func(*conf.Cursor, *conf.Stmt) error {
		return func(c *conf.Cursor, s *conf.Stmt) error {
			u, err := up(c, s, bit)
			if err != nil {
				return err
			}
			*field(u), err = fileArg(c, s)
			return err
		}
	}
	return []conf.Directive{
		{Name: "proxy_ssl_server_name", Contexts: hsl, Args: conf.Flag, Set: flag(upServerName, func(u *upstreamConf, on bool) { u.serverName = on }),
			Syntax: "proxy_ssl_server_name on | off;", Default: "off",
			Doc: "Sends the server name (proxy_ssl_name) in the TLS handshake with an https upstream (SNI)."},
		{Name: "proxy_ssl_name", Contexts: hsl, Args: conf.Args1, Set: func(c *conf.Cursor, s *conf.Stmt) error {
			u, err := up(c, s, upName)
			if err != nil {
				return err
			}
			if strings.Contains(s.Args[0].Value, "$") {
				return s.InvalidValue(s.Args[0], "variables are not supported here")
			}
			u.name = s.Args[0].Value
			return nil
		}, Syntax: "proxy_ssl_name name;", Default: "the host of proxy_pass",
			Doc: "The name the upstream's certificate is verified against and sent as SNI."},
		{Name: "proxy_ssl_verify", Contexts: hsl, Args: conf.Flag, Set: flag(upVerify, func(u *upstreamConf, on bool) { u.verify = on }),
			Syntax: "proxy_ssl_verify on | off;", Default: "off",
			Doc: "Verifies the upstream's certificate chain against proxy_ssl_trusted_certificate and its name against proxy_ssl_name; a failure fails the connection (the next upstream is tried as for an error)."},
		{Name: "proxy_ssl_verify_depth", Contexts: hsl, Args: conf.Args1, Set: func(c *conf.Cursor, s *conf.Stmt) error {
			u, err := up(c, s, upDepth)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(s.Args[0].Value)
			if err != nil || n < 0 {
				return s.InvalidValue(s.Args[0], "")
			}
			u.depth = n
			return nil
		}, Syntax: "proxy_ssl_verify_depth number;", Default: "1",
			Doc: "The most CA certificates between the upstream's certificate and the trusted one."},
		{Name: "proxy_ssl_trusted_certificate", Contexts: hsl, Args: conf.Args1, Set: file(upTrusted, func(u *upstreamConf) *fileRef { return &u.trusted }),
			Syntax: "proxy_ssl_trusted_certificate file;",
			Doc:    "PEM CA certificates that verify upstreams' certificates (required by proxy_ssl_verify on)."},
		{Name: "proxy_ssl_certificate", Contexts: hsl, Args: conf.Args1, Set: file(upCert, func(u *upstreamConf) *fileRef { return &u.cert }),
			Syntax: "proxy_ssl_certificate file;",
			Doc:    "A PEM client certificate (chain) presented to https upstreams that ask for one."},
		{Name: "proxy_ssl_certificate_key", Contexts: hsl, Args: conf.Args1, Set: file(upKey, func(u *upstreamConf) *fileRef { return &u.key }),
			Syntax: "proxy_ssl_certificate_key file;",
			Doc:    "The PEM private key of proxy_ssl_certificate."},
		{Name: "proxy_ssl_protocols", Contexts: hsl, Args: conf.Args1More, Set: func(c *conf.Cursor, s *conf.Stmt) error {
			u, err := up(c, s, upProtocols)
			if err != nil {
				return err
			}
			u.minVer, u.maxVer, err = parseProtocols(c, s)
			return err
		}, Syntax: "proxy_ssl_protocols [TLSv1] [TLSv1.1] [TLSv1.2] [TLSv1.3];", Default: "TLSv1.2 TLSv1.3",
			Doc: "Protocol versions offered to https upstreams, a range without gaps (the default is nginx 1.23.4's)."},
		{Name: "proxy_ssl_ciphers", Contexts: hsl, Args: conf.Args1, Set: func(c *conf.Cursor, s *conf.Stmt) error {
			u, err := up(c, s, upCiphers)
			if err != nil {
				return err
			}
			if u.ciphers, err = ParseCiphers(s.Args[0].Value); err != nil {
				return s.InvalidValue(s.Args[0], err.Error())
			}
			return nil
		}, Syntax: "proxy_ssl_ciphers ciphers;", Default: "DEFAULT",
			Doc: "TLS 1.2 suites offered to https upstreams, in ssl_ciphers' syntax."},
		{Name: "proxy_ssl_session_reuse", Contexts: hsl, Args: conf.Flag, Set: flag(upReuse, func(u *upstreamConf, on bool) { u.noReuse = !on }),
			Syntax: "proxy_ssl_session_reuse on | off;", Default: "on",
			Doc: "Resumes sessions with https upstreams: each loop keeps the sessions of each location's upstream configuration."},
	}
}

// buildClient makes the ClientConfig of a location; host is proxy_pass's.
func (sc *SrvConf) buildClient(host string) (*ClientConfig, error) {
	u := &sc.up
	name := u.name
	if name == "" {
		name = host
		if h, _, ok := strings.Cut(host, ":"); ok && !strings.HasPrefix(host, "[") {
			name = h
		} else if strings.HasPrefix(host, "[") {
			if i := strings.IndexByte(host, ']'); i > 0 {
				name = host[1:i]
			}
		}
	}
	ciphers := u.ciphers
	if u.set&upCiphers == 0 {
		ciphers, _ = ParseCiphers("DEFAULT")
	}
	cfg := &stdtls.Config{
		MinVersion: stdtls.VersionTLS12, MaxVersion: stdtls.VersionTLS13,
		CipherSuites: ciphers,
		// Verified by VerifyConnection when proxy_ssl_verify is on, against
		// proxy_ssl_name whether or not it is sent.
		InsecureSkipVerify: true,
	}
	if u.set&upProtocols != 0 {
		cfg.MinVersion, cfg.MaxVersion = u.minVer, u.maxVer
	}
	if u.serverName {
		if _, err := netip.ParseAddr(name); err != nil {
			cfg.ServerName = name // never an address, as nginx
		}
	}
	if u.cert.path != "" || u.key.path != "" {
		if u.cert.path == "" || u.key.path == "" {
			f := u.cert
			if f.path == "" {
				f = u.key
			}
			return nil, &conf.Error{Pos: f.pos, Msg: "proxy_ssl_certificate and proxy_ssl_certificate_key go together"}
		}
		pair, err := stdtls.LoadX509KeyPair(u.cert.path, u.key.path)
		if err != nil {
			return nil, &conf.Error{Pos: u.cert.pos, Msg: fmt.Sprintf("cannot load certificate \"%s\" with key \"%s\": %v", u.cert.path, u.key.path, err), Err: err}
		}
		cfg.Certificates = []stdtls.Certificate{pair}
	}
	cc := &ClientConfig{tls: cfg, reuse: !u.noReuse}
	if u.verify {
		if u.trusted.path == "" {
			return nil, errors.New("no proxy_ssl_trusted_certificate for proxy_ssl_verify")
		}
		certs, err := loadCerts(u.trusted.path)
		if err != nil {
			return nil, &conf.Error{Pos: u.trusted.pos, Msg: fmt.Sprintf("cannot load CA certificates \"%s\": %v", u.trusted.path, err), Err: err}
		}
		v := &verifier{roots: x509.NewCertPool(), depth: 1}
		if u.set&upDepth != 0 {
			v.depth = u.depth
		}
		for _, c := range certs {
			v.roots.AddCert(c)
		}
		cfg.VerifyConnection = func(cs stdtls.ConnectionState) error {
			if e := v.checkServer(cs.PeerCertificates, name, time.Now()); e != verifyOK {
				return fmt.Errorf("upstream SSL certificate verify error: (%s)", e)
			}
			return nil
		}
	}
	return cc, nil
}

// checkServer verifies an upstream's chain and that it is for name.
func (v *verifier) checkServer(chain []*x509.Certificate, name string, now time.Time) verifyErr {
	if len(chain) == 0 {
		return errOther
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	chains, err := chain[0].Verify(x509.VerifyOptions{Roots: v.roots, Intermediates: inter, CurrentTime: now})
	if err != nil {
		var inv x509.CertificateInvalidError
		switch {
		case errors.As(err, &inv) && inv.Reason == x509.Expired:
			return errExpired
		case errors.As(err, new(x509.UnknownAuthorityError)):
			if len(chain) == 1 && bytes.Equal(chain[0].RawIssuer, chain[0].RawSubject) {
				return errSelfSigned
			}
			return errNoIssuerLocally
		}
		return errOther
	}
	shortest := len(chains[0])
	for _, c := range chains {
		shortest = min(shortest, len(c))
	}
	if shortest-2 > v.depth {
		return errChainTooLong
	}
	if chain[0].VerifyHostname(name) != nil {
		return errHostname
	}
	return verifyOK
}
