package tls

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/numaproxy/numaproxy/conf"
)

// verifyMode is ssl_verify_client's value.
type verifyMode uint8

const (
	verifyOff verifyMode = iota
	verifyOn
	verifyOptional
	verifyOptionalNoCA
)

// verifyErr is an OpenSSL verification error (X509_V_ERR_*) numaproxy reports;
// 0 is success.
type verifyErr uint8

const (
	verifyOK verifyErr = iota
	errNoIssuerLocally
	errLeafSignature
	errSelfSigned
	errSelfSignedInChain
	errExpired
	errNotYetValid
	errChainTooLong
	errRevoked
	errNoCRL
	errCRLExpired
	errCRLNotYetValid
	errPurpose
	errSignature
	errHostname
	errOther
)

// String is X509_verify_cert_error_string's text (OpenSSL 3).
func (e verifyErr) String() string {
	switch e {
	case verifyOK:
		return "ok"
	case errNoIssuerLocally:
		return "unable to get local issuer certificate"
	case errLeafSignature:
		return "unable to verify the first certificate"
	case errSelfSigned:
		return "self-signed certificate"
	case errSelfSignedInChain:
		return "self-signed certificate in certificate chain"
	case errExpired:
		return "certificate has expired"
	case errNotYetValid:
		return "certificate is not yet valid"
	case errChainTooLong:
		return "certificate chain too long"
	case errRevoked:
		return "certificate revoked"
	case errNoCRL:
		return "unable to get certificate CRL"
	case errCRLExpired:
		return "CRL has expired"
	case errCRLNotYetValid:
		return "CRL is not yet valid"
	case errPurpose:
		return "unsupported certificate purpose"
	case errSignature:
		return "certificate signature failure"
	case errHostname:
		return "certificate does not match the name"
	}
	return "certificate verify failed"
}

// optional reports the errors optional_no_ca lets through (nginx's
// ngx_ssl_verify_error_optional): those of an issuer numaproxy does not know.
func (e verifyErr) optional() bool {
	return e == errNoIssuerLocally || e == errLeafSignature || e == errSelfSigned || e == errSelfSignedInChain
}

// verifier checks client certificates for one server.
type verifier struct {
	roots *x509.CertPool // ssl_client_certificate and ssl_trusted_certificate
	named *x509.CertPool // ssl_client_certificate: the names sent to clients
	crls  []*x509.RevocationList
	depth int
}

// buildVerifier loads the server's CA files and CRLs.
func (sc *SrvConf) buildVerifier() (*verifier, error) {
	v := &verifier{roots: x509.NewCertPool(), depth: 1}
	if sc.set&bitDepth != 0 {
		v.depth = sc.verifyDepth
	}
	if sc.verify != verifyOptionalNoCA && sc.clientCA.path == "" { // nginx 1.22 wants it even with ssl_trusted_certificate
		return nil, &conf.Error{Pos: sc.verifyPos, Msg: "no ssl_client_certificate for ssl_verify_client"}
	}
	for _, f := range []fileRef{sc.clientCA, sc.trustedCA} {
		if f.path == "" {
			continue
		}
		certs, err := loadCerts(f.path)
		if err != nil {
			return nil, &conf.Error{Pos: f.pos, Msg: fmt.Sprintf("cannot load CA certificates \"%s\": %v", f.path, err), Err: err}
		}
		for _, c := range certs {
			v.roots.AddCert(c)
		}
		if f == sc.clientCA {
			v.named = x509.NewCertPool()
			for _, c := range certs {
				v.named.AddCert(c)
			}
		}
	}
	if sc.crl.path != "" {
		crls, err := loadCRLs(sc.crl.path)
		if err != nil {
			return nil, &conf.Error{Pos: sc.crl.pos, Msg: fmt.Sprintf("cannot load CRL \"%s\": %v", sc.crl.path, err), Err: err}
		}
		v.crls = crls
	}
	return v, nil
}

func loadCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" && b.Type != "TRUSTED CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

func loadCRLs(path string) ([]*x509.RevocationList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.RevocationList
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "X509 CRL" {
			continue
		}
		crl, err := x509.ParseRevocationList(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, crl)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CRL found")
	}
	return out, nil
}

// check verifies a client's chain as OpenSSL with nginx's settings would: the
// leaf for client use, up to depth certificates above it, and with CRLs the
// revocation of every certificate below the root.
func (v *verifier) check(chain []*x509.Certificate, now time.Time) verifyErr {
	if len(chain) == 0 {
		return verifyOK
	}
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: v.roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		var inv x509.CertificateInvalidError
		var unknown x509.UnknownAuthorityError
		switch {
		case errors.As(err, &inv) && inv.Reason == x509.Expired:
			if now.Before(inv.Cert.NotBefore) {
				return errNotYetValid
			}
			return errExpired
		case errors.As(err, &inv) && inv.Reason == x509.IncompatibleUsage:
			return errPurpose
		case errors.As(err, &unknown):
			if len(chain) == 1 && bytes.Equal(leaf.RawIssuer, leaf.RawSubject) && leaf.CheckSignatureFrom(leaf) == nil {
				return errSelfSigned
			}
			if len(chain) == 1 {
				return errLeafSignature // the leaf alone, from an issuer not known
			}
			if last := chain[len(chain)-1]; bytes.Equal(last.RawIssuer, last.RawSubject) {
				return errSelfSignedInChain
			}
			return errNoIssuerLocally
		case errors.As(err, new(x509.InsecureAlgorithmError)):
			return errSignature
		}
		return errOther
	}
	var best []*x509.Certificate
	for _, c := range chains {
		if best == nil || len(c) < len(best) {
			best = c
		}
	}
	// OpenSSL's depth counts the CAs between the leaf and the trust anchor.
	if len(best)-2 > v.depth {
		return errChainTooLong
	}
	if v.crls != nil {
		for i := 0; i+1 < len(best); i++ {
			if e := v.revoked(best[i], best[i+1], now); e != verifyOK {
				return e
			}
		}
	}
	return verifyOK
}

// revoked checks c against its issuer's CRL, which must be there (nginx sets
// X509_V_FLAG_CRL_CHECK_ALL).
func (v *verifier) revoked(c, issuer *x509.Certificate, now time.Time) verifyErr {
	for _, crl := range v.crls {
		if !bytes.Equal(crl.RawIssuer, issuer.RawSubject) || crl.CheckSignatureFrom(issuer) != nil {
			continue
		}
		if now.Before(crl.ThisUpdate) {
			return errCRLNotYetValid
		}
		if !crl.NextUpdate.IsZero() && now.After(crl.NextUpdate) {
			return errCRLExpired
		}
		for _, e := range crl.RevokedCertificateEntries {
			if e.SerialNumber.Cmp(c.SerialNumber) == 0 {
				return errRevoked
			}
		}
		return verifyOK
	}
	return errNoCRL
}
