package main

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/numaproxy/numaproxy/tls/tlstest"
)

// certFiles are the TLS shapes' certificates, the same for every proxy: PEM
// certificate and key files (numaproxy, nginx) and both in one file (HAProxy).
type certFiles struct {
	ECCert, ECKey, ECPem    string
	RSACert, RSAKey, RSAPem string
}

// writeCerts makes an ECDSA P-256 and an RSA-2048 certificate for 127.0.0.1.
func writeCerts(dir string) (certFiles, error) {
	var c certFiles
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return c, err
	}
	ca, err := tlstest.NewCA()
	if err != nil {
		return c, err
	}
	write := func(kt tlstest.KeyType, name string) (cert, key, both string, err error) {
		l, err := ca.Issue(kt, "bench.test", "127.0.0.1")
		if err != nil {
			return "", "", "", err
		}
		if cert, key, err = l.WriteFiles(dir, name); err != nil {
			return "", "", "", err
		}
		both = filepath.Join(dir, name+".pem")
		return cert, key, both, os.WriteFile(both, append(append([]byte{}, l.CertPEM...), l.KeyPEM...), 0o644)
	}
	if c.ECCert, c.ECKey, c.ECPem, err = write(tlstest.ECDSA, "ecdsa"); err != nil {
		return c, err
	}
	c.RSACert, c.RSAKey, c.RSAPem, err = write(tlstest.RSA, "rsa")
	return c, err
}

// tlsShape runs wrk over https on the ECDSA or the RSA address of the run.
func tlsShape(rsa bool, path string, conns int, headers ...string) func(h *harness, p *proc, addr netip.AddrPort, res *runResult) error {
	return func(h *harness, p *proc, _ netip.AddrPort, res *runResult) error {
		a := h.cur.TLSEC
		if rsa {
			a = h.cur.TLSRSA
		}
		if h.cur.NoResume {
			if err := checkNoResume(a); err != nil {
				return err
			}
		}
		r, err := h.wrkURL(p, res, "https://"+a+path, conns, headers...)
		if err == nil && path == "/1m" && r.Seconds > 0 {
			res.MBps = float64(r.Requests) * largeSize / r.Seconds / 1e6
		}
		return err
	}
}

// tlsResume runs openssl s_time -reuse (one connection at a time, each
// resuming the first one's session and asking for /) on CPU 1. The detail
// says how many connections did resume.
func (h *harness) tlsResume(p *proc, _ netip.AddrPort, res *runResult) error {
	secs := max(1, int(h.opt.duration.Seconds()))
	w := openWindow(p.pid)
	out, err := exec.Command("taskset", "-c", "1", "openssl", "s_time", "-connect", h.cur.TLSEC, "-reuse", "-www", "/",
		"-time", strconv.Itoa(secs)).CombinedOutput()
	w.close()
	if err != nil {
		return fmt.Errorf("openssl s_time: %w: %s", err, lastLines(string(out), 3))
	}
	n, reused, other, err := parseSTime(string(out))
	if err != nil {
		return err
	}
	w.fill(res, n)
	if res.Seconds > 0 { // s_time's own "real seconds" are whole seconds
		res.ReqPerSec = float64(n) / res.Seconds
	}
	res.Detail = map[string]int64{"resumed": reused, "not_resumed": other}
	if reused < n*9/10 {
		res.Errors, res.ErrorKind = 1, fmt.Sprintf("only %d of %d connections resumed", reused, n)
	}
	return nil
}

// parseSTime reads s_time's "N connections in T real seconds" line of the
// reuse run and its progress characters ('r': resumed).
func parseSTime(out string) (n, reused, other int64, err error) {
	i := strings.Index(out, "Now timing with session id reuse")
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("openssl s_time: no reuse run: %s", lastLines(out, 3))
	}
	sc := bufio.NewScanner(strings.NewReader(out[i:]))
	sc.Scan() // the heading
	found := false
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 5 && f[1] == "connections" && f[2] == "in" && f[4] == "real" {
			n, _ = strconv.ParseInt(f[0], 10, 64)
			found = true
			continue
		}
		if !found && line != "starting" && !strings.Contains(line, " ") {
			reused += int64(strings.Count(line, "r"))
			other += int64(len(line) - strings.Count(line, "r"))
		}
	}
	if !found {
		return 0, 0, 0, fmt.Errorf("openssl s_time: no result: %s", lastLines(out, 3))
	}
	return n, reused, other, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " / ")
}

// checkNoResume makes sure the server resumes no session: openssl s_client
// -reconnect over TLS 1.2 (whose tickets come within the handshake) says
// "Reused" for a resumed one.
func checkNoResume(addr string) error {
	cmd := exec.Command("openssl", "s_client", "-connect", addr, "-reconnect", "-tls1_2")
	cmd.Stdin = strings.NewReader("")
	out, _ := cmd.CombinedOutput()
	s := string(out)
	if !strings.Contains(s, "\nNew, ") {
		return fmt.Errorf("openssl s_client -reconnect: no handshake: %s", lastLines(s, 3))
	}
	if strings.Contains(s, "\nReused, ") {
		return fmt.Errorf("sessions resumed with resumption off")
	}
	return nil
}
