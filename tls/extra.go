package tls

import (
	"bufio"
	"bytes"
	stdtls "crypto/tls"
	"encoding/asn1"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
)

// extraConf holds the ssl_* directives beyond the core ones: stapling, key
// passwords, curves, record size, and those refused or accepted without effect.
type extraConf struct {
	stapling     bool
	staplingPos  conf.Pos
	stapleFile   fileRef
	stapleVerify bool
	responder    *url.URL // ssl_stapling_responder
	passwordFile fileRef
	curves       []stdtls.CurveID // nil: crypto/tls's default (auto)
	bufferSize   int
	reject       bool
	set          uint32
}

const (
	exStapling = 1 << iota
	exStapleFile
	exStaplingVerify
	exResponder
	exPasswordFile
	exCurve
	exDHParam
	exBufferSize
	exEarlyData
	exReject
)

// extraInherited are the fields a level takes from its parent when it did not set them.
var extraInherited = []conf.Inherited[extraConf]{
	{Bit: exStapling, Take: func(c, p *extraConf) { c.stapling, c.staplingPos = p.stapling, p.staplingPos }},
	{Bit: exStapleFile, Take: func(c, p *extraConf) { c.stapleFile = p.stapleFile }},
	{Bit: exStaplingVerify, Take: func(c, p *extraConf) { c.stapleVerify = p.stapleVerify }},
	{Bit: exResponder, Take: func(c, p *extraConf) { c.responder = p.responder }},
	{Bit: exPasswordFile, Take: func(c, p *extraConf) { c.passwordFile = p.passwordFile }},
	{Bit: exCurve, Take: func(c, p *extraConf) { c.curves = p.curves }},
	{Bit: exBufferSize, Take: func(c, p *extraConf) { c.bufferSize = p.bufferSize }},
	{Bit: exReject, Take: func(c, p *extraConf) { c.reject = p.reject }},
}

func (e *extraConf) inherit(p *extraConf) {
	conf.TakeUnset(e, p, uint64(e.set), extraInherited)
	e.set |= p.set
}

// curveNames are OpenSSL's names of the groups crypto/tls has.
var curveNames = map[string]stdtls.CurveID{
	"X25519": stdtls.X25519, "x25519": stdtls.X25519,
	"prime256v1": stdtls.CurveP256, "P-256": stdtls.CurveP256, "secp256r1": stdtls.CurveP256,
	"secp384r1": stdtls.CurveP384, "P-384": stdtls.CurveP384,
	"secp521r1": stdtls.CurveP521, "P-521": stdtls.CurveP521,
	"X25519MLKEM768": stdtls.X25519MLKEM768,
}

func extraDirectives() []conf.Directive {
	ex := func(c *conf.Cursor, s *conf.Stmt, bit uint32) (*extraConf, error) {
		e := &srvConf(c).extra
		return e, once(&e.set, bit, s)
	}
	flag := func(bit uint32, set func(e *extraConf, on bool, s *conf.Stmt) error) func(*conf.Cursor, *conf.Stmt) error {
		return func(c *conf.Cursor, s *conf.Stmt) error {
			e, err := ex(c, s, bit)
			if err != nil {
				return err
			}
			on, err := conf.ParseFlag(s.Args[0].Value)
			if err != nil {
				return s.InvalidValue(s.Args[0], "it must be \"on\" or \"off\"")
			}
			return set(e, on, s)
		}
	}
	file := func(bit uint32, field func(e *extraConf) *fileRef) func(*conf.Cursor, *conf.Stmt) error {
		return func(c *conf.Cursor, s *conf.Stmt) error {
			e, err := ex(c, s, bit)
			if err != nil {
				return err
			}
			*field(e), err = fileArg(c, s)
			return err
		}
	}
	return []conf.Directive{
		{Name: "ssl_stapling", Contexts: hs, Args: conf.Flag, Set: flag(exStapling, func(e *extraConf, on bool, s *conf.Stmt) error {
			e.stapling, e.staplingPos = on, s.Pos
			return nil
		}), Syntax: "ssl_stapling on | off;", Default: "off",
			Doc: "Staples an OCSP response to the handshakes of clients that ask for one (status_request): the one of ssl_stapling_file, else one fetched from the certificate's OCSP responder (or ssl_stapling_responder) for each certificate whose issuer is in its chain or in ssl_trusted_certificate. As nginx, the first handshake starts the fetch and handshakes staple once a response is there; it is refreshed before its nextUpdate (at most hourly), a failure retried after 5 minutes. Fetches run off the loops; a host name is resolved with the server's resolver (without one, nginx's warning and the system's resolver). A certificate with no responder or issuer is served without a staple (a warning)."},
		{Name: "ssl_stapling_file", Contexts: hs, Args: conf.Args1, Set: file(exStapleFile, func(e *extraConf) *fileRef { return &e.stapleFile }),
			Syntax: "ssl_stapling_file file;",
			Doc:    "A DER OCSP response stapled for every certificate of the server instead of fetched ones (as nginx, it is not verified), read at start and at each reload."},
		{Name: "ssl_stapling_verify", Contexts: hs, Args: conf.Flag, Set: flag(exStaplingVerify, func(e *extraConf, on bool, _ *conf.Stmt) error {
			e.stapleVerify = on
			return nil
		}), Syntax: "ssl_stapling_verify on | off;", Default: "off",
			Doc: "Staples fetched responses only when signed by the certificate's issuer (or a responder it certified) and that issuer chains to ssl_trusted_certificate; as nginx, ssl_stapling_file is not verified."},
		{Name: "ssl_stapling_responder", Contexts: hs, Args: conf.Args1, Set: func(c *conf.Cursor, s *conf.Stmt) error {
			e, err := ex(c, s, exResponder)
			if err != nil {
				return err
			}
			u, err := parseResponder(s.Args[0].Value)
			if err != nil {
				return s.Errorf("%v in \"ssl_stapling_responder\"", err)
			}
			e.responder = u
			return nil
		}, Syntax: "ssl_stapling_responder url;",
			Doc: "The OCSP responder asked instead of the one in the certificates' authority information access; http:// only, as nginx."},
		{Name: "ssl_password_file", Contexts: hs, Args: conf.Args1, Set: file(exPasswordFile, func(e *extraConf) *fileRef { return &e.passwordFile }),
			Syntax: "ssl_password_file file;",
			Doc:    "Passphrases of encrypted ssl_certificate_key files, one a line, each tried in turn: PKCS#8 (PBES2 with PBKDF2 and AES-CBC, OpenSSL 3's default) and legacy PEM encryption."},
		{Name: "ssl_ecdh_curve", Contexts: hs, Args: conf.Args1, Set: func(c *conf.Cursor, s *conf.Stmt) error {
			e, err := ex(c, s, exCurve)
			if err != nil {
				return err
			}
			if s.Args[0].Value == "auto" {
				return nil
			}
			for _, name := range strings.Split(s.Args[0].Value, ":") {
				id, ok := curveNames[name]
				if !ok {
					return s.InvalidValue(s.Args[0], fmt.Sprintf("crypto/tls has no group %q", name))
				}
				e.curves = append(e.curves, id)
			}
			return nil
		}, Syntax: "ssl_ecdh_curve auto | curve[:curve...];", Default: "auto",
			Doc: "The key exchange groups allowed, by OpenSSL's names: X25519, prime256v1, secp384r1, secp521r1 and X25519MLKEM768; auto is crypto/tls's default set. crypto/tls chooses among them in its own order (the list's order is ignored, unlike OpenSSL)."},
		{Name: "ssl_dhparam", Contexts: hs, Args: conf.Args1, NoEffect: true, Set: file(exDHParam, func(*extraConf) *fileRef { return new(fileRef) }),
			Syntax: "ssl_dhparam file;",
			Doc:    "Accepted for nginx configurations and ignored: crypto/tls has no finite-field Diffie-Hellman (DHE) suites, only ECDHE."},
		{Name: "ssl_buffer_size", Contexts: hs, Args: conf.Args1, Set: func(c *conf.Cursor, s *conf.Stmt) error {
			e, err := ex(c, s, exBufferSize)
			if err != nil {
				return err
			}
			n, err := conf.ParseSize(s.Args[0].Value)
			if err != nil || n < 1 {
				return s.InvalidValue(s.Args[0], "")
			}
			e.bufferSize = int(min(n, maxPlaintext))
			return nil
		}, Syntax: "ssl_buffer_size size;", Default: "16k",
			Doc: "The most plaintext in one TLS record sent: a response's records are filled to it (its bytes gathered until a record is full, the response ends, or the loop has handled the events at hand: never waiting for the upstream's next bytes); smaller records reach the client's parser sooner. Records the kernel writes (kTLS) are up to 16k whatever this says."},
		{Name: "ssl_early_data", Contexts: hs, Args: conf.Flag, Set: flag(exEarlyData, func(_ *extraConf, on bool, s *conf.Stmt) error {
			if on {
				return s.Errorf("\"ssl_early_data on\" is not supported: crypto/tls has no TLS 1.3 0-RTT server")
			}
			return nil
		}), Syntax: "ssl_early_data on | off;", Default: "off",
			Doc: "Only off: crypto/tls accepts no 0-RTT data, so no request is ever early ($ssl_early_data is empty)."},
		{Name: "ssl_reject_handshake", Contexts: hs, Args: conf.Flag, Set: flag(exReject, func(e *extraConf, on bool, _ *conf.Stmt) error {
			e.reject = on
			return nil
		}), Syntax: "ssl_reject_handshake on | off;", Default: "off",
			Doc: "Rejects handshakes naming this server, or naming no known server when it is the default one, with an unrecognized_name alert; such a server needs no certificate."},
		{Name: "ssl_conf_command", Contexts: hs, Args: conf.Args2, Set: refuse("numaproxy's TLS is crypto/tls, not OpenSSL: there are no OpenSSL configuration commands")},
	}
}

// refuse is the Set of a directive numaproxy declines, with why.
func refuse(why string) func(*conf.Cursor, *conf.Stmt) error {
	return func(_ *conf.Cursor, s *conf.Stmt) error {
		return s.Errorf("%q is not supported: %s", s.Name, why)
	}
}

// loadStaple reads an ssl_stapling_file: it must be a DER OCSPResponse.
func loadStaple(f fileRef) ([]byte, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("cannot read OCSP response \"%s\": %v", f.path, err), Err: err}
	}
	var resp struct {
		Status asn1.Enumerated
		Rest   asn1.RawValue `asn1:"explicit,tag:0,optional"`
	}
	if rest, err := asn1.Unmarshal(data, &resp); err != nil || len(rest) > 0 {
		return nil, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("\"%s\" is not a DER OCSP response", f.path)}
	}
	return data, nil
}

// readPasswords reads ssl_password_file: one passphrase a line.
func readPasswords(f fileRef) ([][]byte, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("cannot read password file \"%s\": %v", f.path, err), Err: err}
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		out = append(out, bytes.TrimRight(sc.Bytes(), "\r"))
	}
	if len(out) == 0 {
		return nil, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("no passwords in \"%s\"", f.path)}
	}
	return out, nil
}

var errNoPassword = errors.New("the key is encrypted and no ssl_password_file passphrase opens it")
