package integration

import (
	"crypto/rand"
	stdtls "crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sessionServer is a server answering $ssl_session_reused with extra ssl
// directives.
func sessionServer(f *tlsFiles, addr, extra string) string {
	return fmt.Sprintf(`
  ssl_protocols TLSv1.2 TLSv1.3;
  server {
    listen %s ssl;
    server_name a.test;
    ssl_certificate %s;
    ssl_certificate_key %s;
    %s
    location / { return 200 "reused=$ssl_session_reused\n"; }
  }`, addr, f.aEC, f.aECKey, extra)
}

// resumeWithOpenSSL connects twice with openssl s_client, the second time with
// the first's session, and says whether each was new or reused (s_client's
// view, and the server's $ssl_session_reused).
func resumeWithOpenSSL(t *testing.T, f *tlsFiles, addr string, args ...string) string {
	t.Helper()
	state := func(out string) string {
		s := "?"
		switch {
		case grepLine(out, "Reused, ") != "":
			s = "Reused"
		case grepLine(out, "New, ") != "":
			s = "New"
		}
		return s + "/" + grepLine(out, "reused=")
	}
	sess := filepath.Join(t.TempDir(), "sess")
	args = append([]string{"-servername", "a.test", "-CAfile", f.caFile}, args...)
	first := sClient(t, addr, append(args, "-sess_out", sess)...)
	if _, err := os.Stat(sess); err != nil {
		// No session to resume (no ticket, no session ID): a new one next time.
		return state(first) + " then New/reused=."
	}
	second := sClient(t, addr, append(args, "-sess_in", sess)...)
	return state(first) + " then " + state(second)
}

// TestTLSSessionCacheVsNginx: ssl_session_cache with tickets off resumes (and
// none, off and tickets on behave) as nginx's with openssl s_client
// -sess_out/-sess_in, TLS 1.2 and 1.3. Known difference: TLS 1.2 by session
// ID alone (-no_ticket) resumes with nginx, not with numaproxy (crypto/tls).
func TestTLSSessionCacheVsNginx(t *testing.T) {
	sslTools(t, "openssl")
	if nginxPath() == "" {
		t.Skip("no nginx")
	}
	f := newTLSFiles(t)
	for _, tc := range []struct{ name, conf, want string }{
		{"tickets off, shared cache", "ssl_session_tickets off; ssl_session_cache shared:SSL:1m;", "New/reused=. then Reused/reused=r"},
		{"tickets off, builtin cache", "ssl_session_tickets off; ssl_session_cache builtin:1000;", "New/reused=. then Reused/reused=r"},
		{"tickets off, builtin and shared", "ssl_session_tickets off; ssl_session_cache builtin shared:SSL2:1m;", "New/reused=. then Reused/reused=r"},
		{"tickets off, cache none", "ssl_session_tickets off; ssl_session_cache none;", "New/reused=. then New/reused=."},
		{"tickets off, cache off", "ssl_session_tickets off; ssl_session_cache off;", "New/reused=. then New/reused=."},
		{"tickets on, cache off", "ssl_session_cache off;", "New/reused=. then Reused/reused=r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np, ng := addrFor(t), addrFor(t)
			startHTTP(t, sessionServer(f, np, tc.conf), np)
			startNginx(t, sessionServer(f, ng, tc.conf), ng)
			for _, v := range []string{"-tls1_3", "-tls1_2"} {
				a, b := resumeWithOpenSSL(t, f, np, v), resumeWithOpenSSL(t, f, ng, v)
				if a != tc.want || b != tc.want {
					t.Errorf("%s: numaproxy %q, nginx %q, want %q", v, a, b, tc.want)
				}
			}
			if strings.Contains(tc.conf, "shared") {
				a, b := resumeWithOpenSSL(t, f, np, "-tls1_2", "-no_ticket"), resumeWithOpenSSL(t, f, ng, "-tls1_2", "-no_ticket")
				t.Logf("TLS 1.2 by session ID: numaproxy %q, nginx %q", a, b)
				if a != "New/reused=. then New/reused=." {
					t.Errorf("TLS 1.2 by session ID: numaproxy %q", a)
				}
			}
		})
	}
}

// goResume connects to addr with Go's client sharing cache and returns the
// server's $ssl_session_reused.
func goResume(t *testing.T, f *tlsFiles, addr string, cache stdtls.ClientSessionCache, version uint16) string {
	t.Helper()
	c, err := stdtls.Dial("tcp", addr, &stdtls.Config{ServerName: "a.test", RootCAs: f.pool, ClientSessionCache: cache,
		MinVersion: version, MaxVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.0\r\nHost: a.test\r\n\r\n")
	body, _ := io.ReadAll(c)
	_, v, _ := strings.Cut(string(body), "reused=")
	return strings.TrimSpace(v)
}

// TestTLSSharedSessionCacheAcrossLoops: with tickets off and a shared cache,
// sessions resume whichever of four loops takes the connection.
func TestTLSSharedSessionCacheAcrossLoops(t *testing.T) {
	f := newTLSFiles(t)
	addr := addrFor(t)
	startMain(t, "worker_processes 4;\n", sessionServer(f, addr, "ssl_session_tickets off; ssl_session_cache shared:SSL:1m;"), addr)
	for _, v := range []uint16{stdtls.VersionTLS13, stdtls.VersionTLS12} {
		cache := stdtls.NewLRUClientSessionCache(1)
		if got := goResume(t, f, addr, cache, v); got != "." {
			t.Fatalf("first connection: reused %q", got)
		}
		for i := range 24 {
			if got := goResume(t, f, addr, cache, v); got != "r" {
				t.Fatalf("version %x, connection %d: reused %q", v, i+2, got)
			}
		}
	}
}

// TestTLSSessionTicketKeyFiles: instances given the same ssl_session_ticket_key
// files resume each other's sessions; the first file encrypts, all decrypt; the
// sizes are nginx's.
func TestTLSSessionTicketKeyFiles(t *testing.T) {
	f := newTLSFiles(t)
	key := func(name string, n int) string {
		b := make([]byte, n)
		rand.Read(b)
		p := filepath.Join(f.dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k1, k2 := key("k1.key", 80), key("k2.key", 48)
	a, b := addrFor(t), addrFor(t)
	startHTTP(t, sessionServer(f, a, "ssl_session_ticket_key "+k1+";"), a)
	startHTTP(t, sessionServer(f, b, "ssl_session_ticket_key "+k2+"; ssl_session_ticket_key "+k1+";"), b)
	for _, v := range []uint16{stdtls.VersionTLS13, stdtls.VersionTLS12} {
		cache := stdtls.NewLRUClientSessionCache(1)
		if got := goResume(t, f, a, cache, v); got != "." {
			t.Fatalf("first connection: reused %q", got)
		}
		// A's ticket (k1) opens at B, which decrypts with k1 as well ...
		if got := goResume(t, f, b, cache, v); got != "r" {
			t.Errorf("version %x: A's ticket at B: reused %q, want r", v, got)
		}
		// ... and B's ticket (k2, its first) does not open at A.
		if got := goResume(t, f, a, cache, v); got != "." {
			t.Errorf("version %x: B's ticket at A: reused %q, want .", v, got)
		}
	}
	bad := key("bad.key", 32)
	dir := writeTree(t, map[string]string{"conf/numaproxy.conf": "events { }\nhttp {\n" + sessionServer(f, "127.0.0.1:8443", "ssl_session_ticket_key "+bad+";") + "\n}\n"})
	if r := run(t, "-p", dir, "-t"); r.code != 1 || !strings.Contains(r.stderr, `"`+bad+`" must be 48 or 80 bytes in `) {
		t.Errorf("a 32-byte key file: exit %d\n%s", r.code, r.stderr)
	}
}

// TestTLSTicketsSurviveReload: without ssl_session_ticket_key, the ticket
// keys numaproxy makes are kept across a reload, so sessions resume after it.
func TestTLSTicketsSurviveReload(t *testing.T) {
	f := newTLSFiles(t)
	for _, v := range []uint16{stdtls.VersionTLS13, stdtls.VersionTLS12} {
		addr := addrFor(t)
		in := startHTTP(t, sessionServer(f, addr, ""), addr) // one reload each
		cache := stdtls.NewLRUClientSessionCache(1)
		if got := goResume(t, f, addr, cache, v); got != "." {
			t.Fatalf("first connection: reused %q", got)
		}
		// The new configuration answers /v: once a fresh connection sees it,
		// every loop has switched.
		conf := "error_log logs/error.log info;\nworker_processes 1;\nevents { }\nhttp {\n" +
			sessionServer(f, addr, `location = /v { return 200 "v2"; }`) + "\n}\n"
		if err := os.WriteFile(in.path("conf/numaproxy.conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		in.signal("reload")
		waitFor(t, "the reloaded configuration", 10*time.Second, func() bool {
			c := httpsClient(f.pool, addr, &stdtls.Config{ServerName: "a.test"})
			resp, err := c.Get("https://a.test/v")
			if err != nil {
				return false
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(body) == "v2"
		})
		if got := goResume(t, f, addr, cache, v); got != "r" {
			t.Errorf("version %x: after a reload: reused %q, want r", v, got)
		}
	}
}
