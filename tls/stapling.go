package tls

import (
	"context"
	stdtls "crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ocsp"
)

// stapler keeps the OCSP response of one certificate fetched from its
// responder (ssl_stapling without ssl_stapling_file), as nginx does: the
// first handshake that finds no fresh response starts a fetch, and handshakes
// staple the response once one is there. The fetch is one goroutine per
// certificate at a time, shared by every loop (net/http, off the loops); a
// handshake only reads atomics and never waits for it.
type stapler struct {
	base     *stdtls.Certificate // without a staple
	leaf     *x509.Certificate
	issuer   *x509.Certificate // nil: no stapling for this certificate
	url      *url.URL          // the responder, http:// only
	verify   bool              // ssl_stapling_verify
	trusted  *x509.CertPool    // what the issuer must chain to when verify is on
	chain    *x509.CertPool    // the certificate's chain, for that
	resolver []netip.AddrPort  // nil: no "resolver" (host names go to the system's, with nginx's warning)
	timeout  time.Duration     // resolver_timeout
	network  string            // "ip", or "ip4"/"ip6" by the resolver's ipv6=off/ipv4=off

	stapled atomic.Pointer[stapled]
	refresh atomic.Int64 // unix nanoseconds before which no fetch starts
	loading atomic.Bool
}

// stapled is a certificate with a verified response, sent until valid.
type stapled struct {
	cert  *stdtls.Certificate
	valid time.Time
}

// staplers choose the certificate of a handshake (crypto/tls's rule for
// several: the first the client supports) and hand out its latest staple.
type staplers []*stapler

// get is the configuration's GetCertificate, on the loop.
func (s staplers) get(h *stdtls.ClientHelloInfo, log *slog.Logger) (*stdtls.Certificate, error) {
	st := s[0]
	if len(s) > 1 {
		for _, c := range s {
			if h.SupportsCertificate(c.base) == nil {
				st = c
				break
			}
		}
	}
	return st.current(time.Now(), log), nil
}

// current returns the certificate with a staple valid at now, starting a
// fetch when none is or a refresh is due.
func (st *stapler) current(now time.Time, log *slog.Logger) *stdtls.Certificate {
	if st.issuer == nil {
		return st.base
	}
	if now.UnixNano() >= st.refresh.Load() && st.loading.CompareAndSwap(false, true) {
		go st.update(log)
	}
	if p := st.stapled.Load(); p != nil && !now.After(p.valid) {
		return p.cert
	}
	return st.base
}

// OCSP timings of nginx: a failed fetch is retried after 5 minutes; a good
// response is refreshed 5 minutes before it expires, within an hour, not
// sooner than in 5 minutes.
const (
	ocspRetry      = 5 * time.Minute
	ocspMaxRefresh = time.Hour
	ocspTimeout    = 60 * time.Second // nginx's fixed OCSP request timeout
	ocspMaxBody    = 16 << 10         // nginx's buffer for the response
)

// update fetches, verifies and installs a response; off the loops.
func (st *stapler) update(log *slog.Logger) {
	defer st.loading.Store(false)
	der, resp, err := st.fetch(log)
	now := time.Now()
	if err != nil {
		log.Error(err.Error(), "responder", st.url.String(), "certificate", st.leaf.Subject.String())
		st.refresh.Store(now.Add(ocspRetry).UnixNano())
		return
	}
	valid := resp.NextUpdate
	if valid.IsZero() {
		valid = now.Add(100 * 365 * 24 * time.Hour) // no nextUpdate: good until replaced
	}
	cert := *st.base
	cert.OCSPStaple = der
	st.stapled.Store(&stapled{cert: &cert, valid: valid})
	refresh := max(min(valid.Add(-ocspRetry).UnixNano(), now.Add(ocspMaxRefresh).UnixNano()), now.Add(ocspRetry).UnixNano())
	st.refresh.Store(refresh)
}

// fetch asks the responder by GET, as nginx, and checks the answer.
func (st *stapler) fetch(log *slog.Logger) ([]byte, *ocsp.Response, error) {
	req, err := ocsp.CreateRequest(st.leaf, st.issuer, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP request not made: %w", err)
	}
	path := st.url.EscapedPath()
	if !strings.HasSuffix(path, "/") {
		path += "/"
	}
	u := "http://" + st.url.Host + path + url.PathEscape(base64.StdEncoding.EncodeToString(req))
	ctx, cancel := context.WithTimeout(context.Background(), ocspTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP request not made: %w", err)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return st.dial(ctx, network, addr, log)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	res, err := client.Do(hreq)
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP responder not reached: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("OCSP responder sent invalid %q status", res.Status)
	}
	der, err := io.ReadAll(io.LimitReader(res.Body, ocspMaxBody+1))
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP response not read: %w", err)
	}
	if len(der) > ocspMaxBody {
		return nil, nil, errors.New("OCSP responder sent too long response")
	}
	resp, err := st.check(der, time.Now())
	if err != nil {
		return nil, nil, err
	}
	return der, resp, nil
}

// check parses the response for the certificate; with ssl_stapling_verify it
// must be signed by the issuer (or a responder the issuer certified) and the
// issuer must be trusted. As nginx, only a "good" status within its validity
// (5 minutes of clock skew) is stapled.
func (st *stapler) check(der []byte, now time.Time) (*ocsp.Response, error) {
	var issuer *x509.Certificate
	if st.verify {
		issuer = st.issuer
		if _, err := issuer.Verify(x509.VerifyOptions{Roots: st.trusted, Intermediates: st.chain, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return nil, fmt.Errorf("OCSP_basic_verify() failed: the issuer is not trusted: %w", err)
		}
	}
	resp, err := ocsp.ParseResponseForCert(der, st.leaf, issuer)
	if err != nil {
		return nil, fmt.Errorf("OCSP response not verified: %w", err)
	}
	switch resp.Status {
	case ocsp.Good:
	case ocsp.Revoked:
		return nil, errors.New("certificate status \"revoked\" in the OCSP response")
	default:
		return nil, errors.New("certificate status \"unknown\" in the OCSP response")
	}
	const skew = 5 * time.Minute
	if resp.ThisUpdate.After(now.Add(skew)) || (!resp.NextUpdate.IsZero() && resp.NextUpdate.Before(now.Add(-skew))) {
		return nil, errors.New("OCSP_check_validity() failed: the response is not yet or no longer valid")
	}
	return resp, nil
}

// dial connects to the responder; a host name is resolved with the server's
// "resolver" when there is one. Without one nginx warns "no resolver defined"
// and uses the addresses it found at start with the system's resolver: this
// warns the same and asks the system's resolver now.
func (st *stapler) dial(ctx context.Context, network, addr string, log *slog.Logger) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	if _, err := netip.ParseAddr(host); err == nil {
		return d.DialContext(ctx, network, addr)
	}
	r := net.DefaultResolver
	if len(st.resolver) == 0 {
		log.Warn("no resolver defined to resolve " + host)
	} else {
		servers := st.resolver
		r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var err error
			for _, s := range servers {
				var c net.Conn
				if c, err = d.DialContext(ctx, network, s.String()); err == nil {
					return c, nil
				}
			}
			return nil, err
		}}
	}
	rctx, cancel := context.WithTimeout(ctx, st.timeout)
	ips, err := r.LookupNetIP(rctx, st.network, host)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%s could not be resolved: %w", host, err)
	}
	for _, ip := range ips {
		var c net.Conn
		if c, err = d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port)); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// newStapler prepares the stapling of cert: the responder from
// ssl_stapling_responder or the certificate, the issuer from the chain or the
// trusted certificates. A certificate without either is served without a
// staple and warn says why (nginx's warnings).
func newStapler(cert *stdtls.Certificate, certFile string, responder *url.URL, verify bool, cas []*x509.Certificate, warn func(string)) (*stapler, error) {
	st := &stapler{base: cert, verify: verify, url: responder, timeout: 30 * time.Second, network: "ip"}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	st.leaf = leaf
	if st.url == nil {
		if len(leaf.OCSPServer) == 0 {
			warn(fmt.Sprintf("\"ssl_stapling\" ignored, no OCSP responder URL in the certificate \"%s\"", certFile))
			return st, nil
		}
		u, err := parseResponder(leaf.OCSPServer[0])
		if err != nil {
			warn(fmt.Sprintf("\"ssl_stapling\" ignored, %v in the certificate \"%s\"", err, certFile))
			return st, nil
		}
		st.url = u
	}
	st.chain = x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			continue
		}
		st.chain.AddCert(c)
		if st.issuer == nil && leaf.CheckSignatureFrom(c) == nil {
			st.issuer = c
		}
	}
	st.trusted = x509.NewCertPool()
	for _, c := range cas {
		st.trusted.AddCert(c)
		if st.issuer == nil && leaf.CheckSignatureFrom(c) == nil {
			st.issuer = c
		}
	}
	if st.issuer == nil {
		warn(fmt.Sprintf("\"ssl_stapling\" ignored, issuer certificate not found for certificate \"%s\"", certFile))
	}
	return st, nil
}

// parseResponder reads an OCSP responder URL: nginx takes http:// only.
func parseResponder(s string) (*url.URL, error) {
	if len(s) < 7 || !strings.EqualFold(s[:7], "http://") {
		return nil, fmt.Errorf("invalid URL prefix in OCSP responder \"%s\"", s)
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("invalid OCSP responder \"%s\"", s)
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}
