package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/template"
	"time"
)

//go:embed templates/*.tmpl
var templates embed.FS

// noFile is the descriptor limit given to every proxy (and taken by the harness).
const noFile = 20000

// confData fills the config templates.
type confData struct {
	Dir, Listen, Upstream string
	Static                string // the folder the static-file shapes serve (/static/)
	NoFile, MaxConn       int
	Domains               string // numa_domains argument, "" for none
	Reload                bool   // the run reloads the proxy (nginx: reuseport; HAProxy: master-worker)
	AccessLog             string // access_log's arguments for numaproxy and nginx ("off" but in the log shapes)
	UpstreamKeepalive     int    // the upstream's keepalive for numaproxy and nginx (HAProxy keeps every connection)
	// TLS shapes: an ECDSA P-256 and an RSA-2048 address ("" in the others).
	TLSEC, TLSRSA string
	// NoResume turns session resumption off (tickets and cache): wrk resumes
	// its connections' sessions, so the full-handshake shapes refuse it.
	NoResume bool
	Certs    certFiles
}

func renderTemplate(name, out string, d confData) error {
	t, err := template.ParseFS(templates, "templates/"+name)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}

// proxyDef is one proxy under test: how to configure and start it.
type proxyDef struct {
	Name string
	// command returns the argv (before pinning) for a proxy listening on listen,
	// after writing its configuration into dir.
	command func(env *env, dir string, d confData) ([]string, error)
	// reload asks the running proxy to reload its configuration; nil if it cannot.
	reload func(p *proc) error
	// gzip: its configuration compresses (the gzip shapes run only on these).
	gzip bool
	// only: the shapes it runs, if not all.
	only []string
}

func signalReload(sig syscall.Signal) func(p *proc) error {
	return func(p *proc) error { return syscall.Kill(p.pid, sig) }
}

var proxyDefs = map[string]proxyDef{
	"numaproxy": {Name: "numaproxy", gzip: true, command: func(e *env, dir string, d confData) ([]string, error) {
		conf := filepath.Join(dir, "numaproxy.conf")
		if err := renderTemplate("numaproxy.conf.tmpl", conf, d); err != nil {
			return nil, err
		}
		return []string{e.numaproxy, "-p", dir, "-c", conf}, nil
	}, reload: signalReload(syscall.SIGHUP)},
	"nginx": {Name: "nginx", gzip: true, command: func(e *env, dir string, d confData) ([]string, error) {
		conf := filepath.Join(dir, "nginx.conf")
		if err := renderTemplate("nginx.conf.tmpl", conf, d); err != nil {
			return nil, err
		}
		return []string{e.nginx, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf, "-g", "daemon off;"}, nil
	}, reload: signalReload(syscall.SIGHUP)},
	"haproxy": {Name: "haproxy", command: func(e *env, dir string, d confData) ([]string, error) {
		conf := filepath.Join(dir, "haproxy.cfg")
		if err := renderTemplate("haproxy.cfg.tmpl", conf, d); err != nil {
			return nil, err
		}
		if d.Reload {
			// Master-worker mode: SIGUSR2 to the master starts new workers.
			return []string{e.haproxy, "-W", "-f", conf, "-db"}, nil
		}
		return []string{e.haproxy, "-f", conf, "-db"}, nil
	}, reload: signalReload(syscall.SIGUSR2)},
	"go-httputil": {Name: "go-httputil", command: func(e *env, dir string, d confData) ([]string, error) {
		return []string{"env", "GOMAXPROCS=1", e.self, "-role", "goproxy", "-listen", d.Listen, "-upstream", d.Upstream}, nil
	}},
	// relay is not a proxy to deploy but a floor: bytes passed between paired
	// connections (relay.go), what the kernel alone costs per keep-alive request.
	"relay": {Name: "relay", only: []string{"keepalive", "keepalive-64", "syscalls-keepalive"}, command: func(e *env, dir string, d confData) ([]string, error) {
		return []string{e.self, "-role", "relay", "-listen", d.Listen, "-upstream", d.Upstream}, nil
	}},
}

// proc is a process the harness started in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	pid  int
	log  string
	done chan struct{}
	err  error // exit status, once done is closed
}

// startProc starts argv pinned to cpus (taskset list, "" for no pinning), with
// its output in logFile, in a new process group.
func startProc(name, cpus string, argv []string, logFile string) (*proc, error) {
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, pid: cmd.Process.Pid, log: logFile, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after 3 s.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		syscall.Kill(-p.pid, syscall.SIGKILL)
		<-p.done
	}
	// Workers that outlived their master (they should not) go too.
	syscall.Kill(-p.pid, syscall.SIGKILL)
}

// tail returns the last lines of the process's output and of the error.log
// next to it (where the proxies' configs send their error logs).
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if e, err := os.ReadFile(filepath.Join(filepath.Dir(p.log), "error.log")); err == nil {
		b = append(append(b, '\n'), e...)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}

// waitReady waits until a GET of path through addr answers 200.
func waitReady(p *proc, addr netip.AddrPort, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited (%v): %s", p.name, p.err, p.tail())
		}
		r, err := getOnce(addr, path, time.Second)
		if err == nil && r.status == 200 {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("status %d", r.status)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %v", timeout, last)
}

// getOnce does one GET on a fresh connection.
func getOnce(addr netip.AddrPort, path string, timeout time.Duration) (response, error) {
	c, err := net.DialTimeout("tcp4", addr.String(), timeout)
	if err != nil {
		return response{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	return roundTrip(c, request(path, false), make([]byte, 0, 4096))
}

// request returns a GET request for path.
func request(path string, closeConn bool) []byte {
	s := "GET " + path + " HTTP/1.1\r\nHost: bench\r\n"
	if closeConn {
		s += "Connection: close\r\n"
	}
	return []byte(s + "\r\n")
}

type readWriter interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
}

// roundTrip writes req and reads one whole response. buf is scratch space; the
// response's body aliases it.
func roundTrip(c readWriter, req, buf []byte) (response, error) {
	if _, err := c.Write(req); err != nil {
		return response{}, err
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			r, perr := parseResponse(buf, false)
			if perr == nil {
				if r.size != len(buf) {
					return r, fmt.Errorf("%d bytes after the response", len(buf)-r.size)
				}
				return r, nil
			}
			if !errors.Is(perr, errIncomplete) {
				return r, perr
			}
		}
		if err != nil {
			return response{}, err
		}
		if n == 0 {
			return response{}, fmt.Errorf("read returned nothing")
		}
	}
}

// freePort returns a 127.0.0.1 port nobody listens on right now.
func freePort() (netip.AddrPort, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).AddrPort(), nil
}
