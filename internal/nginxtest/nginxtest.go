// Package nginxtest starts Debian's nginx, the specification, from a Go test, so a
// package can compare its answers with nginx's on the same configuration.
package nginxtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/internal/testport"
)

// Binary is Debian's nginx.
const Binary = "/usr/sbin/nginx"

// Server is an nginx process (no master, in the foreground) a test started.
type Server struct {
	Addr   string // 127.0.0.1:port of "LISTEN"
	Dir    string // its prefix: configuration, logs, the caller's files
	client *http.Client
}

// Start runs nginx on httpBody, the inside of an http block in which each "LISTEN"
// becomes "listen 127.0.0.1:port" (one port for the whole instance). files are
// written in its prefix first, by relative name. The test is skipped where nginx is
// not installed, except in CI (CI set), where that is a failure.
func Start(t testing.TB, httpBody string, files map[string]string) *Server {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed", Binary)
		}
		t.Skipf("%s is not installed: no comparison with nginx", Binary)
	}
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	cfg := fmt.Sprintf("daemon off;\nmaster_process off;\n%spid %s/nginx.pid;\nerror_log %s/error.log info;\n"+
		"events { worker_connections 64; }\nhttp {\naccess_log off;\nclient_body_temp_path %s;\n%s\n}\n",
		user, dir, dir, dir, strings.ReplaceAll(httpBody, "LISTEN", "listen "+addr))
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary, "-p", dir+"/", "-c", file, "-e", filepath.Join(dir, "error.log"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s := &Server{Addr: addr, Dir: dir, client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 4, DisableCompression: true,
	}}}
	t.Cleanup(func() {
		s.client.CloseIdleConnections()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s%s", out.String(), log)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartError runs "nginx -t" on httpBody and returns what it printed, for
// comparing configuration errors; ok is whether nginx accepted it.
func StartError(t testing.TB, httpBody string, files map[string]string) (output string, ok bool) {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Skipf("%s is not installed", Binary)
	}
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf("pid %s/nginx.pid;\nerror_log %s/error.log;\nevents { }\nhttp {\naccess_log off;\n%s\n}\n",
		dir, dir, strings.ReplaceAll(httpBody, "LISTEN", "listen 127.0.0.1:1"))
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(Binary, "-t", "-q", "-p", dir+"/", "-c", file, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
	return string(b), err == nil
}

func freeAddr(t testing.TB) string { return "127.0.0.1:" + strconv.Itoa(testport.Free(t)) }

// Get sends GET target with the given headers ("Name: value", Host included) and
// returns the status and body.
func (s *Server) Get(t testing.TB, target string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+s.Addr+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u := req.URL; strings.Contains(target, "%") {
		u.Opaque = target // keep the target's escapes as written
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		value = strings.TrimSpace(value)
		if strings.EqualFold(name, "host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	return resp.StatusCode, string(body)
}

// ErrorLog returns nginx's error log so far.
func (s *Server) ErrorLog() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "error.log"))
	return string(b)
}
