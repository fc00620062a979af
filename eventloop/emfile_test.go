package eventloop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const emfileChildEnv = "EVENTLOOP_EMFILE_CHILD"

// emfileChild runs in a re-executed test binary with RLIMIT_NOFILE at 64: an
// echo loop whose listener address goes to stdout; each line on stdin asks for
// the loop's stats; stdin EOF stops it. With EVENTLOOP_EMFILE_CHILD=idle the
// connections are idle between echoes.
func emfileChild() int {
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 64, Max: 64}); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 2
	}
	h := echoHandler()
	if os.Getenv(emfileChildEnv) == "idle" {
		h = idleEchoHandler()
	}
	l, err := New(Config{CPU: -1, Handler: h})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := Listen("127.0.0.1:0", 1024)
	if err == nil {
		err = l.AddListener(ln)
	}
	if err == nil {
		err = l.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		s := l.Stats()
		fmt.Printf("accepted=%d conns=%d stops=%d\n", s.Accepted, s.Conns, s.AcceptStops)
	}
	_ = l.Stop()
	<-l.Done()
	return 0
}

// idleEchoHandler echoes and keeps its connections idle between messages.
func idleEchoHandler() *funcHandler {
	return &funcHandler{
		open: func(c Conn) { c.SetIdle(true) },
		data: func(c Conn, b []byte) { _, _ = c.Write(b); c.SetIdle(true) },
	}
}

// emfileProc is the re-executed child of an EMFILE test.
type emfileProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	stderr strings.Builder
	addr   string
}

func startEMFILEChild(t *testing.T, mode string) *emfileProc {
	p := &emfileProc{t: t, cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), emfileChildEnv+"="+mode)
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	p.out = bufio.NewScanner(stdoutPipe)
	if !p.out.Scan() {
		t.Fatalf("child gave no address; stderr: %s", p.stderr.String())
	}
	p.addr = p.out.Text()
	return p
}

func (p *emfileProc) stats() (accepted, conns, stops int) {
	if _, err := io.WriteString(p.stdin, "stats\n"); err != nil || !p.out.Scan() {
		p.t.Fatalf("child stats: %v; stderr: %s", err, p.stderr.String())
	}
	if _, err := fmt.Sscanf(p.out.Text(), "accepted=%d conns=%d stops=%d", &accepted, &conns, &stops); err != nil {
		p.t.Fatal(err)
	}
	return
}

// stop ends the child and returns its stderr.
func (p *emfileProc) stop() string {
	_ = p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Fatalf("child: %v; stderr: %s", err, p.stderr.String())
		}
	case <-time.After(20 * time.Second):
		p.t.Fatal("child did not exit")
	}
	return p.stderr.String()
}

// TestAcceptSurvivesEMFILE: out of fds with nothing idle to close, the loop leaves
// new connections queued and takes them once fds are free.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	p := startEMFILEChild(t, "busy")
	addr, stats := p.addr, p.stats

	// Far more connections than the child has fds: the kernel completes the
	// handshakes; the child accepts until EMFILE and leaves the rest queued.
	const total = 100
	conns := make([]net.Conn, total)
	for i := range conns {
		conns[i] = dial(t, addr)
		defer conns[i].Close()
	}
	var accepted, stops int
	waitFor(t, "the child to run out of fds", func() bool { accepted, _, stops = stats(); return stops > 0 })
	if accepted >= total {
		t.Fatalf("accepted %d of %d under a 64 fd limit", accepted, total)
	}
	// Accept order is connect order: the first `accepted` are served, and the loop still answers.
	if got := roundTrip(t, conns[0], "alive"); got != "alive" {
		t.Fatalf("echo %q", got)
	}
	// Free some fds: the queued connections get accepted and served.
	const freed = 10
	for _, c := range conns[:freed] {
		_ = c.Close()
	}
	waitFor(t, "accepts to resume", func() bool { a, _, _ := stats(); return a >= accepted+freed })
	for _, c := range conns[accepted : accepted+freed] {
		if got := roundTrip(t, c, "served"); got != "served" {
			t.Fatalf("echo %q", got)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	waitFor(t, "every connection accepted and closed", func() bool { a, n, _ := stats(); return a == total && n == 0 })
	stderr := p.stop()
	// One log line per second at most, however many retries it took.
	if n := strings.Count(stderr, "accept4() failed (24: Too many open files)"); n < 1 || n > 3 {
		t.Errorf("%d accept failure logs, want 1 a second; stderr:\n%s", n, stderr)
	}
	t.Logf("child accepted %d before EMFILE; %d listener stops", accepted, stops)
}

// TestEMFILEReusesIdle: out of fds, the loop closes its oldest idle connections to
// accept new ones, so every new client is served; it says so once a second at most.
func TestEMFILEReusesIdle(t *testing.T) {
	p := startEMFILEChild(t, "idle")
	const total = 150 // far more than the 64 fds the child has
	conns := make([]net.Conn, total)
	start := time.Now()
	for i := range conns {
		conns[i] = dial(t, p.addr)
		defer conns[i].Close()
		if got := roundTrip(t, conns[i], "hi"); got != "hi" {
			t.Fatalf("client %d: echo %q", i, got)
		}
	}
	elapsed := time.Since(start)
	accepted, open, stops := p.stats()
	if accepted != total || stops != 0 {
		t.Fatalf("accepted %d of %d, %d listener stops", accepted, total, stops)
	}
	// The oldest went first: the closed ones are the first clients, the newest are open.
	closed := 0
	for closed < total && isClosed(t, conns[closed]) {
		closed++
	}
	for i := closed; i < total; i++ {
		if isClosed(t, conns[i]) {
			t.Fatalf("client %d closed but %d, older, is open", i, closed)
		}
	}
	if closed == 0 || closed+open != total {
		t.Fatalf("%d oldest closed, %d open, of %d", closed, open, total)
	}
	stderr := p.stop()
	n := strings.Count(stderr, "accept4() failed (24: Too many open files), reusing connections")
	if n < 1 || n > int(elapsed/limitLogInterval)+2 {
		t.Errorf("%d EMFILE logs in %v, want 1 a second at most; stderr:\n%s", n, elapsed, stderr)
	}
	t.Logf("%d clients served in %v under a 64 fd limit: %d oldest idle closed, %d log lines", total, elapsed, closed, n)
}

// isClosed reports whether the server closed c cleanly (EOF), or fails the test on a
// reset or unexpected data.
func isClosed(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var b [1]byte
	n, err := c.Read(b[:])
	switch {
	case err == io.EOF:
		return true
	case n == 0 && err != nil && os.IsTimeout(err):
		return false
	}
	t.Fatalf("read %q, %v: want a clean close or nothing", b[:n], err)
	return false
}
