package tls

import (
	stdtls "crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/resolver"
)

// Module declares the ssl_* directives (nginx's ngx_http_ssl_module). Their
// values live in a SrvConf at the http and server levels, inherited as nginx
// merges them; Check loads the certificates of every server that has some.
var Module = &conf.Module{
	Name:       "tls",
	Directives: directives(),
	NewHTTP:    func() any { return &SrvConf{} },
	MergeHTTP:  func(parent, child any) error { child.(*SrvConf).inherit(parent.(*SrvConf)); return nil },
	Check:      check,
}

// The hooks refer to Module (ConfOf): set apart to break the initialisation cycle.
func init() { Module.Ctx = &httpcore.Hooks{Variables: variables, Init: initModule} }

const hs = conf.HTTPCtx | conf.ServerCtx

// defaultCiphers is nginx's ssl_ciphers default.
const defaultCiphers = "HIGH:!aNULL:!MD5"

func directives() []conf.Directive {
	return append([]conf.Directive{
		{Name: "ssl_certificate", Contexts: hs, Args: conf.Args1, Multi: true, Set: setFile(func(c *SrvConf) *[]fileRef { return &c.certFiles }),
			Syntax: "ssl_certificate file;",
			Doc:    "A PEM certificate (chain) of the server; several, each with its ssl_certificate_key in the same order (e.g. ECDSA and RSA), and the handshake takes the first the client supports."},
		{Name: "ssl_certificate_key", Contexts: hs, Args: conf.Args1, Multi: true, Set: setFile(func(c *SrvConf) *[]fileRef { return &c.keyFiles }),
			Syntax: "ssl_certificate_key file;",
			Doc:    "The PEM private key of the ssl_certificate of the same rank (unencrypted: there is no ssl_password_file)."},
		{Name: "ssl_protocols", Contexts: hs, Args: conf.Args1More, Set: setProtocols,
			Syntax: "ssl_protocols [TLSv1] [TLSv1.1] [TLSv1.2] [TLSv1.3];", Default: "TLSv1.2 TLSv1.3",
			Doc: "Protocol versions, a range without gaps. The default is nginx 1.23.4's (1.22 also enabled TLSv1 and TLSv1.1); SSLv2 and SSLv3 are accepted and ignored, as with an OpenSSL built without them."},
		{Name: "ssl_ciphers", Contexts: hs, Args: conf.Args1, Set: setCiphers,
			Syntax: "ssl_ciphers ciphers;", Default: "HIGH:!aNULL:!MD5",
			Doc: "TLS 1.2 and older cipher suites in OpenSSL's list format: suite names and the keywords HIGH, ALL, DEFAULT, ECDHE, kRSA, AESGCM, CHACHA20, AES, SHA1 and 3DES with ! or -. Names crypto/tls does not implement (DHE, CAMELLIA, ...) are skipped as OpenSSL skips unknown ones, and RC4 suites are never enabled (as with Debian's OpenSSL 3); a list left empty is an error. TLS 1.3 suites are not configurable (nor are they by ssl_ciphers in nginx)."},
		{Name: "ssl_prefer_server_ciphers", Contexts: hs, Args: conf.Flag, Set: setPreferServer, NoEffect: true,
			Syntax: "ssl_prefer_server_ciphers on | off;", Default: "off",
			Doc: "crypto/tls has no such switch: it chooses by its own order whichever way this is set (AES-GCM first where the CPU has AES instructions, ChaCha20-Poly1305 first for clients that put it first). Stock nginx.conf files carry it, so it is checked and accepted."},
		{Name: "ssl_session_timeout", Contexts: hs, Args: conf.Args1, Set: setSessionTimeout,
			Syntax: "ssl_session_timeout time;", Default: "5m",
			Doc: "How long a session ticket may resume a session."},
		{Name: "ssl_session_tickets", Contexts: hs, Args: conf.Flag, Set: setSessionTickets,
			Syntax: "ssl_session_tickets on | off;", Default: "on",
			Doc: "Session resumption by tickets (TLS 1.2 and 1.3). Ticket keys come from ssl_session_ticket_key, else numaproxy makes them: the same in every loop, kept across reloads (nginx makes new ones at each), a new key every 12 hours with the two before it still accepted. Off with an ssl_session_cache, the tickets name sessions kept in the cache."},
		{Name: "ssl_session_cache", Contexts: hs, Args: conf.Args1 | conf.Args2, Set: setSessionCache,
			Syntax: "ssl_session_cache off | none | [builtin[:size]] [shared:name:size];", Default: "none",
			Doc: "A cache of sessions on the server. crypto/tls resumes only from tickets, so it is used when ssl_session_tickets is off: the tickets are then identifiers of sessions kept in the cache (stateful tickets, as OpenSSL's with tickets off), for TLS 1.3 and for TLS 1.2 clients that accept tickets; TLS 1.2 resumption by session ID alone (clients without tickets) is not available. shared:name:size is one cache for every loop of the process, bounded by size and kept across reloads that keep its name and size; builtin[:size] (size in sessions, default 20480) is a cache per loop, as nginx's per worker. With tickets on, tickets carry the sessions as before and the cache is not used."},
		{Name: "ssl_session_ticket_key", Contexts: hs, Args: conf.Args1, Multi: true, Set: setTicketKey,
			Syntax: "ssl_session_ticket_key file;",
			Doc:    "A file of 48 or 80 random bytes (nginx's formats) from which the key that encrypts and decrypts session tickets is derived; with several, the first encrypts and all decrypt, so keys rotate by adding a new file first. numaproxy's tickets are crypto/tls's, so a file shares sessions between numaproxy instances, not with nginx. Without it, numaproxy makes and rotates its own (ssl_session_tickets)."},
		{Name: "ssl_verify_client", Contexts: hs, Args: conf.Args1, Set: setVerifyClient,
			Syntax: "ssl_verify_client on | off | optional | optional_no_ca;", Default: "off",
			Doc: "Asks clients for a certificate and verifies it against ssl_client_certificate and ssl_trusted_certificate. The handshake completes whatever the outcome, as nginx's; a request then gets 400 \"No required SSL certificate was sent\" (496) when on and none came, and 400 \"The SSL certificate error\" (495) when verification failed, except for an unknown issuer with optional_no_ca. $ssl_client_verify says NONE, SUCCESS or FAILED:reason with OpenSSL's reasons."},
		{Name: "ssl_verify_depth", Contexts: hs, Args: conf.Args1, Set: setVerifyDepth,
			Syntax: "ssl_verify_depth number;", Default: "1",
			Doc: "The most CA certificates between a client's certificate and the trusted one (OpenSSL's depth)."},
		{Name: "ssl_client_certificate", Contexts: hs, Args: conf.Args1, Set: setCAFile(func(c *SrvConf) *fileRef { return &c.clientCA }, bitClientCA),
			Syntax: "ssl_client_certificate file;",
			Doc:    "PEM CA certificates that verify client certificates; their names are sent to clients in the certificate request."},
		{Name: "ssl_trusted_certificate", Contexts: hs, Args: conf.Args1, Set: setCAFile(func(c *SrvConf) *fileRef { return &c.trustedCA }, bitTrustedCA),
			Syntax: "ssl_trusted_certificate file;",
			Doc:    "PEM CA certificates that verify client certificates without being named to clients."},
		{Name: "ssl_crl", Contexts: hs, Args: conf.Args1, Set: setCAFile(func(c *SrvConf) *fileRef { return &c.crl }, bitCRL),
			Syntax: "ssl_crl file;",
			Doc:    "PEM certificate revocation lists checked for every certificate of a client's chain below the trusted one (as nginx, each CA's CRL must be there: a missing one fails verification)."},
	}, append(upstreamDirectives(), extraDirectives()...)...)
}

// fileRef is a file named in the configuration.
type fileRef struct {
	path string
	pos  conf.Pos
}

// SrvConf holds the ssl_* directives of one level.
type SrvConf struct {
	certFiles, keyFiles []fileRef
	minVersion          uint16
	maxVersion          uint16
	ciphers             []uint16
	sessionTimeout      time.Duration
	noTickets           bool
	verify              verifyMode
	verifyDepth         int
	clientCA, trustedCA fileRef
	crl                 fileRef
	verifyPos           conf.Pos
	cache               sessionCacheConf
	ticketKeys          []fileRef
	up                  upstreamConf // proxy_ssl_*, at every level
	extra               extraConf
	set                 uint32

	// Built is the server's configuration once Check loaded its certificates;
	// nil without certificates.
	Built *ServerConfig
}

const (
	bitCerts = 1 << iota
	bitKeys
	bitProtocols
	bitCiphers
	bitPrefer
	bitTimeout
	bitTickets
	bitVerify
	bitDepth
	bitClientCA
	bitTrustedCA
	bitCRL
	bitCache
	bitTicketKeys
)

// ConfOf returns the ssl settings of a server; nil when the configuration was
// read without this module.
func ConfOf(srv *conf.Server) *SrvConf {
	sc, _ := srv.Conf(Module).(*SrvConf)
	return sc
}

func srvConf(c *conf.Cursor) *SrvConf { return c.HTTPConf().(*SrvConf) }

// srvInherited are the fields a level takes from its parent when it did not set them.
var srvInherited = []conf.Inherited[SrvConf]{
	{Bit: bitCerts, Take: func(c, p *SrvConf) { c.certFiles = p.certFiles }},
	{Bit: bitKeys, Take: func(c, p *SrvConf) { c.keyFiles = p.keyFiles }},
	{Bit: bitProtocols, Take: func(c, p *SrvConf) { c.minVersion, c.maxVersion = p.minVersion, p.maxVersion }},
	{Bit: bitCiphers, Take: func(c, p *SrvConf) { c.ciphers = p.ciphers }},
	{Bit: bitTimeout, Take: func(c, p *SrvConf) { c.sessionTimeout = p.sessionTimeout }},
	{Bit: bitTickets, Take: func(c, p *SrvConf) { c.noTickets = p.noTickets }},
	{Bit: bitVerify, Take: func(c, p *SrvConf) { c.verify, c.verifyPos = p.verify, p.verifyPos }},
	{Bit: bitDepth, Take: func(c, p *SrvConf) { c.verifyDepth = p.verifyDepth }},
	{Bit: bitClientCA, Take: func(c, p *SrvConf) { c.clientCA = p.clientCA }},
	{Bit: bitTrustedCA, Take: func(c, p *SrvConf) { c.trustedCA = p.trustedCA }},
	{Bit: bitCRL, Take: func(c, p *SrvConf) { c.crl = p.crl }},
	{Bit: bitCache, Take: func(c, p *SrvConf) { c.cache = p.cache }},
	{Bit: bitTicketKeys, Take: func(c, p *SrvConf) { c.ticketKeys = p.ticketKeys }},
}

func (c *SrvConf) inherit(p *SrvConf) {
	conf.TakeUnset(c, p, uint64(c.set), srvInherited)
	c.up.inherit(&p.up)
	c.extra.inherit(&p.extra)
	c.set |= p.set
}

func setFile(field func(*SrvConf) *[]fileRef) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		v := s.Args[0].Value
		if strings.Contains(v, "$") {
			return s.InvalidValue(s.Args[0], "variables in certificate file names are not supported")
		}
		if strings.HasPrefix(v, "data:") || strings.HasPrefix(v, "engine:") {
			return s.InvalidValue(s.Args[0], "data: and engine: are not supported")
		}
		sc := srvConf(c)
		*field(sc) = append(*field(sc), fileRef{path: c.Path(v), pos: s.Pos})
		if s.Name == "ssl_certificate" {
			sc.set |= bitCerts
		} else {
			sc.set |= bitKeys
		}
		return nil
	}
}

func setProtocols(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	if sc.set&bitProtocols != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	lo, hi, err := parseProtocols(c, s)
	if err != nil {
		return err
	}
	sc.minVersion, sc.maxVersion = lo, hi
	sc.set |= bitProtocols
	return nil
}

// parseProtocols reads ssl_protocols' list into a range of versions.
func parseProtocols(c *conf.Cursor, s *conf.Stmt) (lo, hi uint16, err error) {
	versions := map[string]uint16{"TLSv1": stdtls.VersionTLS10, "TLSv1.1": stdtls.VersionTLS11,
		"TLSv1.2": stdtls.VersionTLS12, "TLSv1.3": stdtls.VersionTLS13}
	have := map[uint16]bool{}
	for _, a := range s.Args {
		if a.Value == "SSLv2" || a.Value == "SSLv3" {
			c.Warn(a.Pos, "%s is not supported and is ignored", a.Value)
			continue
		}
		v, ok := versions[a.Value]
		if !ok {
			return 0, 0, s.InvalidValue(a, "")
		}
		have[v] = true
	}
	if len(have) == 0 {
		return 0, 0, s.Errorf("%q leaves no protocol enabled", s.Name)
	}
	lo, hi = uint16(0xffff), uint16(0)
	for v := range have {
		lo, hi = min(lo, v), max(hi, v)
	}
	for v := lo; v <= hi; v++ {
		if !have[v] {
			return 0, 0, s.Errorf("%q with a gap (%s missing) is not supported: crypto/tls enables a range of versions", s.Name, versionName(v))
		}
	}
	return lo, hi, nil
}

// knownVersion is OpenSSL's name of a protocol version; "" for another.
func knownVersion(v uint16) string {
	switch v {
	case stdtls.VersionTLS10:
		return "TLSv1"
	case stdtls.VersionTLS11:
		return "TLSv1.1"
	case stdtls.VersionTLS12:
		return "TLSv1.2"
	case stdtls.VersionTLS13:
		return "TLSv1.3"
	}
	return ""
}

func versionName(v uint16) string {
	if n := knownVersion(v); n != "" {
		return n
	}
	return fmt.Sprintf("0x%04x", v)
}

func setCiphers(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	if sc.set&bitCiphers != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	suites, err := ParseCiphers(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	}
	sc.ciphers = suites
	sc.set |= bitCiphers
	return nil
}

func setPreferServer(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	if sc.set&bitPrefer != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	if _, err := conf.ParseFlag(s.Args[0].Value); err != nil {
		return s.InvalidValue(s.Args[0], "it must be \"on\" or \"off\"")
	}
	sc.set |= bitPrefer
	return nil
}

func setSessionTimeout(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	if sc.set&bitTimeout != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	d, err := conf.ParseTime(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	if d == 0 {
		d = time.Nanosecond // "0": every ticket has expired
	}
	sc.sessionTimeout = d
	sc.set |= bitTimeout
	return nil
}

func setSessionTickets(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	if sc.set&bitTickets != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	on, err := conf.ParseFlag(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], "it must be \"on\" or \"off\"")
	}
	sc.noTickets = !on
	sc.set |= bitTickets
	return nil
}

func setTicketKey(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	v := s.Args[0].Value
	if strings.Contains(v, "$") || strings.HasPrefix(v, "data:") {
		return s.InvalidValue(s.Args[0], "variables and data: are not supported here")
	}
	sc.ticketKeys = append(sc.ticketKeys, fileRef{path: c.Path(v), pos: s.Pos})
	sc.set |= bitTicketKeys
	return nil
}

func setVerifyClient(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	if sc.set&bitVerify != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	m, ok := map[string]verifyMode{"off": verifyOff, "on": verifyOn, "optional": verifyOptional, "optional_no_ca": verifyOptionalNoCA}[s.Args[0].Value]
	if !ok {
		return s.InvalidValue(s.Args[0], "it must be \"on\", \"off\", \"optional\" or \"optional_no_ca\"")
	}
	sc.verify, sc.verifyPos = m, s.Pos
	sc.set |= bitVerify
	return nil
}

func setVerifyDepth(c *conf.Cursor, s *conf.Stmt) error {
	sc := srvConf(c)
	if sc.set&bitDepth != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	n, err := strconv.Atoi(s.Args[0].Value)
	if err != nil || n < 0 {
		return s.InvalidValue(s.Args[0], "")
	}
	sc.verifyDepth = n
	sc.set |= bitDepth
	return nil
}

func setCAFile(field func(*SrvConf) *fileRef, bit uint32) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		sc := srvConf(c)
		if err := once(&sc.set, bit, s); err != nil {
			return err
		}
		f, err := fileArg(c, s)
		*field(sc) = f
		return err
	}
}

// once marks bit in a set mask; a directive whose bit is marked already at this
// level is nginx's "is duplicate".
func once(set *uint32, bit uint32, s *conf.Stmt) error {
	if *set&bit != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	*set |= bit
	return nil
}

// fileArg is the file a directive names, which may not hold variables or data.
func fileArg(c *conf.Cursor, s *conf.Stmt) (fileRef, error) {
	v := s.Args[0].Value
	if strings.Contains(v, "$") || strings.HasPrefix(v, "data:") {
		return fileRef{}, s.InvalidValue(s.Args[0], "variables and data: are not supported here")
	}
	return fileRef{path: c.Path(v), pos: s.Pos}, nil
}

// initModule adds the checks nginx makes in ngx_http_process_request, where
// some address speaks TLS: plain HTTP sent to it (497) and client
// certificates (495, 496).
func initModule(s *httpcore.Setup) error {
	if s.Config.HTTP == nil {
		return nil
	}
	for _, srv := range s.Config.HTTP.Servers {
		for _, l := range srv.Listens {
			if l.SSL {
				return s.AddHandler(httpcore.PostReadPhase, checkConn)
			}
		}
	}
	return nil
}

// checkConn answers 497 to plain HTTP on a TLS address, and 495
// (verification failed) or 496 (none sent) for client certificates as nginx
// does for the server the request is for.
func checkConn(r *httpcore.Request) httpcore.Status {
	if IsPlainHTTP(r.Conn()) {
		r.Log().Info("client sent plain HTTP request to HTTPS port", "client", r.RemoteAddr().String())
		return statusPlainHTTP
	}
	srv := r.Server()
	if srv == nil {
		return httpcore.Declined
	}
	sc := ConfOf(srv)
	info := InfoOf(r.Conn())
	if sc == nil || sc.verify == verifyOff || info == nil {
		return httpcore.Declined
	}
	if info.verifyErr != 0 && (sc.verify != verifyOptionalNoCA || !info.verifyErr.optional()) {
		r.Log().Info("client SSL certificate verify error: " + info.Verify)
		return statusCertError
	}
	if sc.verify == verifyOn && len(info.Peer) == 0 {
		r.Log().Info("client sent no required SSL certificate")
		return statusNoCert
	}
	return httpcore.Declined
}

// nginx's internal statuses, answered as 400 with their own pages.
const (
	statusCertError = 495
	statusNoCert    = 496
	statusPlainHTTP = 497
)

// check loads the certificates of every server that has some, and requires them
// of the default server of every address some listen marks ssl (nginx's rule).
func check(cfg *conf.Config, self *conf.Module) error {
	if cfg.HTTP == nil {
		return nil
	}
	for _, srv := range cfg.HTTP.Servers {
		sc := srv.Conf(self).(*SrvConf)
		if len(sc.certFiles) == 0 && len(sc.keyFiles) == 0 && !sc.extra.reject {
			continue
		}
		built, err := sc.build(srv, func(msg string) {
			cfg.Warnings = append(cfg.Warnings, &conf.Error{Pos: sc.extra.staplingPos, Msg: msg})
		})
		if err != nil {
			return err
		}
		sc.Built = built
	}
	type addrInfo struct {
		ssl bool
		def *conf.Server
		pos conf.Pos
	}
	addrs := map[netip.AddrPort]*addrInfo{}
	for _, srv := range cfg.HTTP.Servers {
		for _, l := range srv.Listens {
			a := addrs[l.Addr]
			if a == nil {
				a = &addrInfo{def: srv, pos: l.Pos}
				addrs[l.Addr] = a
			}
			if l.DefaultServer {
				a.def = srv
			}
			if l.SSL {
				a.ssl = true
				a.pos = l.Pos
			}
		}
	}
	for _, a := range addrs {
		if a.ssl && a.def.Conf(self).(*SrvConf).Built == nil {
			return &conf.Error{Pos: a.def.Pos, Msg: "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive"}
		}
	}
	return nil
}

// build loads the server's certificates and makes its crypto/tls configuration.
func (sc *SrvConf) build(srv *conf.Server, warn func(string)) (*ServerConfig, error) {
	if len(sc.keyFiles) < len(sc.certFiles) {
		f := sc.certFiles[len(sc.keyFiles)]
		return nil, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("no \"ssl_certificate_key\" is defined for certificate \"%s\"", f.path)}
	}
	if len(sc.certFiles) < len(sc.keyFiles) {
		f := sc.keyFiles[len(sc.certFiles)]
		return nil, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("no \"ssl_certificate\" is defined for key \"%s\"", f.path)}
	}
	ciphers := sc.ciphers
	if sc.set&bitCiphers == 0 {
		ciphers, _ = ParseCiphers(defaultCiphers)
	}
	cfg := &stdtls.Config{
		MinVersion: stdtls.VersionTLS12, MaxVersion: stdtls.VersionTLS13,
		CipherSuites:           ciphers,
		SessionTicketsDisabled: sc.noTickets,
		// nginx writes records of ssl_buffer_size (16k) from the first byte.
		DynamicRecordSizingDisabled: true,
		// ALPN as nginx without HTTP/2: http/1.1, and a client that offers only
		// protocols the server lacks fails the handshake.
		NextProtos: []string{"http/1.1"},
	}
	if sc.set&bitProtocols != 0 {
		cfg.MinVersion, cfg.MaxVersion = sc.minVersion, sc.maxVersion
	}
	var passwords [][]byte
	if f := sc.extra.passwordFile; f.path != "" {
		var err error
		if passwords, err = readPasswords(f); err != nil {
			return nil, err
		}
	}
	var staple []byte
	if sc.extra.stapling && sc.extra.stapleFile.path != "" {
		var err error
		if staple, err = loadStaple(sc.extra.stapleFile); err != nil {
			return nil, err
		}
	}
	cfg.CurvePreferences = sc.extra.curves
	for i, cf := range sc.certFiles {
		kf := sc.keyFiles[i]
		cert, err := loadKeyPair(cf.path, kf.path, passwords)
		cert.OCSPStaple = staple
		if err != nil {
			return nil, &conf.Error{Pos: cf.pos, Msg: fmt.Sprintf("cannot load certificate \"%s\" with key \"%s\": %v", cf.path, kf.path, err), Err: err}
		}
		cfg.Certificates = append(cfg.Certificates, cert)
	}
	var staples staplers
	if sc.extra.stapling && staple == nil && len(cfg.Certificates) > 0 {
		var err error
		if staples, err = sc.staplers(srv, cfg.Certificates, warn); err != nil {
			return nil, err
		}
		// Handshakes take the certificates from the staplers, which swap in
		// the fetched responses.
		cfg.Certificates = nil
	}
	var keys [][32]byte
	for _, f := range sc.ticketKeys {
		k, err := ticketKey(f)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if keys != nil {
		cfg.SetSessionTicketKeys(keys)
	}
	timeout := sc.sessionTimeout
	if sc.set&bitTimeout == 0 {
		timeout = 5 * time.Minute
	}
	out := &ServerConfig{TLS: cfg, SessionTimeout: timeout, Reject: sc.extra.reject, RecordSize: sc.extra.bufferSize,
		AutoTicketKeys: keys == nil, staplers: staples}
	if sc.noTickets && sc.cache.mode == cacheOn {
		// Sessions kept in the cache, tickets naming them.
		cfg.SessionTicketsDisabled = false
		if sc.cache.hasShared {
			out.sessions = sharedCache(sc.cache.sharedName, sc.cache.sharedSize)
		} else {
			out.builtinCache = sc.cache.builtinSize
		}
	}
	if sc.verify != verifyOff {
		v, err := sc.buildVerifier()
		if err != nil {
			return nil, err
		}
		out.verifier = v
		// Every certificate is taken; the layer verifies it (VerifyConnection)
		// and the request is refused later, as in nginx.
		cfg.ClientAuth = stdtls.RequestClientCert
		cfg.ClientCAs = v.named
	}
	return out, nil
}

// staplers prepares the OCSP fetching of every certificate of the server.
func (sc *SrvConf) staplers(srv *conf.Server, certs []stdtls.Certificate, warn func(string)) (staplers, error) {
	var cas []*x509.Certificate
	for _, f := range []fileRef{sc.trustedCA, sc.clientCA} {
		if f.path == "" {
			continue
		}
		c, err := loadCerts(f.path)
		if err != nil {
			return nil, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("cannot load CA certificates \"%s\": %v", f.path, err), Err: err}
		}
		cas = append(cas, c...)
	}
	var rs []netip.AddrPort
	timeout, network := 30*time.Second, "ip"

	if srv != nil {
		if lc, ok := srv.Conf(resolver.Module).(*resolver.LocConf); ok && lc != nil {
			if r := lc.Resolver; r != nil {
				rs = r.Servers
				if r.NoIPv6 {
					network = "ip4"
				} else if r.NoIPv4 {
					network = "ip6"
				}
			}
			if lc.Timeout > 0 {
				timeout = lc.Timeout
			}
		}
	}
	out := make(staplers, len(certs))
	for i := range certs {
		st, err := newStapler(&certs[i], sc.certFiles[i].path, sc.extra.responder, sc.extra.stapleVerify, cas, warn)
		if err != nil {
			return nil, &conf.Error{Pos: sc.certFiles[i].pos, Msg: fmt.Sprintf("cannot read certificate \"%s\": %v", sc.certFiles[i].path, err), Err: err}
		}
		st.resolver, st.timeout, st.network = rs, timeout, network
		out[i] = st
	}
	return out, nil
}
