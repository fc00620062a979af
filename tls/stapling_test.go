package tls

import (
	"crypto/x509"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/numaproxy/numaproxy/tls/tlstest"
)

// TestStaplerFetch: a handshake without a response starts one fetch and goes
// on without a staple; the response fetched is stapled until its nextUpdate;
// a revoked status, a response signed by another CA with ssl_stapling_verify,
// or a responder error staple nothing and retry only after 5 minutes.
func TestStaplerFetch(t *testing.T) {
	ca, err := tlstest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlstest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(tlstest.ECDSA, "a.test")
	if err != nil {
		t.Fatal(err)
	}
	var status atomic.Int32 // ocsp.Good, Revoked; 99: answer 500; 98: signed by other
	var hits atomic.Int32
	var next time.Duration = time.Hour
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		s := status.Load()
		if s == 99 {
			w.WriteHeader(500)
			return
		}
		der, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil {
			t.Errorf("request path %q: %v", r.URL.RawPath, err)
		}
		req, err := ocsp.ParseRequest(der)
		if err != nil {
			t.Errorf("request: %v", err)
			w.WriteHeader(400)
			return
		}
		signer := ca
		if s == 98 {
			signer, s = other, ocsp.Good
		}
		resp, _ := ocsp.CreateResponse(signer.Cert, signer.Cert, ocsp.Response{Status: int(s), SerialNumber: req.SerialNumber,
			ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(next), RevokedAt: time.Now().Add(-time.Hour)}, signer.Key)
		w.Write(resp)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	cert := leaf.TLS
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mk := func(verify bool) *stapler {
		st, err := newStapler(&cert, "a.crt", u, verify, []*x509.Certificate{ca.Cert}, func(w string) { t.Error(w) })
		if err != nil || st.issuer == nil {
			t.Fatal(err, st.issuer)
		}
		return st
	}
	wait := func(st *stapler) {
		for i := 0; st.loading.Load() && i < 500; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}

	st := mk(true)
	now := time.Now()
	if c := st.current(now, log); len(c.OCSPStaple) != 0 {
		t.Fatal("stapled before any fetch")
	}
	wait(st)
	c := st.current(time.Now(), log)
	if len(c.OCSPStaple) == 0 {
		t.Fatal("not stapled after the fetch")
	}
	if r, err := ocsp.ParseResponse(c.OCSPStaple, ca.Cert); err != nil || r.Status != ocsp.Good {
		t.Fatalf("staple: %v %v", r, err)
	}
	// Refreshed within the hour, not sooner than 5 minutes; past nextUpdate
	// nothing is stapled.
	if d := time.Duration(st.refresh.Load() - now.UnixNano()); d < 5*time.Minute || d > time.Hour+time.Minute {
		t.Errorf("refresh in %v", d)
	}
	if c := st.current(now.Add(2*time.Hour), log); len(c.OCSPStaple) != 0 {
		t.Error("stapled past nextUpdate")
	}
	wait(st)

	for _, tc := range []struct {
		name   string
		status int32
		verify bool
	}{{"revoked", ocsp.Revoked, false}, {"responder error", 99, false}, {"other signer", 98, true}} {
		status.Store(tc.status)
		st := mk(tc.verify)
		before := hits.Load()
		st.current(time.Now(), log)
		wait(st)
		if c := st.current(time.Now(), log); len(c.OCSPStaple) != 0 {
			t.Errorf("%s: stapled", tc.name)
		}
		if n := hits.Load() - before; n != 1 {
			t.Errorf("%s: %d fetches, want 1 until the retry", tc.name, n)
		}
		if d := time.Until(time.Unix(0, st.refresh.Load())); d < 4*time.Minute || d > 5*time.Minute {
			t.Errorf("%s: retry in %v", tc.name, d)
		}
	}
}
